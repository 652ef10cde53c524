"""Each onboarding stage function, run once against the simulator with no broker and no worker
(tests/support/stages.py). The whole-flow tests (test_flows.py) keep one run per behaviour;
these pin each stage's decisions and the exact MAAS mutations it sends."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from maas_client.status import NodeStatus
from onboarding.models import Onboarding
from onboarding.payload import read_tokens
from tests.support.maas import Api
from tests.support.stages import Bench, run_stage

pytestmark = pytest.mark.django_db
S = NodeStatus


def run(wf: Onboarding, stage: str) -> Any:
    return run_stage("onboarding", wf, stage)


# -- preflight -------------------------------------------------------------------------------------


def test_preflight_passes_with_real_ca_material_and_fetchable_urls(bench: Bench) -> None:
    result, _ = run(bench.onboarding("p1", "10.1.0.1"), "preflight")
    assert type(result).__name__ == "Done", result


def test_preflight_lists_every_problem_at_once(bench: Bench) -> None:
    bench.site.ca_bundle_pem = "-----BEGIN CERTIFICATE-----\nplaceholder\n"
    bench.site.node_api_url = "http://127.0.0.1:9"  # nothing listens on the discard port
    bench.site.save()
    bench.policy(roce_phase2_enabled=True)
    result, _ = run(bench.onboarding("p2", "10.1.0.2"), "preflight")
    assert (type(result).__name__, result.failure_class) == ("Fail", "preflight")
    problems = result.data["problems"]
    assert any(p.startswith("ca_bundle_pem: A CERTIFICATE block does not") for p in problems)
    assert any("has no RoCE assignment" in p for p in problems)
    assert any("bootstrap endpoint" in p and "not fetchable" in p for p in problems)


def test_preflight_checks_again_an_endpoint_that_did_not_answer_in_time(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load the control plane's own node endpoint missed the check's timeout and the
    onboarding failed at preflight (3 of a 40-node batch): a URL that did not answer in time, or
    answered "later", is checked again with backoff; one that answered no is a failure."""
    import socket

    from onboarding import fetchcheck

    monkeypatch.setattr(fetchcheck, "TIMEOUT", (1.0, 0.5))
    silent = socket.socket()  # accepts, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        bench.site.node_api_url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        bench.site.save()
        result, _ = run(bench.onboarding("p4", "10.1.0.4"), "preflight")
    finally:
        silent.close()
    assert (type(result).__name__, result.classification) == ("Retry", "fetch_unavailable")
    assert "ReadTimeout" in result.message and result.after >= 5


