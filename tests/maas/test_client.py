"""The MAAS client against the simulator: every method, every error class, retry, no resend."""

from __future__ import annotations

import base64
import logging

import pytest

from maas_client.client import MaasClient
from maas_client.errors import (
    MaasAuthError,
    MaasBadRequest,
    MaasNotFound,
    MaasStateConflict,
    MaasTransient,
)
from maas_client.stats import CallStats
from maas_client.status import NodeStatus
from maas_client.wire import api_root, encode_multipart
from tests.support.maas import API_KEY, Sim, wait_for

S = NodeStatus


def test_api_root_normalisation() -> None:
    for url in ("http://m:5240/MAAS", "http://m:5240/MAAS/", "http://m:5240/MAAS/api/2.0/"):
        assert api_root(url) == "http://m:5240/MAAS/api/2.0/"


def test_multipart_parts_are_base64_like_real_clients() -> None:
    body, content_type = encode_multipart([("distro_series", "jammy")])
    assert content_type.startswith("multipart/form-data; boundary=")
    assert b"Content-Transfer-Encoding: base64" in body
    assert base64.b64encode(b"jammy") in body


def test_site_level_reads(maas: MaasClient) -> None:
    version = maas.version()
    assert version.version.startswith("3.")
    assert "authenticate-api" in version.capabilities
    me = maas.whoami()
    assert (me.username, me.is_superuser) == ("admin", True)
    assert {s.cidr for s in maas.subnets()} >= {"10.20.0.0/16"}
    assert ("jammy", "amd64") in {(b.series, b.arch) for b in maas.boot_resources()}
    assert maas.get_config("default_distro_series") == "jammy"


def test_list_filters_and_read_one(maas: MaasClient, sim: Sim) -> None:
    a = sim.add(hostname="c07u31", status="ready", power_address="10.10.0.31")
    sim.add(hostname="c07u32", status="new", power_address="10.10.0.32")
    assert [m.system_id for m in maas.list_machines(hostnames=["c07u31"])] == [a]
    mac = maas.get_machine(a).interfaces[0].mac_address
    assert [m.hostname for m in maas.list_machines(mac_addresses=[mac])] == ["c07u31"]
    assert [m.hostname for m in maas.list_machines(statuses=["new"])] == ["c07u32"]
    assert [m.hostname for m in maas.list_machines(system_ids=[a])] == ["c07u31"]
    assert maas.list_machines(hostnames=["nope"]) == []
    assert maas.power_addresses()[a] == "10.10.0.31"
    machine = maas.get_machine(a)
    assert machine.status == S.READY and machine.status_name == "Ready"
    assert machine.boot_interface is not None
    assert machine.boot_interface.links[0].mode == "auto"
    with pytest.raises(MaasNotFound, match="No Machine matches the given query"):
        maas.get_machine("zzzzzz")


def test_create_commission_deploy_release(maas: MaasClient, sim: Sim) -> None:
    created = maas.create_machine(
        hostname="c07u40",
        mac_addresses=["52:54:00:aa:bb:01"],
        power_parameters={"power_address": "10.10.0.40", "power_user": "maas", "power_pass": "x"},
    )
    sid = created.system_id
    assert created.status == S.NEW
    assert sim.model.machines[sid].power_parameters["power_user"] == "maas"
    with pytest.raises(MaasBadRequest) as dup:
        maas.create_machine(
            hostname="other",
            mac_addresses=["52:54:00:aa:bb:01"],
            power_parameters={"power_address": "1.2.3.4"},
        )
    assert "already in use" in dup.value.field_errors["mac_addresses"][0]

    assert maas.commission(sid, enable_ssh=True, skip_bmc_config=True).status == S.COMMISSIONING
    wait_for(maas, sid, S.READY)
    assert maas.set_storage_layout(sid, "lvm").status == S.READY
    user_data = b"#cloud-config\nruncmd: [echo hi]\n"
    deploying = maas.deploy(sid, distro_series="jammy", user_data=user_data, enable_hw_sync=True)
    assert deploying.status == S.DEPLOYING
    assert sim.model.machines[sid].user_data == user_data
    deployed = wait_for(maas, sid, S.DEPLOYED)
    assert deployed.enable_hw_sync and deployed.last_sync is not None
    assert "Installation finished" in maas.installation_output(sid)
    sets = maas.script_results(sid, result_type="commissioning", include_output=True)
    assert sets and sets[-1].status_name == "Passed"
    assert maas.release(sid, erase=True, quick_erase=True).status == S.DISK_ERASING
    released = wait_for(maas, sid, S.READY)
    assert released.owner is None and released.distro_series == ""
    # MAAS answers 400 for current-installation once released: no stale install log
    assert maas.installation_output(sid) == ""
    assert sim.mutations(sid) == [
        "machine.commission",
        "machine.set_storage_layout",
        "machine.deploy",
        "machine.release",
    ]


