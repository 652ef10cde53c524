"""The site poll's listing stands in for the woken stage's machine read (workflows/hints.py),
and never for the look before a mutation.

Each test puts an onboarding in ``waiting`` on a machine of the simulator, runs the real site
poll (``scheduling.poll_site``: one listing, the wake, the ``workflow.advance`` message it
would send, recorded instead of sent), then runs that message as a worker would
(``step.run``, one stage per execution) and counts what reached MAAS on the simulator. No MAAS
client is stubbed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from config import celery_app
from maas_client.status import NodeStatus
from maas_client.types import Machine
from maas_domain.site_client import client_for_site
from onboarding.models import Onboarding
from tests.support.flows import assert_mutations_once
from tests.support.maas import API_KEY
from tests.support.stages import Bench
from workflows import hints, scheduling, step
from workflows.kinds import KINDS, StageContext

pytestmark = pytest.mark.django_db
S = NodeStatus
IPMI_PASSWORD = "hint-test-ipmi-secret"


@pytest.fixture(autouse=True)
def one_stage_per_execution(settings: Any) -> None:
    """The woken stage alone: a chain into the next stage would read MAAS for that stage."""
    settings.WORKFLOW_CHAIN_SECONDS = 0


@pytest.fixture
def advances(
    monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> Callable[[Callable[[], Any]], list[tuple[Any, ...]]]:
    """``sending(call)``: run ``call`` with its after-commit hand-offs, and return the
    ``workflow.advance`` messages it sent (their arguments)."""
    sent: list[tuple[str, tuple[Any, ...]]] = []

    def send_task(name: str, args: Any = (), kwargs: Any = None, **options: Any) -> None:
        sent.append((name, tuple(args or ())))

    monkeypatch.setattr(celery_app, "send_task", send_task)

    def sending(call: Callable[[], Any]) -> list[tuple[Any, ...]]:
        sent.clear()
        with django_capture_on_commit_callbacks(execute=True):
            call()
        return [args for name, args in sent if name == "workflow.advance"]

    return sending


def waiting(
    bench: Bench, hostname: str, *, machine: str, stage: str, on: S, sent: dict[str, int]
) -> tuple[Onboarding, str]:
    """An onboarding waiting in ``stage`` for its machine to leave ``on``; the machine shows
    ``machine`` in MAAS (so the next site poll sees it moved)."""
    sid = bench.sim.add(
        hostname=hostname,
        status=machine,
        power_address="10.77.0.1",
        power_parameters={"power_user": "admin", "power_pass": IPMI_PASSWORD},
    )
    wf = bench.onboarding(hostname, "10.77.0.1", maas_system_id=sid)
    now = timezone.now()
    Onboarding.objects.filter(pk=wf.pk).update(
        state="waiting",
        stage=stage,
        checkpoint="",
        dispatch=4,
        started_at=now,
        stage_started_at=now,
        stage_data={"sent": sent},
        wait_system_id=sid,
        wait_status=int(on),
        next_check_at=now + timedelta(seconds=600),
    )
    wf.refresh_from_db()
    return wf, sid


def woken(
    bench: Bench, wf: Onboarding, sending: Callable[[Callable[[], Any]], list[tuple[Any, ...]]]
) -> tuple[Any, ...]:
    """The site poll's message for ``wf``: (kind, pk, dispatch, hint)."""
    messages = sending(lambda: scheduling.poll_site(bench.site.pk))
    mine = [args for args in messages if args[1] == wf.pk]
    assert len(mine) == 1, messages
    return mine[0]


def run_message(bench: Bench, args: tuple[Any, ...]) -> str:
    """Run one ``workflow.advance`` message as a worker would, counting MAAS from zero."""
    bench.sim.reset_counters()
    return step.advance(*args)


# -- the woken stage reads nothing -------------------------------------------------------------


def test_a_woken_commission_ends_on_the_listing_without_reading_the_machine(
    bench: Bench, advances: Any
) -> None:
    wf, sid = waiting(
        bench, "h1", machine="ready", stage="commission", on=S.COMMISSIONING, sent={"commission": 1}
    )
    message = woken(bench, wf, advances)
    assert len(message) == 4 and message[3]["system_id"] == sid, message
    assert run_message(bench, message) == "done"
    wf.refresh_from_db()
    assert (wf.checkpoint, wf.stage, wf.state) == ("commission", "conformance", "running")
    assert bench.sim.count("machine.read") == 0
    assert bench.sim.mutations() == []


def test_a_woken_deploy_ends_on_the_listing_without_reading_the_machine(
    bench: Bench, advances: Any
) -> None:
    wf, _ = waiting(
        bench, "h2", machine="deployed", stage="deploy", on=S.DEPLOYING, sent={"deploy": 1}
    )
    assert run_message(bench, woken(bench, wf, advances)) == "done"
    wf.refresh_from_db()
    assert (wf.checkpoint, wf.state) == ("deploy", "running")
    assert bench.sim.count("machine.read") == 0
    assert bench.sim.mutations() == []


def test_a_machine_still_in_the_waited_status_is_not_woken(bench: Bench, advances: Any) -> None:
    waiting(bench, "h3", machine="deploying", stage="deploy", on=S.DEPLOYING, sent={"deploy": 1})
    assert advances(lambda: scheduling.poll_site(bench.site.pk)) == []


# -- a hint that does not fit is ignored: the stage reads MAAS ---------------------------------


def _stale(hint: dict[str, Any], other: str) -> None:
    hint["observed_at"] -= hints.MAX_AGE_SECONDS + 1