def test_preflight_reaches_the_node_endpoint_as_a_node_does_trusting_its_ca(
    bench: Bench, tmp_path: Any
) -> None:
    """A node endpoint behind TLS with the deployment's own CA (compose's) was checked against
    the system's CAs and "not fetchable: SSLError" failed every onboarding: the preflight trusts
    what the node is given (the site's CA bundle, else MAASCP_NODE_CA_FILE), and only that."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.support.proxy import make_secrets

    tls = make_secrets(tmp_path / "tls")

    class Ok(BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls / "node-proxy.crt", tls / "node-proxy.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        bench.site.node_api_url = f"https://localhost:{server.server_address[1]}"
        bench.site.payload_allowed_hosts = ["localhost"]
        bench.site.ca_bundle_pem = (tls / "ca.pem").read_text()
        bench.site.save()
        trusted, _ = run(bench.onboarding("p5", "10.1.0.5"), "preflight")
        assert type(trusted).__name__ == "Done", trusted
        from devtools.demo import demo_ca_pem

        bench.site.ca_bundle_pem = demo_ca_pem()  # a CA that did not sign the endpoint
        bench.site.save()
        from onboarding import fetchcheck

        fetchcheck.forget()
        refused, _ = run(bench.onboarding("p6", "10.1.0.6"), "preflight")
        assert type(refused).__name__ == "Fail" and "SSLError" in refused.message, refused
    finally:
        server.shutdown()
        server.server_close()


def test_preflight_keeps_the_bundle_problems_with_the_trust_problems(bench: Bench) -> None:
    bench.site.ca_bundle_pem = "-----BEGIN CERTIFICATE-----\nplaceholder\n"
    bench.site.save()
    bench.policy(bootstrap_bundle_ref="oci://registry.test/infra/site:2")
    result, _ = run(bench.onboarding("p3", "10.1.0.38"), "preflight")
    problems = result.data["problems"]
    assert problems[:2] == [
        "site bootstrap bundle is an oci:// reference: the first-boot payload fetches with "
        "curl, so only https:// bundles are accepted",
        "site bootstrap bundle reference lacks a version or digest",
    ]
    assert any(p.startswith("ca_bundle_pem: ") for p in problems)
    assert result.message == "; ".join(problems)


# -- discover --------------------------------------------------------------------------------------


def test_discover_matches_by_hostname_first(bench: Bench) -> None:
    sid = bench.sim.add(hostname="d1", status="new", power_address="10.9.9.9")
    result, events = run(bench.onboarding("d1", "10.1.0.3"), "discover")
    assert result.updates["maas_system_id"] == sid
    assert events[0][2]["matched_by"] == "matched by hostname"
    assert bench.sim.mutations() == []


def test_discover_matches_by_ipmi_address(bench: Bench) -> None:
    sid = bench.sim.add(hostname="other-name", status="new", power_address="10.1.0.4")
    result, events = run(bench.onboarding("d2", "10.1.0.4"), "discover")
    assert result.updates["maas_system_id"] == sid
    assert events[0][2]["matched_by"] == "matched by IPMI address"


def test_discover_creates_the_machine_with_its_bmc_when_nothing_matches(bench: Bench) -> None:
    result, _ = run(bench.onboarding("d3", "10.1.0.5"), "discover")
    assert result.updates["created_machine"] is True
    sid = result.updates["maas_system_id"]
    # created from its BMC alone, then power-cycled through MAAS to discover it
    assert bench.sim.mutations() == ["machines.create", "machine.commission"]
    machine = bench.sim.model.machines[sid]
    assert machine.power_parameters["power_address"] == "10.1.0.5"


def test_discover_adopts_the_machine_a_503_create_made_instead_of_creating_another(
    bench: Bench,
) -> None:
    """A create MAAS answers 503 may have made the machine (recorded against MAAS 3.5.10: a
    PowerProblem after the commit, no Retry-After, the machine there): the rerun finds it by
    hostname and takes it as created by this workflow; no second create."""
    bench.sim.faults({"kind": "503_after_apply", "method": "POST", "count": 1})
    wf = bench.onboarding("d7", "10.1.0.13")
    first, _ = run_stage("onboarding", wf, "discover", record=True)
    assert type(first).__name__ == "Retry", first
    assert bench.sim.mutations() == ["machines.create"]
    result, events = run_stage("onboarding", wf, "discover", record=True)
    sid = result.updates["maas_system_id"]
    assert (result.updates["created_machine"], bench.sim.model.machines[sid].hostname) == (
        True,
        "d7",
    )
    assert events[0][2]["matched_by"] == "matched by hostname"
    assert bench.sim.mutations().count("machines.create") == 1


def test_discover_refuses_to_guess_between_two_machines(bench: Bench) -> None:
    bench.sim.model.allow_duplicate_hostnames = True
    bench.sim.add(hostname="d4", status="new")
    bench.sim.add(hostname="d4", status="ready")
    result, _ = run(bench.onboarding("d4", "10.1.0.6"), "discover")
    assert (type(result).__name__, result.failure_class) == ("Fail", "ambiguous")
    assert len(result.data["candidates"]) == 2
    assert bench.sim.mutations() == []


def test_discover_auto_claims_only_when_policy_allows(bench: Bench) -> None:
    sid = bench.sim.add(hostname="anonymous", status="new", power_type="manual")
    result, _ = run(bench.onboarding("d5", "10.1.0.7"), "discover")
    assert result.updates["created_machine"] is True  # policy off: created, not claimed
    bench.policy(auto_claim_new=True)
    result, _ = run(bench.onboarding("d6", "10.1.0.8"), "discover")
    assert result.updates["maas_system_id"] == sid
    assert bench.sim.model.machines[sid].hostname == "d6"


# -- commission ------------------------------------------------------------------------------------


def test_commission_sends_the_policy_flags_once_and_waits(bench: Bench) -> None:
    sid = bench.sim.add(hostname="c1", status="new")
    wf = bench.onboarding("c1", "10.1.0.9", maas_system_id=sid)
    result, events = run(wf, "commission")
    assert (type(result).__name__, result.system_id) == ("Wait", sid)
    assert bench.sim.mutations(sid) == ["machine.commission"]
    sent = next(data for kind, _, data in events if kind == "maas.action")
    assert (sent["enable_ssh"], sent["skip_bmc_config"]) == (True, True)
    assert wf.stage_data["sent"] == {"commission": 1}  # the intent log a re-run reads


def test_commission_does_not_recommission_a_ready_machine(bench: Bench) -> None:
    sid = bench.sim.add(hostname="c2", status="ready")
    result, _ = run(bench.onboarding("c2", "10.1.0.10", maas_system_id=sid), "commission")
    assert (type(result).__name__, result.message) == (
        "Done",
        "already Ready in MAAS; not recommissioned",
    )
    assert bench.sim.mutations(sid) == []


def test_commission_failure_names_the_failed_scripts(bench: Bench) -> None:
    sid = bench.sim.add(hostname="c3", status="new", faults={"commission_failure": [1]})
    wf = bench.onboarding("c3", "10.1.0.11", maas_system_id=sid)
    run(wf, "commission")
    bench.sim.advance(3600)
    result, _ = run(wf, "commission")
    assert (type(result).__name__, result.failure_class) == ("Fail", "commissioning")
    assert "failed scripts" in result.message


@pytest.mark.parametrize("status", ["allocated", "deploying", "deployed", "failed_deployment"])
def test_commission_takes_maas_truth_for_a_machine_past_commissioning(
    bench: Bench, status: str
) -> None:
    sid = bench.sim.add(hostname=f"c4{status[:4]}", status=status)
    wf = bench.onboarding(f"c4{status[:4]}", "10.1.0.12", maas_system_id=sid)
    result, _ = run(wf, "commission")
    assert type(result).__name__ == "Done", result
    assert "not recommissioned" in result.message
    assert bench.sim.mutations(sid) == []


def test_commission_refuses_a_machine_mid_erase(bench: Bench) -> None:
    sid = bench.sim.add(hostname="c4erase", status="disk_erasing")
    result, _ = run(bench.onboarding("c4erase", "10.1.0.12", maas_system_id=sid), "commission")
    assert (type(result).__name__, result.failure_class) == ("Fail", "unexpected_state")


# -- storage and PXE -------------------------------------------------------------------------------


def test_storage_pxe_applies_the_layout_and_keeps_a_good_auto_link(bench: Bench) -> None:
    sid = bench.sim.add(hostname="s1", status="ready")
    result, _ = run(bench.onboarding("s1", "10.1.0.13", maas_system_id=sid), "storage_pxe")
    assert type(result).__name__ == "Done", result
    assert bench.sim.mutations(sid) == ["machine.set_storage_layout"]


def test_storage_pxe_relinks_an_unlinked_pxe_interface(bench: Bench) -> None:
    sid = bench.sim.add(hostname="s2", status="ready", faults={"pxe_unlinked": True})
    result, _ = run(bench.onboarding("s2", "10.1.0.14", maas_system_id=sid), "storage_pxe")
    assert "relinked to AUTO" in result.message
    assert "interface.link_subnet" in bench.sim.mutations(sid)


def test_storage_pxe_moves_a_boot_interface_from_another_vlan(bench: Bench) -> None:
    """MAAS refuses a subnet of another VLAN unless forced: the boot NIC that landed on the
    storage VLAN is moved to the PXE subnet's."""
    sid = bench.sim.add(hostname="s4", status="ready", faults={"pxe_wrong_subnet": 2})
    result, _ = run(bench.onboarding("s4", "10.1.0.25", maas_system_id=sid), "storage_pxe")
    assert (type(result).__name__, result.message) == (
        "Done",
        "PXE interface eno1 relinked to AUTO on 10.20.0.0/16",
    )
    assert "interface.link_subnet" in bench.sim.mutations(sid)