def test_state_conflicts_carry_maas_texts(maas: MaasClient, sim: Sim) -> None:
    sid = sim.add(hostname="n1", status="new")
    with pytest.raises(
        MaasStateConflict, match="Can't deploy a machine that is in the 'New' state"
    ):
        maas.deploy(sid, distro_series="jammy")
    with pytest.raises(
        MaasStateConflict, match=r"Cannot abort in current state: node \w+ is in state New"
    ):
        maas.abort(sid)
    with pytest.raises(MaasStateConflict, match="Can't mark a non-broken node as 'Ready'"):
        maas.mark_fixed(sid)
    with pytest.raises(
        MaasStateConflict, match="cannot be released in its current state \\('New'\\)"
    ):
        maas.release(sid)
    with pytest.raises(MaasStateConflict, match="not Ready"):
        maas.set_storage_layout(sid, "flat")
    with pytest.raises(MaasAuthError):  # mark_broken needs ownership, even for admins
        maas.mark_broken(sid)
    ready = sim.add(hostname="n1r", status="ready")
    with pytest.raises(MaasBadRequest) as bad:
        maas.set_storage_layout(ready, "zfs")
    assert "storage_layout" in bad.value.field_errors


def test_abort_broken_fixed_and_power(maas: MaasClient, sim: Sim) -> None:
    sid = sim.add(hostname="n2", status="ready")
    maas.deploy(sid, distro_series="jammy")
    # MAAS answers abort with the status before it; the change follows the answer
    assert maas.abort(sid, comment="operator stop").status == S.DEPLOYING
    assert maas.get_machine(sid).status == S.ALLOCATED
    assert maas.mark_broken(sid, comment="bad DIMM").status == S.BROKEN
    assert maas.get_machine(sid).error_description == "bad DIMM"
    assert maas.mark_fixed(sid).status == S.READY
    with pytest.raises(MaasStateConflict, match="hasn't been allocated"):
        maas.power_on(sid)
    assert maas.query_power_state(sid) == "off"
    machine = maas.power_off(sid)
    assert machine is not None and machine.power_state == "off"


def test_interfaces_link_and_unlink(maas: MaasClient, sim: Sim) -> None:
    sid = sim.add(hostname="n3", status="ready")
    boot = maas.interfaces(sid)[0]
    link = boot.links[0]
    after_unlink = maas.unlink_subnet(sid, boot.id, link.id)
    assert [lk.mode for lk in after_unlink.links] == ["link_up"]
    relinked = maas.link_subnet(sid, boot.id, mode="AUTO", subnet=1, force=True)
    assert [(lk.mode, lk.subnet.cidr if lk.subnet else None) for lk in relinked.links] == [
        ("auto", "10.20.0.0/16")
    ]
    with pytest.raises(MaasBadRequest) as bad:
        maas.link_subnet(sid, boot.id, mode="auto", subnet=99)
    assert "subnet" in bad.value.field_errors
    maas.deploy(sid, distro_series="jammy")
    with pytest.raises(MaasStateConflict, match="Cannot link subnet interface"):
        maas.link_subnet(sid, boot.id, mode="auto", subnet=1)


