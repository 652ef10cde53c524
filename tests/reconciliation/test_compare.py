"""What is drift (reconciliation/compare.py), judged on plain rows without MAAS or a database:
each kind of finding with the exact words an operator reads, and the cases that must stay quiet
(a machine in motion, one a workflow is deleting, a value an operator accepted)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from maas_client.status import NodeStatus as S
from maas_client.types import MachineSummary
from reconciliation.compare import (
    Finding,
    NodeRow,
    Observation,
    Outcome,
    StateRow,
    WorkflowRow,
    compare,
    label,
)

READ_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
BEFORE = READ_AT - timedelta(hours=1)
GRACE = timedelta(minutes=5)
OURS = "maascp"


def machine(sid: str = "abc", hostname: str = "n1", **kw: Any) -> MachineSummary:
    values: dict[str, Any] = {
        "status": S.DEPLOYED,
        "status_name": "Deployed",
        "power_state": "on",
        "owner": OURS,
    }
    return MachineSummary(system_id=sid, hostname=hostname, **(values | kw))


def node(id: int = 1, hostname: str = "n1", sid: str = "abc", **kw: Any) -> NodeRow:
    values: dict[str, Any] = {"ipmi_ip": "10.1.0.1", "state": "active", "updated_at": BEFORE}
    return NodeRow(id=id, hostname=hostname, maas_system_id=sid, **(values | kw))


def workflow(node_id: int | None = 1, **kw: Any) -> WorkflowRow:
    values: dict[str, Any] = {
        "kind": "onboarding",
        "id": 7,
        "state": "running",
        "stage": "deploy",
        "hostname": "n1",
        "system_id": "abc",
        "stage_started_at": BEFORE,
        "updated_at": BEFORE,
        "stage_timeout": 3600,
    }
    return WorkflowRow(node_id=node_id, **(values | kw))


def run(
    machines: list[MachineSummary] = (),  # type: ignore[assignment]
    nodes: list[NodeRow] = (),  # type: ignore[assignment]
    workflows: list[WorkflowRow] = (),  # type: ignore[assignment]
    *,
    power: dict[str, str] | None = None,
    states: dict[int, StateRow] | None = None,
    retired: set[str] | None = None,
    our_user: str = OURS,
    now: datetime = READ_AT,
) -> Outcome:
    return compare(
        machines=list(machines),
        power_addresses=power if power is not None else {"abc": "10.1.0.1"},
        our_user=our_user,
        nodes=list(nodes),
        retired_system_ids=retired or set(),
        states=states or {},
        workflows=list(workflows),
        read_at=READ_AT,
        now=now,
        stuck_grace=GRACE,
    )


def kinds(out: Outcome) -> list[str]:
    return sorted(f.kind for f in out.findings)


def test_a_node_in_step_with_maas_raises_nothing() -> None:
    m = machine()
    out = run([m], [node()])
    assert out.findings == []
    assert out.nodes_checked == 1
    assert out.observations == [Observation(1, "abc", m, "10.1.0.1")]
    assert out.skipped == set()


BASE: dict[str, Any] = {"node_id": 1, "system_id": "abc", "hostname": "n1"}


def test_an_active_node_missing_from_maas_is_critical() -> None:
    out = run([], [node()])
    assert out.findings == [
        Finding(
            "node:1",
            "missing_in_maas",
            "critical",
            "MAAS has no machine abc for node n1",
            {"expected": "abc", "observed": None, "node_state": "active"},
            **BASE,
        )
    ]
    assert out.observations == [Observation(1, "abc", None, "10.1.0.1")]
    assert out.counts() == {"missing_in_maas": 1}


def test_a_missing_node_that_is_not_active_is_a_warning() -> None:
    (finding,) = run([], [node(state="draining")]).findings
    assert (finding.kind, finding.severity) == ("missing_in_maas", "warning")


def test_a_machine_of_the_same_name_does_not_hide_a_missing_one() -> None:
    """The node's machine is gone; another machine with its hostname is not it."""
    other = machine(sid="xyz", owner="")
    out = run([other], [node()])
    assert kinds(out) == ["missing_in_maas", "unknown_machine"]
    unknown = next(f for f in out.findings if f.kind == "unknown_machine")
    assert unknown.system_id == "xyz"