def _other_dispatch(hint: dict[str, Any], other: str) -> None:
    hint["dispatch"] -= 1  # the hint of an earlier wake of the same workflow


def _other_machine(hint: dict[str, Any], other: str) -> None:
    hint["system_id"] = other
    hint["machine"]["system_id"] = other


def _other_stage(hint: dict[str, Any], other: str) -> None:
    hint["stage"] = "deploy"


@pytest.mark.parametrize("spoil", [_stale, _other_dispatch, _other_machine, _other_stage])
def test_a_hint_that_does_not_fit_this_step_is_ignored(
    bench: Bench, advances: Any, spoil: Callable[[dict[str, Any], str], None]
) -> None:
    wf, _ = waiting(
        bench, "h4", machine="ready", stage="commission", on=S.COMMISSIONING, sent={"commission": 1}
    )
    other = bench.sim.add(hostname="h4-other", status="ready")
    kind, pk, dispatch, hint = woken(bench, wf, advances)
    spoil(hint, other)
    assert run_message(bench, (kind, pk, dispatch, hint)) == "done"
    assert bench.sim.count("machine.read") == 1  # MAAS read as without a hint
    wf.refresh_from_db()
    assert wf.checkpoint == "commission"


def test_the_message_without_the_hint_still_runs_and_reads_maas(
    bench: Bench, advances: Any
) -> None:
    """The sweep's re-dispatch, any other wake and a message sent before hints existed: three
    arguments, as before."""
    wf, _ = waiting(
        bench, "h5", machine="ready", stage="commission", on=S.COMMISSIONING, sent={"commission": 1}
    )
    kind, pk, dispatch, _ = woken(bench, wf, advances)
    assert run_message(bench, (kind, pk, dispatch)) == "done"
    assert bench.sim.count("machine.read") == 1
    wf.refresh_from_db()
    assert (wf.checkpoint, wf.stage) == ("commission", "conformance")


def test_a_hint_is_used_once(bench: Bench, advances: Any) -> None:
    """The same message delivered twice (at-least-once): the second claim is refused anyway;
    and within an execution only the woken stage's first read takes it."""
    wf, sid = waiting(
        bench, "h6", machine="ready", stage="commission", on=S.COMMISSIONING, sent={"commission": 1}
    )
    kind, pk, dispatch, hint = woken(bench, wf, advances)
    claimed = step.claim(KINDS[kind], pk, dispatch)
    assert claimed is not None
    ctx = StageContext(KINDS[kind], claimed[0], claimed[1], hint)
    bench.sim.reset_counters()
    first, second = ctx.machine(sid), ctx.machine(sid)
    assert first == second
    assert bench.sim.count("machine.read") == 1  # the second look is a real read
    ctx.close()


# -- look before you act: a hint never drives a mutation ---------------------------------------


def test_a_hint_leading_to_a_mutation_is_read_again_and_the_mutation_sent_once(
    bench: Bench, advances: Any
) -> None:
    """Back to New while commissioning: the listing shows New, and commissioning again is a
    mutation: the stage reads MAAS itself first, then sends it exactly once."""
    wf, sid = waiting(
        bench, "h7", machine="new", stage="commission", on=S.COMMISSIONING, sent={"commission": 1}
    )
    message = woken(bench, wf, advances)
    assert message[3]["machine"]["status"] == int(S.NEW)
    assert run_message(bench, message) == "wait"
    assert bench.sim.count("machine.read") == 1  # the look before the act
    assert_mutations_once(bench.sim, {sid: ("machine.commission",)})
    wf.refresh_from_db()
    assert wf.state == "waiting"
    assert wf.stage_data["sent"] == {"commission": 2}  # announced once more, sent once more
    sent_entries = [e for e in wf.events.filter(kind="maas.action")]
    assert len(sent_entries) == 1


def test_a_listing_older_than_maas_never_drives_a_mutation(bench: Bench, advances: Any) -> None:
    """The listing said New (commission again), but MAAS has moved on to Ready since: the
    stage's own read before the mutation sees Ready, and nothing is sent."""
    wf, _ = waiting(
        bench, "h8", machine="ready", stage="commission", on=S.COMMISSIONING, sent={"commission": 1}
    )
    kind, pk, dispatch, hint = woken(bench, wf, advances)
    hint["machine"].update(status=int(S.NEW), status_name="New")
    assert run_message(bench, (kind, pk, dispatch, hint)) == "done"
    assert bench.sim.count("machine.read") == 1
    assert bench.sim.mutations() == []
    wf.refresh_from_db()
    assert wf.checkpoint == "commission"


# -- what travels -------------------------------------------------------------------------------


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def test_the_hint_carries_the_machine_as_read_and_no_secret(bench: Bench, advances: Any) -> None:
    wf, sid = waiting(
        bench, "h9", machine="ready", stage="commission", on=S.COMMISSIONING, sent={"commission": 1}
    )
    message = woken(bench, wf, advances)
    wire = json.dumps(message)  # Celery's serializer is JSON: this is the message body
    assert IPMI_PASSWORD not in wire and "ipmi-pass" not in wire
    assert all(part not in wire for part in API_KEY.split(":"))
    assert not {k for k in _keys(message[3]) if k.startswith("power_") and k != "power_state"} - {
        "power_type"
    }
    client = client_for_site(bench.site)
    try:
        read = client.get_machine(sid)
    finally:
        client.close()
    assert Machine.from_json(message[3]["machine"]) == read  # what a read would have returned