def test_events_are_paged_newest_first(maas: MaasClient, sim: Sim) -> None:
    sid = sim.add(hostname="n4", status="new")
    maas.commission(sid)
    wait_for(maas, sid, S.READY)
    page = maas.events(system_ids=[sid], limit=3)
    assert len(page.events) == 3
    assert page.events[0].id > page.events[-1].id
    assert page.events[0].type == "Ready"
    older = maas.events(system_ids=[sid], limit=3, before=page.oldest_id)
    assert older.events and older.events[0].id < page.oldest_id
    everything = maas.events(system_ids=[sid], level="DEBUG", limit=1000)
    assert any(e.type == "Node changed status" for e in everything.events)
    assert maas.get_machine(sid).status_message == "Ready"


def test_wrong_key_is_auth_error(sim: Sim) -> None:
    consumer, token, _ = API_KEY.split(":")
    bad = MaasClient(sim.url, f"{consumer}:{token}:wrongsecret", sleep=lambda s: None)
    with pytest.raises(MaasAuthError, match="Invalid signature") as err:
        bad.whoami()
    assert err.value.status == 401
    unknown = MaasClient(sim.url, "nobody1:nobody2:nobody3", sleep=lambda s: None)
    with pytest.raises(MaasAuthError, match="Invalid API key"):
        unknown.list_machines()


def test_safe_reads_retry_transient_errors_honouring_retry_after(
    maas: MaasClient, sim: Sim, sleeps: list[float]
) -> None:
    sim.faults({"kind": "503", "count": 2, "method": "GET", "retry_after": 3})
    assert maas.list_machines() == []
    assert sleeps == [3.0, 3.0]
    assert sim.count("machines.read", status=503) == 2
    assert sim.count("machines.read", status=200) == 1
    sleeps.clear()
    sim.faults({"kind": "409", "count": 1, "method": "GET", "retry_after": 5})
    maas.version()
    assert sleeps == [5.0]


def test_reads_give_up_after_bounded_attempts(
    maas: MaasClient, sim: Sim, sleeps: list[float]
) -> None:
    sim.faults({"kind": "502", "count": 10, "method": "GET"})
    with pytest.raises(MaasTransient):
        maas.whoami()
    assert len(sleeps) == maas.read_attempts - 1
    assert all(0 <= s <= maas.backoff_cap for s in sleeps)


def test_mutation_is_never_resent(maas: MaasClient, sim: Sim, sleeps: list[float]) -> None:
    sid = sim.add(hostname="n5", status="ready")
    sim.faults({"kind": "503", "count": 1, "op": "deploy", "retry_after": 1})
    with pytest.raises(MaasTransient) as refused:
        maas.deploy(sid, distro_series="jammy")
    assert refused.value.maybe_applied is False  # 503 + Retry-After: MAAS refused up front
    assert sleeps == []
    assert sim.count("machine.deploy") == 1
    assert maas.get_machine(sid).status == S.READY

    sim.faults({"kind": "drop_after_apply", "count": 1, "op": "deploy"})
    with pytest.raises(MaasTransient) as dropped:
        maas.deploy(sid, distro_series="jammy")
    assert dropped.value.maybe_applied is True
    assert sim.count("machine.deploy", status=200) == 1  # sent once, applied once
    assert maas.get_machine(sid).status == S.DEPLOYING  # the caller reads back and sees it


def test_a_503_without_retry_after_may_have_been_applied(
    maas: MaasClient, sim: Sim, sleeps: list[float]
) -> None:
    """MAAS's PowerProblem (no rack reaches the BMC) is a 503 without Retry-After raised after
    the change was committed: the recorded MAAS 3.5.10 kept the machine a create with
    commission=true answered 503 to. The client reads that as maybe applied, never resends."""
    sim.faults({"kind": "503_after_apply", "count": 1, "method": "POST"})
    with pytest.raises(MaasTransient) as answered:
        maas.create_machine(
            hostname="pp1", mac_addresses=[], power_parameters={"power_address": "10.0.0.9"}
        )
    assert (answered.value.status, answered.value.retry_after) == (503, None)
    assert answered.value.maybe_applied is True
    assert sleeps == [] and sim.count("machines.create") == 1
    assert [m.hostname for m in maas.list_machines(hostnames=["pp1"])] == ["pp1"]