def test_storage_pxe_fails_early_when_the_pxe_subnet_is_missing(bench: Bench) -> None:
    bench.site.pxe_subnet = "10.99.0.0/16"
    bench.site.save()
    sid = bench.sim.add(hostname="s3", status="ready")
    result, _ = run(bench.onboarding("s3", "10.1.0.15", maas_system_id=sid), "storage_pxe")
    assert (type(result).__name__, result.failure_class) == ("Fail", "pxe")


# -- payload, deploy -------------------------------------------------------------------------------


def test_payload_mints_this_attempts_tokens_and_records_the_versions(bench: Bench) -> None:
    wf = bench.onboarding("y1", "10.1.0.16", attempt=2)
    result, events = run(wf, "payload")
    assert result.updates["token_attempt"] == 2
    assert result.updates["agent_bootstrap_version"]
    assert events[0][0] == "payload.rendered"
    wf.token_attempt = 2
    wf.bootstrap_token_hash = result.updates["bootstrap_token_hash"]
    wf.enrollment_token_hash = result.updates["enrollment_token_hash"]
    assert read_tokens(wf) is not None  # the values are in the secrets backend


def test_deploy_sends_the_rendered_payload_once_and_adopts_deployed(bench: Bench) -> None:
    sid = bench.sim.add(hostname="y2", status="ready")
    wf = bench.onboarding("y2", "10.1.0.17", maas_system_id=sid)
    result, _ = run(wf, "payload")
    Onboarding.objects.filter(pk=wf.pk).update(**result.updates)
    result, _ = run(wf, "deploy")
    assert (type(result).__name__, result.status) == ("Wait", int(S.DEPLOYING))
    assert bench.sim.mutations(sid) == ["machine.deploy"]
    bench.sim.advance(3600)
    result, _ = run(wf, "deploy")
    assert (type(result).__name__, result.message) == ("Done", "MAAS says Deployed (jammy)")
    assert bench.sim.mutations(sid) == ["machine.deploy"]  # nothing more


