"""maasctl's HTTP client (docs/cli.md, "Errors", "Rate limits", "Exit codes"): a 429 is waited
out and retried when repeating is safe, bounded; every error says what failed and where."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from tests.support.fakeapi import page

SKU = {"id": 3, "code": "gpu-8x", "name": "8x", "active": True}
BUSY = {"error": "throttled", "detail": "Request was throttled."}


def test_a_429_on_a_get_waits_what_the_server_asks_then_retries(
    fake_cli: Any, fake_api: Any, waits: list[float]
) -> None:
    fake_api.on("GET", "/skus", BUSY, status=429, headers={"Retry-After": "7"}, times=2)
    fake_api.on("GET", "/skus", page([SKU]))
    result = fake_cli("skus", "list", "-o", "json")
    assert result.exit_code == 0, result.output
    assert waits == [7, 7] and len(fake_api.to("GET", "/skus")) == 3
    assert "answered 429 (too many requests) to GET /api/v1/admin/skus; waiting 7 s" in (
        result.stderr
    )


def test_a_429_on_a_request_with_an_idempotency_key_is_sent_again_with_the_same_key(
    fake_cli: Any, fake_api: Any, waits: list[float]
) -> None:
    fake_api.on("POST", "/onboardings/5/retry", BUSY, status=429, headers={"Retry-After": "2"})
    fake_api.on("POST", "/onboardings/5/retry", {"id": 5, "state": "pending"}, status=202)
    result = fake_cli("onboardings", "retry", "5", "--reason", "flaky BMC")
    assert result.exit_code == 0, result.output
    first, second = fake_api.to("POST", "/onboardings/5/retry")
    key = first.headers["idempotency-key"]
    assert key.startswith("maasctl-") and second.headers["idempotency-key"] == key
    assert second.body == first.body == {"reason": "flaky BMC"} and waits == [2]


def test_a_429_on_a_request_that_is_not_safe_to_repeat_is_exit_6_at_once(
    fake_cli: Any, fake_api: Any, waits: list[float]
) -> None:
    fake_api.on("POST", "/skus", BUSY, status=429, headers={"Retry-After": "30"})
    result = fake_cli("skus", "create", "gpu-h100", "--name", "8x H100")
    assert result.exit_code == 6
    assert len(fake_api.to("POST", "/skus")) == 1 and waits == []
    assert (
        f"maasctl: 429 Too Many Requests from POST {fake_api.url}/api/v1/admin/skus: "
        "Request was throttled. (the server asks to wait 30 s; not retried: this request is "
        "not safe to repeat blindly)"
    ) in result.stderr


def test_retries_are_bounded_and_a_long_wait_is_not_waited(
    fake_cli: Any, fake_api: Any, waits: list[float]
) -> None:
    fake_api.on("GET", "/skus", BUSY, status=429, headers={"Retry-After": "1"}, times=10)
    fake_api.on("GET", "/skus", page([SKU]))  # an unbounded client would get here
    result = fake_cli("skus", "list")
    assert result.exit_code == 6 and waits == [1, 1, 1]
    assert len(fake_api.to("GET", "/skus")) == 4 and "gave up after 3 retries" in result.stderr
    fake_api.on("GET", "/nodes", BUSY, status=429, headers={"Retry-After": "3600"})
    result = fake_cli("nodes", "list")
    assert result.exit_code == 6 and waits == [1, 1, 1]
    assert "the server asks to wait 3600 s; longer than maasctl waits, 60 s" in result.stderr


def test_an_http_error_names_the_status_the_request_and_the_servers_message(
    fake_cli: Any, fake_api: Any
) -> None:
    fake_api.on("POST", "/nodes/4/storage-cleanup", {"error": "conflict",
                "detail": "node r1 is registered; storage cleanup needs active or broken.",
                "current_state": "registered"}, status=409)  # fmt: skip
    result = fake_cli("storage-cleanup", "4", "--yes")
    assert result.exit_code == 3
    assert (
        f"maasctl: 409 Conflict from POST {fake_api.url}/api/v1/admin/nodes/4/storage-cleanup: "
        "node r1 is registered; storage cleanup needs active or broken."
    ) in result.stderr
    assert '  current_state: "registered"' in result.stderr
    fake_api.on("POST", "/skus", {"error": "permission_denied", "detail": "Your role (or your "
                "token's scope) does not allow this action."}, status=403)  # fmt: skip
    denied = fake_cli("skus", "create", "x", "--name", "y")
    assert denied.exit_code == 2 and "403 Forbidden from POST" in denied.stderr
    assert "`maasctl tokens list` shows it" in denied.stderr


def test_no_answer_says_where_and_why(fake_cli: Any, fake_api: Any, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    down = fake_cli("skus", "list", env_extra={"MAASCTL_URL": closed})
    assert down.exit_code == 5
    assert (
        f"maasctl: cannot reach {closed} (GET {closed}/api/v1/admin/skus): connection refused"
        in down.stderr
    )
    # a server that takes longer than the profile's timeout: the mutation may have happened
    config = tmp_path / "config.toml"
    config.write_text(f'[slow]\nurl = "{fake_api.url}"\ntimeout = 0.3\n')
    fake_api.on("POST", "/skus", SKU, status=201, delay=1.0)
    slow = fake_cli("--profile", "slow", "skus", "create", "gpu-8x", "--name", "8x",
                    env_extra={"MAASCTL_CONFIG": str(config), "MAASCTL_URL": ""})  # fmt: skip
    assert slow.exit_code == 5
    assert (
        f"maasctl: POST {fake_api.url}/api/v1/admin/skus: no answer within 0.3 s; it may have "
        "been applied: look before retrying"
    ) in slow.stderr


def test_leaks_sweep_asks_first_sends_the_site_and_machine_and_fails_on_a_refusal(
    fake_cli: Any, fake_api: Any
) -> None:
    swept = {"hostname": "c07", "system_id": "abc123", "status": "Failed deployment",
             "action": "release", "erase": "none", "erase_owed": "", "tenant_data": False,
             "outcome": "swept", "why": "it never reached a tenant", "error": ""}  # fmt: skip
    refused = {**swept, "hostname": "c08", "outcome": "failed", "error": "conflict: busy"}
    answer = {"dry_run": False, "site_id": 1, "swept": [swept], "failed": [], "skipped": []}
    fake_api.on("POST", "/reconciliation/leaks/sweep", answer)
    result = fake_cli("leaks", "sweep", "--site", "1", "--machine", "abc123", input="n\n")
    assert result.exit_code != 0 and fake_api.sent == []  # not confirmed: nothing sent
    result = fake_cli("leaks", "sweep", "--site", "1", "--machine", "abc123", "--yes",
                      "--reason", "INC-7")  # fmt: skip
    assert result.exit_code == 0, result.output
    [sent] = fake_api.sent
    assert sent.body == {"site_id": 1, "system_id": "abc123", "reason": "INC-7"}
    assert "idempotency-key" in sent.headers
    words = " ".join(result.stdout.split())  # a piped table folds long cells (docs/cli.md)
    assert "c07" in words and "it never reached a" in words and "tenant" in words
    fake_api.on("POST", "/reconciliation/leaks/sweep", {**answer, "failed": [refused]})
    result = fake_cli("leaks", "sweep", "--site", "1", "--yes")
    assert result.exit_code == 1 and "conflict: busy" in result.stdout