def test_409_without_retry_after_is_not_retried(
    maas: MaasClient, sim: Sim, sleeps: list[float]
) -> None:
    sid = sim.add(hostname="n6", status="new")
    with pytest.raises(MaasStateConflict):
        maas.deploy(sid, distro_series="jammy")
    assert sleeps == []


def test_read_timeout_is_transient_and_retried(sim: Sim) -> None:
    sleeps: list[float] = []
    client = MaasClient(sim.url, API_KEY, read_timeout=0.3, sleep=sleeps.append)
    sim.faults({"kind": "slow", "count": 1, "method": "GET", "delay": 1.0})
    assert client.whoami().username == "admin"
    assert len(sleeps) == 1


def test_connection_refused_is_transient_and_not_applied() -> None:
    client = MaasClient("http://127.0.0.1:9/MAAS/", API_KEY, read_attempts=1, connect_timeout=1)
    with pytest.raises(MaasTransient) as err:
        client.deploy("abc123", distro_series="jammy")
    assert err.value.maybe_applied is False


def test_calls_are_counted_and_logged_without_secrets(
    sim: Sim, caplog: pytest.LogCaptureFixture
) -> None:
    stats = CallStats()
    client = MaasClient(sim.url, API_KEY, site="lab-east", stats=stats, sleep=lambda s: None)
    sid = sim.add(hostname="n7", status="ready")
    caplog.set_level(logging.DEBUG, logger="maas.client")
    client.get_machine(sid)
    with pytest.raises(MaasStateConflict):
        client.mark_fixed(sid)
    snapshot = stats.snapshot()
    assert snapshot[("get_machine", "ok")].count == 1
    assert snapshot[("mark_fixed", "conflict")].count == 1
    records = [r for r in caplog.records if r.name == "maas.client"]
    assert {r.maas_operation for r in records} == {"get_machine", "mark_fixed"}  # type: ignore[attr-defined]
    assert all(r.site == "lab-east" and r.maas_system_id == sid for r in records)  # type: ignore[attr-defined]
    assert API_KEY.split(":")[2] not in caplog.text
    assert (
        "SimTokenSecret"
        not in repr(client.session.auth.__dict__.get("client", ""))[:0] + caplog.text
    )


def test_update_machine_sets_hostname_and_power(maas: MaasClient, sim: Sim) -> None:
    sid = sim.add(hostname="enlisted", status="new", power_type="manual")
    updated = maas.update_machine(
        sid, hostname="c07u60", power_type="ipmi", power_parameters={"power_address": "10.1.2.3"}
    )
    assert (updated.hostname, updated.power_type) == ("c07u60", "ipmi")
    assert maas.power_addresses([sid]) == {sid: "10.1.2.3"}
    assert sim.mutations(sid) == ["machine.update"]


def test_script_runs_come_oldest_first_whatever_order_maas_lists_them_in(
    maas: MaasClient, sim: Sim
) -> None:
    """MAAS lists a machine's runs in the database's order (no ORDER BY), which changes once
    rows are deleted: the recorded MAAS 3.5.10 listed a newer release run first."""
    sid = sim.add(hostname="order1", status="deployed")
    model = sim.model
    with model.lock:
        m = model.machines[sid]
        m.script_sets.reverse()  # as a database may return them
    sets = maas.script_results(sid)
    assert [s.id for s in sets] == sorted(s.id for s in sets) and len(sets) >= 3
    assert sets[-1].type_name == "Installation"  # the newest: the seeded deployment's
