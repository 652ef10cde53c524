"""``--dry-run`` on every command that changes something (docs/cli.md, "Dry runs"): it sends
``?dry_run=true`` to the route the real command uses, with the same body, never an
Idempotency-Key, asks no confirmation, and prints the server's plan readably.

The server side of ``?dry_run=true`` on every route lands separately (docs/api.md, "Dry runs"),
so these tests assert on the request maasctl sends, against the fake API; the live tests in
tests/test_cli.py run the routes the server already plans (verbs, an onboarding's preflight).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer

from maasctl.main import app
from maasctl.verbs import VERBS

PLAN = {
    "dry_run": True,
    "status": 202,
    "answer": {"id": 41, "hostname": "c01", "state": "pending", "secret": "[bold]x[/bold]"},
    "changes": [
        {"action": "onboarding.start", "target_type": "onboarding", "target_id": "41",
         "before": None, "after": {"state": "pending"}},
        {"action": "onboarding.start", "target_type": "onboarding", "target_id": "42",
         "before": None, "after": {"state": "pending"}},
    ],
    "changes_count": 5,
    "workflows": [{"kind": "onboarding", "count": 5, "hostnames": ["c01", "c02"],
                   "stages": [{"name": "preflight", "timeout": 600, "maas_calls": []},
                              {"name": "deploy", "timeout": 5400,
                               "maas_calls": ["deploy (distro jammy)"]}]}],
    "maas_calls": ["deploy: deploy (distro jammy)"],
}  # fmt: skip
HOSTS = "hostname,ipmi_ip\nc01,10.1.0.1\nc02,10.1.0.2\n"
ROCE = "hostname,interface,ipv4_cidr\nc01,ens1f0,10.50.0.2/31\n"
CREDENTIALS = '{"maas_api_key": "a:b:c"}'

# every command that changes something: (argv, method, path under /api/v1/admin, stdin)
MUTATING: list[tuple[tuple[str, ...], str, str, str | None]] = [
    (("sites", "create", "lab", "--maas-url", "http://m:5240/MAAS/"), "POST", "/maas-sites", None),
    (("sites", "update", "1", "--description", "x"), "PATCH", "/maas-sites/1", None),
    (("sites", "disable", "1"), "DELETE", "/maas-sites/1", None),
    (("sites", "probe", "1"), "POST", "/maas-sites/1/probe", None),
    (("sites", "set-credentials", "1", "--from-file", "-"), "POST", "/maas-sites/1/credentials",
     CREDENTIALS),
    (("profiles", "create", "1", "h100"), "POST", "/maas-sites/1/profiles", None),
    (("profiles", "update", "1", "2", "--distro-series", "noble"), "PATCH",
     "/maas-sites/1/profiles/2", None),
    (("profiles", "disable", "1", "2"), "DELETE", "/maas-sites/1/profiles/2", None),
    (("skus", "create", "gpu-h100", "--name", "8x"), "POST", "/skus", None),
    (("skus", "update", "3", "--name", "8x"), "PATCH", "/skus/3", None),
    (("skus", "delete", "3"), "DELETE", "/skus/3", None),
    (("allocations", "create", "4", "--holder", "tenant-a"), "POST", "/allocations", None),
    (("allocations", "release", "9"), "POST", "/allocations/9/release", None),
    (("tokens", "create", "ci"), "POST", "/tokens", None),
    (("tokens", "revoke", "5"), "POST", "/tokens/5/revoke", None),
    (("onboard", "c01", "--ipmi-ip", "10.1.0.1", "--site", "1", "--profile", "2", "--sku", "3"),
     "POST", "/onboardings", None),
    (("onboard", "batch", "HOSTS", "--site", "1", "--profile", "2", "--sku", "3"), "POST",
     "/onboardings/batch", None),
    (("batches", "resume", "6"), "POST", "/onboardings/batches/6/resume", None),
    (("batches", "cancel", "6"), "POST", "/onboardings/batches/6/cancel", None),
    (("decommission", "4", "--mode", "full"), "POST", "/nodes/4/decommission", None),
    (("storage-cleanup", "4"), "POST", "/nodes/4/storage-cleanup", None),
    (("drift", "resolve", "4"), "POST", "/reconciliation/drift/4/resolve", None),
    (("reconcile", "run"), "POST", "/reconciliation/run", None),
    (("leaks", "sweep", "--site", "1"), "POST", "/reconciliation/leaks/sweep", None),
    (("roce", "import", "ROCE", "--site", "1"), "POST", "/maas-sites/1/roce-assignments", None),
    (("nodes", "cordon", "4", "--reason", "x"), "POST", "/nodes/4/cordon", None),
    (("nodes", "uncordon", "4", "--reason", "x"), "POST", "/nodes/4/uncordon", None),
    (("nodes", "repair", "4"), "POST", "/nodes/4/repair", None),
    (("repairs", "requalify", "5"), "POST", "/repairs/5/requalify", None),
    *(((kind, verb, "5"), "POST", f"/{kind}/5/{verb}", None)
      for kind in ("onboardings", "decommissions", "repairs") for verb in VERBS),
]  # fmt: skip
# the aliases of batches list/show under onboardings, and every command that only reads
READ_ONLY = {
    "sites list", "sites show", "profiles list", "profiles show", "skus list", "skus show",
    "nodes list", "nodes show", "nodes timeline", "nodes evidence", "allocations list",
    "tokens list",
    "batches list", "batches show", "drift list", "reconcile status", "roce list", "leaks list",
    *(f"{kind} {c}" for kind in ("onboardings", "decommissions", "repairs")
      for c in ("list", "show", "timeline", "watch")),
    "repairs packet",
    "onboardings batches", "onboardings batch",
}  # fmt: skip


def _files(argv: tuple[str, ...], tmp_path: Path) -> list[str]:
    (tmp_path / "hosts.csv").write_text(HOSTS)
    (tmp_path / "roce.csv").write_text(ROCE)
    names = {"HOSTS": str(tmp_path / "hosts.csv"), "ROCE": str(tmp_path / "roce.csv")}
    return [names.get(a, a) for a in argv]


def _leaves(command: Any, path: tuple[str, ...] = ()) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, sub in getattr(command, "commands", {}).items():
        if hasattr(sub, "commands"):
            found |= _leaves(sub, (*path, name))
        else:
            found[" ".join((*path, name))] = sub
    return found


def test_every_command_either_only_reads_or_has_a_dry_run_tested_here() -> None:
    leaves = _leaves(typer.main.get_command(app))
    leaves.pop("onboard host")  # `onboard HOST ...`: the first row of MUTATING
    tested = {" ".join(argv[:2]) if argv[0] not in ("decommission", "storage-cleanup")
              else argv[0] for argv, *_ in MUTATING}  # fmt: skip
    tested = {t if not t.startswith("onboard c01") else "onboard host" for t in tested}
    tested.discard("onboard host")
    assert set(leaves) == READ_ONLY | tested
    for name in tested:
        options = {o for p in leaves[name].params for o in getattr(p, "opts", ())}
        assert "--dry-run" in options, name
    for name in READ_ONLY:
        options = {o for p in leaves[name].params for o in getattr(p, "opts", ())}
        assert "--dry-run" not in options, name


@pytest.mark.parametrize(("argv", "method", "path", "stdin"), MUTATING,
                         ids=[" ".join(m[0][:3]) for m in MUTATING])  # fmt: skip
def test_dry_run_sends_the_same_request_with_dry_run_true_and_asks_nothing(
    fake_cli: Any, fake_api: Any, tmp_path: Path, argv: Any, method: str, path: str, stdin: Any
) -> None:
    fake_api.on(method, path, PLAN)
    args = _files(argv, tmp_path)
    result = fake_cli(*args, "--dry-run", input=stdin)  # no --yes, no answer to a prompt
    assert result.exit_code == 0, result.output
    [sent] = fake_api.sent  # ids only: nothing is looked up by name
    assert (sent.method, sent.path, sent.query) == (method, path, {"dry_run": ["true"]})
    assert "idempotency-key" not in sent.headers  # a plan must never be replayed as the answer
    assert "?" not in result.stdout.splitlines()[0]  # no confirmation prompt was shown
    assert "Dry run: nothing was changed and nothing was sent to MAAS." in result.stdout
    # the body is the one the real command sends
    fake_api.sent.clear()
    fake_api.on(method, path, ANSWER)
    yes = ["--yes"] if "--yes" in _options(args) else []
    real = fake_cli(*args, *yes, input=stdin)
    assert real.exit_code == 0, real.output
    [done] = fake_api.sent
    assert (done.body, done.query) == (sent.body, {})


# one answer every command can print
ANSWER = {"id": 1, "size": 1, "runs": [], "resolved": [], "token": "mcp_x", "scope": "read",
          "checks": [], "health": "healthy", "state": "pending", "swept": [], "failed": [],
          "skipped": []}  # fmt: skip


def _options(args: list[str]) -> set[str]:
    leaves = _leaves(typer.main.get_command(app))
    command = leaves.get(" ".join(args[:2])) or leaves.get(args[0]) or leaves["onboard host"]
    return {o for p in command.params for o in getattr(p, "opts", ())}


def test_the_plan_is_readable(fake_cli: Any, fake_api: Any, tmp_path: Path) -> None:
    fake_api.on("POST", "/onboardings/batch", PLAN)
    args = _files(("onboard", "batch", "HOSTS", "--site", "1", "--profile", "2", "--sku", "3"),
                  tmp_path)  # fmt: skip
    out = fake_cli(*args, "--dry-run").stdout
    assert "The server would answer 202." in out
    assert "[bold]x[/bold]" in out  # the would-be answer, printed as written
    assert "changes it would record (2 of 5)" in out and "onboarding.start" in out
    assert "It would start 5 onboarding workflow(s) (the first 2): c01, c02" in out
    assert "deploy (distro jammy)" in out and "5400 s" in out
    assert "MAAS calls it may send:\n  deploy: deploy (distro jammy)" in out
    as_json = fake_cli(*args, "--dry-run", "-o", "json")
    assert json.loads(as_json.stdout) == PLAN


def test_a_plan_that_would_be_refused_exits_1(fake_cli: Any, fake_api: Any) -> None:
    preflight = {"dry_run": True, "allowed": False,
                 "guardrails": [{"name": "probe_healthy_and_fresh", "ok": False,
                                 "detail": "last probe is 3 days old"}],
                 "stages": [{"name": "discover", "timeout": 900, "maas_calls": ["machines"]}],
                 "maas_calls": ["discover: machines"],
                 "policy": {"erase_mode": "quick"}}  # fmt: skip
    fake_api.on("POST", "/onboardings", preflight)
    args = ["--ipmi-ip", "10.1.0.1", "--site", "1", "--profile", "2", "--sku", "3"]
    result = fake_cli("onboard", "c01", *args, "--dry-run")
    assert result.exit_code == 1
    assert "probe_healthy_and_fresh" in result.stdout
    assert "last probe is 3 days old" in result.stdout
    fake_api.on("POST", "/maas-sites/1/probe", {"dry_run": True, "site_id": 1,
                "health": "unhealthy", "checks": [{"name": "connectivity", "ok": False,
                                                   "detail": "refused"}]})  # fmt: skip
    probe = fake_cli("sites", "probe", "1", "--dry-run")
    assert probe.exit_code == 1 and "connectivity" in probe.stdout


def test_a_server_that_ignores_dry_run_is_called_out(fake_cli: Any, fake_api: Any) -> None:
    fake_api.on("POST", "/skus", {"id": 3, "code": "gpu-h100"}, status=201)
    result = fake_cli("skus", "create", "gpu-h100", "--name", "8x", "--dry-run")
    assert result.exit_code == 5
    assert "was not answered with a plan" in result.stderr
    assert "may have APPLIED the change" in result.stderr