def test_a_node_not_yet_in_maas_is_matched_by_its_unique_hostname() -> None:
    m = machine(sid="new1")
    out = run([m], [node(sid="")], power={})
    assert out.findings == []
    assert out.observations == [Observation(1, "new1", m, "")]


def test_two_machines_of_one_hostname_match_neither() -> None:
    out = run([machine(sid="a1", owner=""), machine(sid="a2", owner="")], [node(sid="")])
    assert kinds(out) == ["unknown_machine", "unknown_machine"]
    assert out.nodes_checked == 0  # not in MAAS yet: nothing to judge
    assert out.observations == []


def test_the_system_id_comes_from_the_open_workflow_then_the_last_state() -> None:
    m = machine(sid="wf1")
    out = run([m], [node(sid="")], [workflow(system_id="wf1", hostname="other")])
    assert out.observations == [Observation(1, "wf1", m, "")]
    assert out.findings == []
    state = StateRow(system_id="st1", accepted_status=None, accepted_power_state="")
    m2 = machine(sid="st1")
    out = run([m2], [node(sid="")], states={1: state})
    assert out.observations == [Observation(1, "st1", m2, "")]
    assert out.findings == []


def test_a_node_that_changed_after_maas_was_read_is_not_judged() -> None:
    """Stale MAAS data raises no drift: the node is judged next run."""
    for changed in (READ_AT, READ_AT + timedelta(seconds=1)):
        out = run([], [node(updated_at=changed)])
        assert (out.findings, out.skipped, out.nodes_checked) == ([], {"node:1"}, 0)
        assert out.observations == []
    out = run([], [node()], [workflow(updated_at=READ_AT, stage_started_at=None)])
    assert (out.findings, out.skipped) == ([], {"node:1"})


def test_a_machine_a_workflow_is_deleting_is_not_missing() -> None:
    out = run([], [node()], [workflow(machine_may_vanish=True)])
    assert out.findings == []
    assert out.nodes_checked == 1
    out = run([], [node()], [workflow(machine_may_vanish=False)])
    assert kinds(out) == ["missing_in_maas"]


def test_an_unknown_machine_is_information() -> None:
    m = machine(sid="zz9", hostname="stray", owner="", status=S.READY, status_name="")
    out = run([m], [])
    assert out.findings == [
        Finding(
            "machine:zz9",
            "unknown_machine",
            "info",
            "MAAS machine stray (zz9) is not known to us",
            {"observed": {"status": "Ready", "owner": None}},
            system_id="zz9",
            hostname="stray",
        )
    ]


def test_a_machine_deployed_to_us_with_nothing_of_ours_is_a_leak() -> None:
    m = machine(sid="zz9", hostname="stray", status=S.ALLOCATED, status_name="Allocated")
    out = run([m], [])
    assert out.findings == [
        Finding(
            "machine:zz9",
            "leak",
            "critical",
            "stray (zz9) is Allocated to maascp with no node or open workflow of ours",
            {"observed": {"status": "Allocated", "owner": "maascp"}},
            system_id="zz9",
            hostname="stray",
        )
    ]
    assert kinds(run([m._replace(owner="someone")], [])) == ["unknown_machine"]
    assert kinds(run([m._replace(status=S.READY)], [])) == ["unknown_machine"]
    assert kinds(run([m], [], our_user="")) == ["unknown_machine"]


def test_a_machine_claimed_by_a_workflow_or_retired_is_not_unknown() -> None:
    m = machine(sid="zz9", hostname="stray")
    assert run([m], [], [workflow(node_id=None, system_id="zz9", hostname="x")]).findings == []
    assert run([m], [], [workflow(node_id=None, system_id="", hostname="stray")]).findings == []
    assert run([m], [], retired={"zz9"}).findings == []