def test_a_datasource_failure_is_released_and_redeployed_within_the_limit(bench: Bench) -> None:
    sid = bench.sim.add(hostname="y3", status="ready", faults={"deploy_datasource_failure": [1]})
    wf = bench.onboarding("y3", "10.1.0.18", maas_system_id=sid)
    run(wf, "deploy")
    bench.sim.advance(7200)
    result, events = run(wf, "deploy")
    assert (type(result).__name__, result.status) == ("Wait", int(S.RELEASING))
    decision = next(data for kind, _, data in events if kind == "retry.decision")
    assert (decision["classification"], decision["retry"]) == ("datasource", True)
    assert bench.sim.mutations(sid) == ["machine.deploy", "machine.release"]


def test_a_curtin_failure_is_not_retried(bench: Bench) -> None:
    sid = bench.sim.add(hostname="y4", status="ready", faults={"deploy_curtin_failure": [1]})
    wf = bench.onboarding("y4", "10.1.0.19", maas_system_id=sid)
    run(wf, "deploy")
    bench.sim.advance(7200)
    result, _ = run(wf, "deploy")
    assert (type(result).__name__, result.failure_class) == ("Fail", "curtin")
    assert bench.sim.mutations(sid) == ["machine.deploy"]


# -- hardware sync, enrollment, completion ---------------------------------------------------------


def test_hardware_sync_waits_for_the_first_seed_only_when_required(bench: Bench) -> None:
    sid = bench.sim.add(hostname="h1", status="deployed")
    wf = bench.onboarding("h1", "10.1.0.20", maas_system_id=sid)
    assert type(run(wf, "hardware_sync")[0]).__name__ == "Done"
    bench.policy(hardware_sync_required=True)
    result, _ = run(wf, "hardware_sync")
    assert (type(result).__name__, result.failure_class) == ("Fail", "hardware_sync")


def test_hardware_sync_is_not_done_before_maas_has_a_first_sync(bench: Bench) -> None:
    bench.policy(hardware_sync_required=True)
    sid = bench.sim.add(hostname="h2", status="deployed")
    wf = bench.onboarding("h2", "10.1.0.33", maas_system_id=sid)
    sim = bench.sim.model
    with sim.lock:
        m = sim.machines[sid]
        m.enable_hw_sync, m.last_sync = True, None
        m.touch(sim.now())
    result, _ = run(wf, "hardware_sync")
    assert (type(result).__name__, result.message, result.check_in) == (
        "Wait",
        "waiting for the first hardware sync",
        60,
    )
    with sim.lock:
        m.last_sync = sim.now()
        m.touch(m.last_sync)
    result, _ = run(wf, "hardware_sync")
    assert type(result).__name__ == "Done"
    assert result.message.startswith("hardware sync seeded at ")


