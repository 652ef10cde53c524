"""maasctl as an operator uses it all day (docs/cli.md): nodes by hostname or id wherever one
is named, confirmations that name the host, MAAS's own reason for a failed workflow with the
install log's tail, and maasctl's own flag in its hints."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.fakeapi import page

NODE = {"id": 6, "hostname": "gpu-b01", "site_id": 1, "site_name": "demo", "sku_id": 1,
        "sku_code": "gpu-8x", "state": "active", "maas_system_id": "abc123"}  # fmt: skip
WF = {"id": 12, "hostname": "gpu-b01", "state": "failed", "stage": "deploy", "attempt": 2,
      "failure_class": "maas_deploy_failed", "reason": "deploy failed: Failed deployment",
      "maas_system_id": "abc123", "allowed_verbs": ["retry", "restart-clean"],
      "created_at": "2024-05-01T20:00:00+00:00", "finished_at": None, "timeline": [],
      "timeline_count": 0}  # fmt: skip
INSTALL = "\n".join(f"curtin: step {i}" for i in range(1, 41)) + "\ncurtin: FAIL disk sda\n"
DIAG = {"available": True, "system_id": "abc123", "status": "Failed deployment",
        "status_message": "Installation failed (refer to the installation log)",
        "error_description": "", "power_state": "on",
        "events": [{"id": 3, "created": "2024-05-01T20:04:00", "level": "ERROR",
                    "type": "Failed deployment", "description": "curtin command failed"}],
        "installation_output": INSTALL, "commissioning_results": [],
        "fetched_at": "2024-05-01T20:05:00+00:00", "age_seconds": 0.1}  # fmt: skip
NOT_FETCHED = {"available": False, "detail": "not fetched in the last minute: ask with "
               "?diagnostics=refresh", "fetched_at": None, "age_seconds": None}  # fmt: skip


def test_a_node_is_named_by_hostname_and_the_question_names_the_host(
    fake_cli: Any, fake_api: Any
) -> None:
    fake_api.on("GET", "/nodes", page([NODE]))
    fake_api.on("POST", "/nodes/6/decommission", {**WF, "id": 30, "state": "pending"},
                status=202)  # fmt: skip
    refused = fake_cli("decommission", "gpu-b01", "--mode", "reimage", input="n\n")
    assert refused.exit_code == 2
    assert "reimage (erase, then deploy again) node 6, gpu-b01 on demo?" in refused.output
    assert fake_api.to("GET", "/nodes")[0].query["hostname"] == ["gpu-b01"]
    assert not fake_api.to("POST", "/nodes/6/decommission")
    done = fake_cli("decommission", "gpu-b01", "--mode", "reimage", input="y\n")
    assert done.exit_code == 0, done.output
    assert len(fake_api.to("POST", "/nodes/6/decommission")) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ("nodes", "show", "gpu-b01"),
        ("nodes", "timeline", "gpu-b01"),
        ("nodes", "evidence", "gpu-b01"),
        ("allocations", "list", "--node", "gpu-b01"),
        ("drift", "list", "--node", "gpu-b01"),
    ],
)
def test_every_command_that_names_a_node_takes_its_hostname(
    fake_cli: Any, fake_api: Any, argv: tuple[str, ...]
) -> None:
    fake_api.on("GET", "/nodes", page([NODE]))
    fake_api.on("GET", "/nodes/6", {**NODE, "ipmi_ip": "10.0.0.6", "maas_observation": None,
                                    "open_workflows": [], "recent_workflows": [],
                                    "active_allocations": []})  # fmt: skip
    fake_api.on("GET", "/nodes/6/timeline", {**page([]), "maas_events": {"requested": False}})
    fake_api.on("GET", "/nodes/6/evidence", page([]))
    fake_api.on("GET", "/allocations", page([]))
    fake_api.on("GET", "/reconciliation/drift", page([]))
    result = fake_cli(*argv)
    assert result.exit_code == 0, result.output
    assert "valid integer" not in result.output
    sent = [s for s in fake_api.sent if s.path != "/nodes"]
    assert "/nodes/6" in sent[0].path or sent[0].query.get("node") == ["6"], sent[0]


def test_a_hostname_two_sites_share_is_refused_naming_both(fake_cli: Any, fake_api: Any) -> None:
    other = {**NODE, "id": 9, "site_name": "lab"}
    fake_api.on("GET", "/nodes", page([NODE, other]))
    result = fake_cli("storage-cleanup", "gpu-b01", "--yes")
    assert result.exit_code == 2
    assert "'gpu-b01' names 2 nodes (6 on demo, 9 on lab): give the id" in result.stderr
    fake_api.on("GET", "/nodes", page([]))
    missing = fake_cli("nodes", "show", "nosuch")
    assert missing.exit_code == 4 and "no node with hostname 'nosuch'" in missing.stderr


def test_a_destructive_verb_asks_naming_the_host_and_its_state(
    fake_cli: Any, fake_api: Any
) -> None:
    fake_api.on("GET", "/onboardings/12", WF)
    result = fake_cli("onboardings", "restart-clean", "12", input="n\n")
    assert result.exit_code == 2
    assert "restart-clean onboarding 12 of gpu-b01 (now failed at deploy)?" in result.output


def test_a_failed_workflow_shows_maas_s_reason_and_the_install_log_s_tail(
    fake_cli: Any, fake_api: Any
) -> None:
    fake_api.on("GET", "/onboardings/12", {**WF, "diagnostics": DIAG})
    shown = fake_cli("onboardings", "show", "12", "--diagnostics", "refresh")
    assert shown.exit_code == 0, shown.output
    out = shown.stdout
    assert "Installation failed (refer to the installation log)" in out
    assert "ERROR Failed deployment: curtin command failed" in out
    assert "installation output, the last 20 of 41 lines:" in out
    assert "curtin: FAIL disk sda" in out and "curtin: step 22" in out
    assert "curtin: step 21\n" not in out  # only the tail


def test_the_hint_names_maasctl_s_own_flag_not_the_api_s(fake_cli: Any, fake_api: Any) -> None:
    fake_api.on("GET", "/onboardings/12", {**WF, "diagnostics": NOT_FETCHED})
    shown = fake_cli("onboardings", "show", "12")
    assert shown.exit_code == 0, shown.output
    assert "maasctl onboardings show 12 --diagnostics refresh" in shown.stderr
    assert "?diagnostics=refresh" not in shown.output


def test_a_watch_that_ends_failed_says_what_maas_says(fake_cli: Any, fake_api: Any) -> None:
    fake_api.on("GET", "/onboardings/12", lambda q: (
        {**WF, "diagnostics": DIAG} if q.get("diagnostics") == ["refresh"] else WF
    ))  # fmt: skip
    watched = fake_cli("onboardings", "watch", "12", "--interval", "0")
    assert watched.exit_code == 1
    assert "MAAS says: Failed deployment (Installation failed" in watched.stdout
    assert "curtin: FAIL disk sda" in watched.stdout