def test_a_node_that_is_not_active_but_whose_machine_is_deployed_to_us_is_a_leak() -> None:
    out = run([machine()], [node(state="draining")])
    assert out.findings == [
        Finding(
            "node:1",
            "leak",
            "critical",
            "n1 (abc) is Deployed to maascp but node n1 is draining with no open workflow",
            {"observed": {"status": "Deployed", "owner": "maascp"}, "node_state": "draining"},
            **BASE,
        )
    ]
    assert run([machine(owner="else")], [node(state="draining")]).findings == []
    assert run([machine(status=S.READY)], [node(state="draining")]).findings == []
    assert run([machine()], [node(state="draining")], our_user="").findings == []
    assert "leak" not in kinds(run([machine()], [node(state="draining")], [workflow()]))


def test_an_active_node_whose_machine_is_not_deployed_is_critical() -> None:
    m = machine(status=S.READY, status_name="Ready")
    out = run([m], [node()])
    assert out.findings == [
        Finding(
            "node:1",
            "status_mismatch",
            "critical",
            "MAAS shows n1 Ready; expected Deployed (node is active)",
            {
                "expected": ["Deployed"],
                "observed": "Ready",
                "observed_status": S.READY,
                "because": "node is active",
            },
            **BASE,
        )
    ]
    accepted = StateRow(system_id="abc", accepted_status=S.READY, accepted_power_state="")
    assert run([m], [node()], states={1: accepted}).findings == []
    assert run([m], [node(state="registered")]).findings == []


def test_a_workflow_stage_expects_its_statuses() -> None:
    m = machine(status=S.READY, status_name="Ready")
    expected = frozenset({S.DEPLOYING, S.DEPLOYED})
    (finding,) = run([m], [node()], [workflow(expected=expected)]).findings
    assert finding.severity == "warning"
    assert finding.message == (
        "MAAS shows n1 Ready; expected Deployed or Deploying (onboarding 7 in stage deploy)"
    )
    assert finding.detail["expected"] == ["Deployed", "Deploying"]
    assert run([machine()], [node()], [workflow(expected=expected)]).findings == []
    assert run([m], [node()], [workflow(expected=None)]).findings == []
    # a workflow that is not running (pending, or frozen for an operator) is not judged
    assert run([m], [node()], [workflow(expected=expected, state="pending")]).findings == []
    waiting = run([m], [node()], [workflow(expected=expected, state="waiting")])
    assert kinds(waiting) == ["status_mismatch"]


def test_a_bmc_error_is_unexpected_power() -> None:
    out = run([machine(power_state="error")], [node()], [workflow()])
    assert out.findings == [
        Finding(
            "node:1",
            "power_state_unexpected",
            "warning",
            "n1 power is error: the BMC reports an error",
            {"observed": "error", "because": "the BMC reports an error"},
            **BASE,
        )
    ]
    accepted = StateRow(system_id="abc", accepted_status=None, accepted_power_state="error")
    assert run([machine(power_state="error")], [node()], states={1: accepted}).findings == []


def test_an_active_deployed_node_powered_off_is_unexpected() -> None:
    (finding,) = run([machine(power_state="off")], [node()]).findings
    assert finding.kind == "power_state_unexpected"
    assert finding.message == "n1 power is off: an active, deployed node is powered off"
    off = machine(power_state="off")
    assert run([off], [node()], [workflow()]).findings == []  # a workflow may power it off
    assert kinds(run([off], [node(state="draining")])) == ["leak"]
    not_deployed = off._replace(status=S.DEPLOYING, status_name="Deploying")
    assert kinds(run([not_deployed], [node()])) == ["status_mismatch"]