def test_commission_says_whether_it_commissioned(bench: Bench) -> None:
    sid = bench.sim.add(hostname="c9", status="new")
    wf = bench.onboarding("c9", "10.1.0.34", maas_system_id=sid)
    run(wf, "commission")
    bench.sim.advance(7200)
    result, _ = run(wf, "commission")
    assert (type(result).__name__, result.message) == ("Done", "commissioned")
    ready = bench.sim.add(hostname="c10", status="ready")
    wf2 = bench.onboarding("c10", "10.1.0.35", maas_system_id=ready)
    assert run(wf2, "commission")[0].message == "already Ready in MAAS; not recommissioned"


def test_commission_refuses_a_machine_in_another_state(bench: Bench) -> None:
    sid = bench.sim.add(hostname="c11", status="releasing")
    wf = bench.onboarding("c11", "10.1.0.36", maas_system_id=sid)
    result, _ = run(wf, "commission")
    assert (type(result).__name__, result.failure_class, result.message) == (
        "Fail",
        "unexpected_state",
        "machine is Releasing in MAAS; onboarding needs New or Ready (release it in MAAS, or "
        "adopt the workflow)",
    )


def test_commission_of_a_machine_failed_testing_names_the_tests_and_sends_nothing(
    bench: Bench,
) -> None:
    """MAAS refuses to commission from Failed testing (recorded against MAAS 3.5.10:
    onboarding-sequence 192); clearing failed tests is a human's call, so the stage fails
    naming them and how to clear them, and sends nothing."""
    sid = bench.sim.add(hostname="c12", status="ready", faults={"script_fails": ["smartctl-short"]})
    api = Api(bench.sim)
    api.ok(sid, "test", testing_scripts="smartctl-short")
    bench.sim.advance(600)
    assert api.status(sid) == "Failed testing"
    wf = bench.onboarding("c12", "10.1.0.38", maas_system_id=sid)
    result, _ = run(wf, "commission")
    assert (type(result).__name__, result.failure_class) == ("Fail", "failed_testing")
    assert result.message.startswith("machine is Failed testing in MAAS (")
    assert "failed scripts: smartctl-short" in result.message
    assert "override the failed testing" in result.message
    assert bench.sim.mutations(sid) == ["machine.test"]  # the test above, nothing of ours
    api.ok(sid, "override_failed_testing")
    result, _ = run(wf, "commission")
    assert (type(result).__name__, result.message) == (
        "Done",
        "already Ready in MAAS; not recommissioned",
    )


def test_a_node_failure_of_another_kind_is_named_as_reported(bench: Bench) -> None:
    wf = bench.onboarding("e9", "10.1.0.37", node_failure="disk_check")
    result, _ = run(wf, "enrollment")
    assert (result.failure_class, result.message) == (
        "disk_check",
        "disk_check failed on the node: (no detail)",
    )


def test_enrollment_waits_until_the_current_attempt_enrolls(bench: Bench) -> None:
    wf = bench.onboarding("e1", "10.1.0.21", attempt=2, enrolled_attempt=1)
    wf.enrolled_at = timezone.now()
    wf.save(update_fields=["enrolled_at"])
    assert type(run(wf, "enrollment")[0]).__name__ == "Wait"  # attempt 1's enrollment
    Onboarding.objects.filter(pk=wf.pk).update(enrolled_attempt=2)
    assert type(run(wf, "enrollment")[0]).__name__ == "Done"


def test_completion_gates_fail_when_any_gate_is_missing(bench: Bench) -> None:
    sid = bench.sim.add(hostname="g1", status="deployed")
    wf = bench.onboarding("g1", "10.1.0.22", maas_system_id=sid, token_attempt=1)
    result, _ = run(wf, "complete")
    assert (type(result).__name__, result.failure_class) == ("Fail", "completion_gate")
    assert result.data["gates"] == {
        "maas_deployed": True,
        "site_bundle": True,  # no bundle in this payload
        "agent_started": False,
        "enrolled": False,
        "node_row": True,
        "current_attempt": False,
        "hardware_checked": True,  # judged here: never judged before (docs/hardware.md)
    }
    now = timezone.now()
    Onboarding.objects.filter(pk=wf.pk).update(
        agent_started_at=now, enrolled_at=now, enrolled_attempt=1
    )
    assert type(run(wf, "complete")[0]).__name__ == "Done"


# -- reset and cancel ------------------------------------------------------------------------------


def test_reset_aborts_what_is_in_flight_and_deletes_a_machine_it_created(bench: Bench) -> None:
    sid = bench.sim.add(hostname="r1", status="new")
    wf = bench.onboarding("r1", "10.1.0.23", maas_system_id=sid, created_machine=True)
    result, _ = run(wf, "reset")
    assert (type(result).__name__, result.updates) == (
        "Done",
        {"maas_system_id": "", "created_machine": False},
    )
    assert bench.sim.mutations(sid) == ["machine.delete"]


def test_cancel_aborts_a_commissioning_machine(bench: Bench) -> None:
    sid = bench.sim.add(hostname="x1", status="new")
    wf = bench.onboarding("x1", "10.1.0.24", maas_system_id=sid)
    run(wf, "commission")
    result, _ = run(wf, "cancel")
    assert type(result).__name__ == "Wait"
    assert bench.sim.mutations(sid) == ["machine.commission", "machine.abort"]


def test_cancel_waits_until_maas_has_stopped_before_it_ends(bench: Bench) -> None:
    """Cancelled means MAAS is no longer working on the machine: not while it still shows
    commissioning after the abort was sent, and the abort is sent once."""
    sid = bench.sim.add(hostname="x2", status="new")
    wf = bench.onboarding("x2", "10.1.0.25", maas_system_id=sid)
    run(wf, "commission")
    first, events = run_stage("onboarding", wf, "cancel", record=True)
    assert (type(first).__name__, first.message, first.check_in) == ("Wait", "aborting", 600)
    assert ("maas.action", "aborted Commissioning") in [(k, m) for k, m, _ in events]
    bench.sim.advance(1)  # the abort lands (New); then, as if MAAS were slower, commissioning
    sim = bench.sim.model
    with sim.lock:
        sim.set_status(sim.machines[sid], S.COMMISSIONING)
    again, _ = run_stage("onboarding", wf, "cancel", record=True)
    assert (type(again).__name__, again.message, again.check_in) == ("Wait", "aborting", 600)
    assert bench.sim.mutations(sid) == ["machine.commission", "machine.abort"]
    with sim.lock:
        sim.set_status(sim.machines[sid], S.NEW)
    done, _ = run_stage("onboarding", wf, "cancel")
    assert (type(done).__name__, done.message) == ("Done", "cancelled; MAAS shows New")
    assert bench.sim.mutations(sid) == ["machine.commission", "machine.abort"]


def test_cancel_releases_an_allocation_it_holds_once(bench: Bench) -> None:
    sid = bench.sim.add(hostname="x3", status="allocated")
    wf = bench.onboarding("x3", "10.1.0.26", maas_system_id=sid)
    result, events = run(wf, "cancel")
    assert (type(result).__name__, result.message) == ("Done", "cancelled; MAAS shows Allocated")
    assert ("maas.action", "released the allocation") in [(k, m) for k, m, _ in events]
    assert bench.sim.mutations(sid) == ["machine.release"]
    wf2 = bench.onboarding("x4", "10.1.0.27")
    assert run(wf2, "cancel")[0].message == "cancelled before MAAS was touched"


def test_reset_leaves_a_machine_it_did_not_create(bench: Bench) -> None:
    sid = bench.sim.add(hostname="r2", status="ready")
    wf = bench.onboarding("r2", "10.1.0.28", maas_system_id=sid)
    result, _ = run(wf, "reset")
    assert (type(result).__name__, result.message) == (
        "Done",
        "machine left Ready in MAAS (not created by this workflow)",
    )
    assert bench.sim.mutations(sid) == []


def test_reset_releases_an_allocated_machine_then_aborts_nothing_twice(bench: Bench) -> None:
    sid = bench.sim.add(hostname="r3", status="allocated")
    wf = bench.onboarding("r3", "10.1.0.29", maas_system_id=sid, created_machine=True)
    result, _ = run(wf, "reset")
    assert (type(result).__name__, result.message, result.status) == (
        "Wait",
        "releasing before reset",
        int(S.RELEASING),
    )
    assert bench.sim.mutations(sid) == ["machine.release"]