def test_a_renamed_machine_and_a_moved_bmc_are_reported() -> None:
    out = run([machine(hostname="n1-renamed")], [node()], power={"abc": "10.1.0.9"})
    assert out.findings == [
        Finding(
            "node:1",
            "hostname_mismatch",
            "warning",
            "MAAS calls abc 'n1-renamed', our node is 'n1'",
            {"expected": "n1", "observed": "n1-renamed"},
            **BASE,
        ),
        Finding(
            "node:1",
            "power_address_mismatch",
            "warning",
            "MAAS power address of n1-renamed is 10.1.0.9, ours 10.1.0.1",
            {"expected": "10.1.0.1", "observed": "10.1.0.9"},
            **BASE,
        ),
    ]
    assert run([machine()], [node(ipmi_ip="")], power={"abc": "10.1.0.9"}).findings == []
    assert run([machine()], [node()], power={}).findings == []


def test_a_workflow_past_its_timeout_and_grace_is_stuck() -> None:
    started = READ_AT - timedelta(seconds=3600) - GRACE
    row = workflow(stage_started_at=started)
    assert run([machine()], [node()], [row], now=READ_AT).findings == []  # exactly the grace
    later = READ_AT + timedelta(seconds=1)
    out = run([machine()], [node()], [row], now=later)
    assert out.findings == [
        Finding(
            "node:1",
            "workflow_stuck",
            "critical",
            "onboarding 7 has been in stage deploy (running) for 3901s; its timeout is 3600s",
            {
                "workflow_kind": "onboarding",
                "workflow_id": 7,
                "workflow_state": "running",
                "stage": "deploy",
                "stage_started_at": started.isoformat(),
                "stage_timeout": 3600,
            },
            node_id=1,
            system_id="abc",
            hostname="n1",
        )
    ]


def test_a_stuck_workflow_without_a_node_is_its_own_subject() -> None:
    row = workflow(node_id=None, stage_started_at=READ_AT - timedelta(days=1))
    (finding,) = run([machine()], [], [row]).findings
    assert (finding.subject, finding.node_id) == ("workflow:onboarding:7", None)


def test_only_a_running_workflow_with_a_timeout_and_a_start_can_be_stuck() -> None:
    old = READ_AT - timedelta(days=1)
    for row in (
        workflow(stage_started_at=old, state="pending"),
        workflow(stage_started_at=old, state="manual_intervention"),
        workflow(stage_started_at=old, stage_timeout=None),
        workflow(stage_started_at=old, stage_timeout=0),
        workflow(stage_started_at=None),
    ):
        assert run([machine()], [node()], [row]).findings == [], row
    assert kinds(run([machine()], [node()], [workflow(stage_started_at=old)])) == ["workflow_stuck"]


def test_only_the_first_open_workflow_of_a_node_is_its_own() -> None:
    m = machine(status=S.READY, status_name="Ready")
    first = workflow(expected=frozenset({S.READY}), stage_started_at=None)
    second = workflow(id=8, expected=frozenset({S.DEPLOYED}), stage_started_at=None)
    assert run([m], [node()], [first, second]).findings == []


def test_label() -> None:
    assert label(S.READY) == "Ready"
    assert label(None) == "None"
    assert label(99) == "99"


def test_every_node_and_machine_is_judged_whatever_came_before() -> None:
    """A node skipped, not yet in MAAS or being deleted does not end the run for the rest."""
    nodes = [
        node(1, "moving", "s1", updated_at=READ_AT),  # in motion
        node(2, "unseen", ""),  # not in MAAS yet, no machine of its name
        node(3, "going", "s3"),  # its workflow deletes the machine
        node(4, "gone", "s4"),  # missing
        node(5, "n5", "s5"),  # renamed in MAAS
    ]
    machines = [
        machine("s1", "moving"),
        machine("r1", "old", owner=""),  # retired by us
        machine("c1", "claimed", owner=""),  # a workflow's
        machine("s5", "n5-new"),
        machine("u1", "stray", owner=""),
    ]
    rows = [
        workflow(3, id=3, hostname="going", system_id="s3", machine_may_vanish=True),
        workflow(None, id=9, hostname="claimed", system_id="c1", stage_started_at=None),
    ]
    out = run(machines, nodes, rows, retired={"r1"}, power={})
    assert out.skipped == {"node:1"}
    assert out.nodes_checked == 3
    assert sorted((f.subject, f.kind) for f in out.findings) == [
        ("machine:u1", "unknown_machine"),
        ("node:4", "missing_in_maas"),
        ("node:5", "hostname_mismatch"),
    ]


def test_the_open_workflow_knows_the_machine_better_than_the_last_state() -> None:
    m = machine(sid="wf1")
    state = StateRow(system_id="old", accepted_status=None, accepted_power_state="")
    out = run([m], [node(sid="")], [workflow(system_id="wf1")], states={1: state})
    assert out.observations == [Observation(1, "wf1", m, "")]


def test_a_machine_known_only_from_the_last_state_can_go_missing() -> None:
    state = StateRow(system_id="st1", accepted_status=None, accepted_power_state="")
    out = run([machine(sid="other", hostname="else", owner="")], [node(sid="")], states={1: state})
    assert ("node:1", "missing_in_maas") in [(f.subject, f.kind) for f in out.findings]


def test_a_node_whose_name_maas_does_not_know_waits() -> None:
    out = run([], [node(sid="")])
    assert (out.findings, out.nodes_checked, out.skipped) == ([], 0, set())


def test_a_status_without_its_name_is_shown_by_its_label() -> None:
    m = machine(status=S.READY, status_name="")
    (finding,) = run([m], [node()]).findings
    assert finding.message == "MAAS shows n1 Ready; expected Deployed (node is active)"
    assert finding.detail["observed"] == "Ready"


FAILED_HELD = [
    (S.FAILED_DEPLOYMENT, "Failed deployment"),
    (S.FAILED_COMMISSIONING, "Failed commissioning"),
    (S.FAILED_TESTING, "Failed testing"),
    (S.FAILED_DISK_ERASING, "Failed disk erasing"),
]


def test_a_machine_left_failed_and_held_by_us_with_nothing_of_ours_is_a_leak() -> None:
    for status, name in FAILED_HELD:
        m = machine(sid="zz9", hostname="stray", status=status, status_name=name)
        assert run([m], []).findings == [
            Finding(
                "machine:zz9",
                "leak",
                "critical",
                f"stray (zz9) is {name}, held by maascp, with no node or open workflow of ours",
                {"observed": {"status": name, "owner": "maascp"}},
                system_id="zz9",
                hostname="stray",
            )
        ], name
        # held by someone else, or by nobody: not ours
        assert kinds(run([m._replace(owner="someone")], [])) == ["unknown_machine"]
        assert kinds(run([m._replace(owner="")], [])) == ["unknown_machine"]
        # a workflow claims it (by system id or hostname): motion, not a leak
        claimed = workflow(node_id=None, system_id="zz9", hostname="x")
        assert run([m], [], [claimed]).findings == []
    # other statuses we may hold (Releasing, Broken, Ready) are not leaks
    for status in (S.RELEASING, S.BROKEN, S.READY, S.DISK_ERASING):
        assert kinds(run([machine(status=status)], [])) == ["unknown_machine"]


def test_a_failed_onboardings_node_whose_machine_it_left_failed_is_a_leak() -> None:
    m = machine(status=S.FAILED_DEPLOYMENT, status_name="Failed deployment")
    out = run([m], [node(state="provisioning")])
    assert out.findings == [
        Finding(
            "node:1",
            "leak",
            "critical",
            "n1 (abc) is Failed deployment, held by maascp, but node n1 is provisioning with "
            "no open workflow",
            {
                "observed": {"status": "Failed deployment", "owner": "maascp"},
                "node_state": "provisioning",
            },
            **BASE,
        )
    ]
    # an open workflow drives it (a retry): not a leak
    assert "leak" not in kinds(run([m], [node(state="provisioning")], [workflow()]))
    # an active node whose machine failed is a status mismatch of a node in service
    assert kinds(run([m], [node()])) == ["status_mismatch"]