def test_reset_of_a_machine_already_gone(bench: Bench) -> None:
    wf = bench.onboarding("r4", "10.1.0.30", maas_system_id="gone00", created_machine=True)
    result, _ = run(wf, "reset")
    assert (result.message, result.updates) == (
        "machine already gone from MAAS",
        {"maas_system_id": "", "created_machine": False},
    )
    wf2 = bench.onboarding("r5", "10.1.0.31")
    assert run(wf2, "reset")[0].message == "nothing to undo in MAAS"


def test_reset_aborts_a_commissioning_machine_before_anything_else(bench: Bench) -> None:
    sid = bench.sim.add(hostname="r6", status="new")
    wf = bench.onboarding("r6", "10.1.0.32", maas_system_id=sid, created_machine=True)
    run(wf, "commission")
    result, _ = run(wf, "reset")
    assert (type(result).__name__, result.message) == ("Wait", "aborting before reset")
    assert bench.sim.mutations(sid) == ["machine.commission", "machine.abort"]


def test_a_changed_maas_url_fails_the_stage_at_once_naming_the_confirmation(
    bench: Bench,
) -> None:
    """Not retried as a secrets outage: only an operator's confirmation clears it."""
    from maas_domain.services.sites import site_update

    wf = bench.onboarding("cu1", "10.9.9.1")
    site_update(
        actor=bench.admin,
        site_id=bench.site.pk,
        changes={"maas_url": "http://elsewhere.test/MAAS/"},
    )
    result, _ = run(wf, "discover")
    assert (type(result).__name__, result.failure_class) == ("Fail", "credentials_unconfirmed")
    assert "confirm" in result.message


# -- the declarations hold ----------------------------------------------------------------------


def test_a_stage_that_calls_maas_beyond_its_declaration_fails_the_stage_tests(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every stage test runs through a recording client (tests/support/stages.py): drop one
    call from the commission stage's declaration and the same run is refused, naming it."""
    from dataclasses import replace

    from onboarding.workflow import KIND

    index = KIND.stage_index["commission"]
    real = KIND.stages[index]
    stripped = tuple(c for c in real.maas_calls if c.method != "commission")
    stages = list(KIND.stages)
    stages[index] = replace(real, maas_calls=stripped)
    monkeypatch.setattr(KIND, "stages", stages)
    sid = bench.sim.add(hostname="c9", status="new")
    with pytest.raises(AssertionError, match=r"commission: commission"):
        run(bench.onboarding("c9", "10.1.0.99", maas_system_id=sid), "commission")


def test_discover_refuses_a_machine_another_live_node_has(bench: Bench) -> None:
    sid = bench.sim.add(hostname="dl1", status="ready")
    bench.node("other-node", "10.1.9.9", maas_system_id=sid, state="active")
    wf = bench.onboarding("dl1", "10.1.9.1")
    result, _ = run(wf, "discover")
    assert (type(result).__name__, result.failure_class) == ("Fail", "ambiguous")
    assert result.message.endswith(
        f"MAAS machine {sid} is already live node other-node; one machine per live node "
        "(retire or fix that node first)"
    )
    assert bench.sim.mutations() == []


def test_adopt_reads_maas_and_names_the_stage(bench: Bench) -> None:
    from maas_domain.errors import Conflict
    from onboarding.stages import adopt_stage

    assert adopt_stage(bench.onboarding("ad1", "10.1.8.1")) == ("discover", {"maas_status": None})
    gone = bench.onboarding("ad2", "10.1.8.2", maas_system_id="gone00")
    assert adopt_stage(gone) == ("discover", {"maas_status": "missing"})
    ready = bench.onboarding("ad3", "10.1.8.3", maas_system_id=bench.sim.add(status="ready"))
    assert adopt_stage(ready) == (
        "conformance",
        {"maas_status": "Ready", "adopted_stage": "conformance"},
    )
    broken = bench.onboarding("ad4", "10.1.8.4", maas_system_id=bench.sim.add(status="broken"))
    with pytest.raises(Conflict) as refused:
        adopt_stage(broken)
    assert refused.value.message == (
        "cannot adopt: MAAS shows Broken; fix it in MAAS, or restart-clean"
    )
