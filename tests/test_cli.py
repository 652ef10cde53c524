"""maasctl against a live server (and, for whole journeys, the MAAS simulator and a worker):
configuration and token sources, CSV checks with line numbers before any call, one idempotent
batch request, exit codes, tables/JSON/YAML, the installed console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.utils import timezone
from typer.testing import CliRunner

from decommission.models import Decommission
from maas_domain.models import AuditLog, IdempotencyRecord, Node, RoceAssignment
from maas_domain.services.tokens import api_token_create
from maas_simulator.node import NodeSide
from maasctl import output
from maasctl.main import app
from onboarding.models import Onboarding, OnboardingBatch
from tests.factories import make_node, make_profile, make_site, make_sku
from tests.support.flows import CA_PEM, Flow, settle_decommission

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server: Any, admin_user: Any, tmp_path: Path, monkeypatch: Any) -> Any:
    """Run maasctl in this process with MAASCTL_URL and MAASCTL_TOKEN set (no config file)."""
    _, token = api_token_create(actor=None, user=admin_user, name="cli-test", scope="admin")
    monkeypatch.setenv("MAASCTL_CONFIG", str(tmp_path / "absent.toml"))
    env = {"MAASCTL_URL": live_server.url, "MAASCTL_TOKEN": token, "COLUMNS": "200"}
    # rich fixes a console's width when it is built if COLUMNS is set then (an xdist worker has
    # COLUMNS=80): wide, so that a long tmp_path does not wrap "file:line field: reason"
    for console in (output.console, output.errors):
        monkeypatch.setattr(console, "width", 200)

    def run(*argv: str, input: str | None = None, env_extra: dict[str, str] | None = None) -> Any:
        result = CliRunner().invoke(app, list(argv), env={**env, **(env_extra or {})},
                                    input=input)  # fmt: skip
        assert "Traceback" not in result.output, result.output
        assert not isinstance(result.exception, Exception) or isinstance(
            result.exception, SystemExit
        ), result.exception
        return result

    run.token = token  # type: ignore[attr-defined]
    return run


@pytest.fixture
def target() -> Any:
    site = make_site(name="east", health="healthy", last_probe_at=timezone.now())
    return site, make_profile(site, name="h100"), make_sku(code="gpu-8x")


def write(tmp_path: Path, text: str, name: str = "rows.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def batch_args(path: Path) -> list[str]:
    return ["onboard", "batch", str(path), "--site", "east", "--profile", "h100", "--sku", "gpu-8x"]


# -- CSV: checked before any call, one request, replayable --------------------------------------


def test_bad_rows_are_listed_with_line_numbers_and_nothing_is_sent(
    cli: Any, target: Any, tmp_path: Path
) -> None:
    path = write(tmp_path, "hostname,ipmi_ip\nc01,10.1.0.1\nBad_Host,10.1.0.2\n"
                           "c03,10.1.0.999\nc01,10.1.0.4\nc05\n\n")  # fmt: skip
    result = cli(*batch_args(path))
    assert result.exit_code == 2
    text = result.output
    assert f"{path}:3 hostname: Not a valid hostname" in text
    assert f"{path}:4 ipmi_ip: Not a valid IPv4 address" in text
    assert f"{path}:5 hostname: same hostname as line 2" in text
    assert f"{path}:6: expected 2 columns, got 1" in text
    assert "nothing was sent" in text
    assert not OnboardingBatch.objects.exists()
    assert not AuditLog.objects.exclude(action="api_token.create").exists()


def test_the_header_must_be_exact(cli: Any, target: Any, tmp_path: Path) -> None:
    result = cli(*batch_args(write(tmp_path, "hostname,ipmi\nc01,10.1.0.1\n")))
    assert result.exit_code == 2 and "header must be exactly hostname,ipmi_ip" in result.output
    result = cli(*batch_args(write(tmp_path, "hostname,ipmi_ip\n")))
    assert result.exit_code == 2 and "no rows" in result.output


def test_one_batch_request_and_a_rerun_replays_it(cli: Any, target: Any, tmp_path: Path) -> None:
    path = write(tmp_path, "hostname,ipmi_ip\nc01,10.1.0.1\nc02,10.1.0.2\n")
    first = cli(*batch_args(path))
    assert first.exit_code == 0, first.output
    batch = OnboardingBatch.objects.get()
    assert f"batch {batch.pk}: 2 host(s) accepted" in first.output
    again = cli(*batch_args(path))
    assert again.exit_code == 0, again.output  # replayed, not started twice, and says so
    assert f"replayed: already accepted as batch {batch.pk} (2 host(s), created" in again.output
    assert "nothing new was started" in again.output and "host(s) accepted" not in again.output
    assert OnboardingBatch.objects.count() == 1 and Onboarding.objects.count() == 2
    listed = cli("-o", "json", "onboardings", "batches")
    [row] = json.loads(listed.output)
    assert row["counts"]["pending"] == 2 and row["open"] == 2


def test_a_batch_whose_onboardings_all_ended_is_finished_as_the_admin_says(
    cli: Any, target: Any, tmp_path: Path, admin_client: Any
) -> None:
    assert cli(*batch_args(write(tmp_path, "hostname,ipmi_ip\nc01,10.1.0.1\n"))).exit_code == 0
    batch = OnboardingBatch.objects.get()
    Onboarding.objects.filter(batch=batch).update(state="succeeded")  # as if it ran
    page = admin_client.get(f"/admin/onboarding/onboardingbatch/{batch.pk}/change/")
    assert "<strong>Finished</strong>" in page.content.decode()
    shown = cli("batches", "show", str(batch.pk))
    assert shown.exit_code == 0, shown.output
    assert "finished" in shown.stdout and "│ running" not in shown.stdout
    listed = cli("batches", "list")
    assert "finished" in listed.stdout and "running" not in listed.stdout
    assert OnboardingBatch.objects.get().state == "running"  # the admission state, unchanged


def test_rows_the_api_refuses_are_mapped_back_to_csv_lines(
    cli: Any, target: Any, tmp_path: Path
) -> None:
    cli(*batch_args(write(tmp_path, "hostname,ipmi_ip\nc02,10.1.0.2\n", "first.csv")))
    path = write(tmp_path, "hostname,ipmi_ip\nc01,10.1.0.1\nc02,10.1.0.9\n")
    result = cli(*batch_args(path))
    assert result.exit_code == 2
    assert f"{path}:3 hostname: c02 already has an open onboarding" in result.output
    assert OnboardingBatch.objects.count() == 1


def test_roce_import_is_all_or_nothing_with_line_numbers(
    cli: Any, target: Any, tmp_path: Path
) -> None:
    header = "hostname,interface,ipv4_cidr\n"
    local = write(tmp_path, header + "c01,ens1f0,10.50.0.2/31\nc02,ens1f0,10.50.0.2/31\n")
    result = cli("roce", "import", str(local), "--site", "east")
    assert result.exit_code == 2 and f"{local}:3 ipv4_cidr: same address as line 2" in result.output
    good = write(tmp_path, header + "c01,ens1f0,10.50.0.2/31\nc02,ens1f0,10.50.0.4/31\n")
    assert cli("roce", "import", str(good), "--site", "east").exit_code == 0
    clash = write(tmp_path, header + "c03,ens1f0,10.50.0.8/31\nc09,ens1f1,10.50.0.4/31\n")
    result = cli("roce", "import", str(clash), "--site", "east")
    assert result.exit_code == 2 and f"{clash}:3 ipv4_cidr" in result.output
    assert RoceAssignment.objects.count() == 2


# -- configuration, token, exit codes, output ---------------------------------------------------


def test_the_token_is_never_a_command_line_argument(cli: Any, target: Any) -> None:
    result = cli("--token", cli.token, "sites", "list")
    assert result.exit_code == 2 and "No such option" in result.output


def test_token_from_a_file_and_url_from_a_config_profile(
    cli: Any, target: Any, tmp_path: Path, live_server: Any
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(cli.token + "\n")  # a trailing newline is not part of the token
    config = tmp_path / "config.toml"
    config.write_text(f'[lab]\nurl = "{live_server.url}"\ntoken_file = "{token_file}"\n'
                      '[broken]\nurl = "http://127.0.0.1:9"\n')  # fmt: skip
    env = {"MAASCTL_CONFIG": str(config), "MAASCTL_URL": "", "MAASCTL_TOKEN": ""}
    ok = cli("--profile", "lab", "-o", "json", "sites", "list", env_extra=env)
    assert ok.exit_code == 0 and json.loads(ok.output)[0]["name"] == "east"
    no_token = cli("--profile", "broken", "sites", "list", env_extra=env)
    assert no_token.exit_code == 2 and "no API token" in no_token.output
    unknown = cli("--profile", "nope", "sites", "list", env_extra=env)
    assert unknown.exit_code == 2 and "no profile 'nope'" in unknown.output
    bad = cli("sites", "list", env_extra={"MAASCTL_TOKEN": "mcp_not-a-token"})
    assert bad.exit_code == 2 and "401" in bad.output


def test_exit_codes_and_the_apis_reason(cli: Any, target: Any) -> None:
    site, _, sku = target
    registered = make_node(site, sku=sku, hostname="r1")
    missing = cli("nodes", "show", "999999")
    assert missing.exit_code == 4 and "404" in missing.output
    conflict = cli("storage-cleanup", str(registered.pk), "--yes", "--reason", "x")
    assert conflict.exit_code == 3 and "node r1 is registered" in conflict.output
    invalid = cli("skus", "create", "bad code", "--name", "x")
    assert invalid.exit_code == 2 and "code:" in invalid.output
    down = cli("sites", "list", env_extra={"MAASCTL_URL": "http://127.0.0.1:9"})
    assert down.exit_code == 5 and "cannot reach" in down.output
    refused = cli("storage-cleanup", str(registered.pk), input="n\n")
    assert refused.exit_code == 2 and not Decommission.objects.exists()


def test_tables_json_and_yaml(cli: Any, target: Any) -> None:
    table = cli("skus", "list")
    assert table.exit_code == 0 and "gpu-8x" in table.output and "node_count" in table.output
    as_json = json.loads(cli("-o", "json", "skus", "show", "gpu-8x").output)
    as_yaml = yaml.safe_load(cli("-o", "yaml", "skus", "show", "gpu-8x").output)
    assert as_json == as_yaml and as_json["code"] == "gpu-8x"
    after = json.loads(cli("skus", "show", "gpu-8x", "-o", "json").output)  # kubectl's place
    assert after == as_json


def test_onboard_dry_run_is_the_preflight_and_starts_nothing(cli: Any, target: Any) -> None:
    args = ["--ipmi-ip", "10.1.0.1", "--site", "east", "--profile", "h100", "--sku", "gpu-8x"]
    plan = cli("onboard", "c01", *args, "--dry-run")
    assert plan.exit_code in (0, 1), plan.output  # 1: a guardrail would refuse it
    assert "Dry run: nothing was changed" in plan.output
    assert "probe_healthy_and_fresh" in plan.output  # the guardrails table
    assert not Onboarding.objects.exists() and not IdempotencyRecord.objects.exists()
    assert cli("onboard", "c01", *args).exit_code == 0  # the real one, with its own key
    assert Onboarding.objects.count() == 1


def test_batches_show_state_and_pause_reason_resume_and_cancel(
    cli: Any, target: Any, tmp_path: Path
) -> None:
    path = write(tmp_path, "hostname,ipmi_ip\nc01,10.1.0.1\nc02,10.1.0.2\n")
    assert cli(*batch_args(path)).exit_code == 0
    batch = OnboardingBatch.objects.get()
    OnboardingBatch.objects.filter(pk=batch.pk).update(
        state="paused", paused_reason="canary c01 failed", paused_at=timezone.now()
    )
    listed = cli("batches", "list")
    assert listed.exit_code == 0 and "paused" in listed.output
    assert "canary c01 failed" in listed.output
    [row] = json.loads(cli("batches", "list", "-o", "json").output)
    assert (row["state"], row["paused_reason"]) == ("paused", "canary c01 failed")
    shown = cli("batches", "show", str(batch.pk))
    assert f"`maasctl batches resume {batch.pk}`" in shown.output
    resumed = cli("-o", "json", "batches", "resume", str(batch.pk), "--reason", "looked at it")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.output)["state"] == "running"
    assert AuditLog.objects.filter(action="onboarding.batch_resume",
                                   reason="looked at it").exists()  # fmt: skip
    again = cli("batches", "resume", str(batch.pk))
    assert again.exit_code == 3 and "only a paused batch resumes" in again.output
    refused = cli("batches", "cancel", str(batch.pk), input="n\n")
    assert refused.exit_code == 2 and OnboardingBatch.objects.get().state == "running"
    cancelled = cli("-o", "json", "batches", "cancel", str(batch.pk), input="y\n")
    assert cancelled.exit_code == 0, cancelled.output
    assert OnboardingBatch.objects.get().state == "cancelled"
    assert set(Onboarding.objects.values_list("state", flat=True)) == {"cancelled"}


def test_a_new_token_says_what_its_scope_allows(cli: Any) -> None:
    made = cli("tokens", "create", "ci")
    assert made.exit_code == 0, made.output
    assert "Scope read: read only: every GET" in made.stderr
    assert "--scope operate or --scope admin" in made.stderr
    token = made.stdout.strip().splitlines()[-1]
    assert token.startswith("mcp_")
    refused = cli("skus", "create", "x", "--name", "y", env_extra={"MAASCTL_TOKEN": token})
    assert refused.exit_code == 2 and "403 Forbidden" in refused.output
    admin = cli("-o", "json", "tokens", "create", "ops", "--scope", "admin")
    assert json.loads(admin.stdout)["scope"] == "admin"
    assert "Scope admin: operate, plus decommissions" in admin.stderr


def test_a_colleague_s_token_from_maasctl(cli: Any) -> None:
    """Tokens for a colleague (docs/cli.md): made with --user, listed by user, revoked; the
    value is printed once and never listed."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from maas_domain.models import ApiToken

    bob = get_user_model().objects.create_user("bob")
    bob.groups.add(Group.objects.get(name="maascp-operate"))
    made = cli("tokens", "create", "bob-ci", "--user", "bob", "--scope", "operate",
               "--expires-in-days", "14")  # fmt: skip
    assert made.exit_code == 0, made.output
    assert "The token for bob (shown only now" in made.stderr
    raw = made.stdout.strip().splitlines()[-1]
    assert ApiToken.objects.get(name="bob-ci").user == bob and raw.startswith("mcp_")
    listed = cli("tokens", "list", "--user", "bob")
    assert "bob-ci" in listed.stdout and raw not in listed.output
    too_wide = cli("tokens", "create", "x", "--user", "bob", "--scope", "admin")
    assert too_wide.exit_code == 2 and "bob's role allows operate" in too_wide.stderr
    token = ApiToken.objects.get(name="bob-ci")
    revoked = cli("tokens", "revoke", str(token.pk), "--reason", "rotated", "--yes")
    assert revoked.exit_code == 0, revoked.output
    token.refresh_from_db()
    assert token.revoked_at is not None and token.revoke_reason == "rotated"


def test_verbs_with_dry_run_and_a_confirmed_cancel(cli: Any, target: Any) -> None:
    site, _, sku = target
    node = make_node(site, sku=sku, hostname="d1", state="active", ipmi_ip="10.2.0.1")
    started = cli("-o", "json", "storage-cleanup", str(node.pk), "--yes", "--reason", "churn")
    assert started.exit_code == 0, started.output
    wf = json.loads(started.output)
    assert Decommission.objects.get().request_reason == "churn"
    plan = cli("-o", "json", "decommissions", "cancel", str(wf["id"]), "--dry-run")
    assert plan.exit_code == 0 and json.loads(plan.output)["verb"] == "cancel"
    assert Decommission.objects.get().state == "pending"  # a plan changes nothing
    done = cli("-o", "json", "decommissions", "cancel", str(wf["id"]), "--reason", "oops",
               input="y\n")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert Decommission.objects.get().state in ("cancelled", "cancelling")
    again = cli("decommissions", "cancel", str(wf["id"]), "--yes")
    assert again.exit_code == 3 and "allowed_verbs" in again.output


def test_the_console_script_is_installed(live_server: Any, admin_user: Any, target: Any) -> None:
    _, token = api_token_create(actor=None, user=admin_user, name="script", scope="admin")
    script = Path(sys.executable).with_name("maasctl")
    env = {**os.environ, "MAASCTL_URL": live_server.url, "MAASCTL_TOKEN": token}
    done = subprocess.run([str(script), "-o", "json", "sites", "list"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["name"] == "east"
    # as a user types it in bash: Typer names the shell from the process tree (a test process
    # run detached from any shell would have none), so bash runs it (not exec'd: `; exit`)
    completion = subprocess.run(["bash", "-c", '"$0" --show-completion; exit $?', str(script)],
                                env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert completion.returncode == 0, completion.stderr
    assert "_maasctl_completion" in completion.stdout and "complete -o" in completion.stdout


# -- the whole journey: site, SKU, a CSV batch watched to the end, the node, a reimage -----------


@pytest.mark.slow
def test_journey_from_csv_with_progress_then_reimage(
    cli: Any, flow: Flow, node_side: NodeSide, tmp_path: Path, live_server: Any
) -> None:
    sim = flow.sim
    ca = write(tmp_path, CA_PEM, "ca.pem")
    # one MAAS, one site: the fixture's site steps aside for the one this journey makes
    assert cli("sites", "disable", "flow-site", "--yes").exit_code == 0
    made = cli("sites", "create", "rack-7", "--maas-url", sim.url, "--pxe-subnet", "10.20.0.0/16",
               "--ca-bundle", str(ca),
               "--policy", '{"max_concurrent_workflows": 10}')  # fmt: skip
    assert made.exit_code == 0, made.output
    secrets = json.dumps({"maas_api_key": "SimConsumerKey1234:SimTokenKey1234567:"
                          "SimTokenSecretABCDEFGHIJKLMNOPQ",
                          "ipmi": {"username": "maas", "password": "ipmi-pass"}})  # fmt: skip
    creds = cli("sites", "set-credentials", "rack-7", "--from-file", "-", input=secrets)
    assert creds.exit_code == 0, creds.output
    assert "ipmi-pass" not in creds.output and "SimTokenSecret" not in creds.output
    assert cli("sites", "probe", "rack-7").exit_code == 0
    assert cli("profiles", "create", "rack-7", "h100", "--distro-series", "jammy").exit_code == 0
    assert cli("skus", "create", "gpu-h100", "--name", "8x H100", "--gpu-count", "8").exit_code == 0
    args = ["--site", "rack-7", "--profile", "h100", "--sku", "gpu-h100", "--watch",
            "--interval", "0.3"]  # fmt: skip
    bad = write(tmp_path, "hostname,ipmi_ip\nj01,10.10.9.1\nj02,10.10.9.300\n")
    refused = cli("onboard", "batch", str(bad), *args)
    assert refused.exit_code == 2 and f"{bad}:3 ipmi_ip" in refused.output
    assert not OnboardingBatch.objects.filter(site__name="rack-7").exists()
    fixed = write(tmp_path, "hostname,ipmi_ip\nj01,10.10.9.1\nj02,10.10.9.2\n", "fixed.csv")
    watched = cli("onboard", "batch", str(fixed), *args)
    assert watched.exit_code == 0, watched.output
    assert "succeeded" in watched.output and "2/2" in watched.output  # the progress bars
    assert "batch" in watched.output and "2 succeeded" in watched.output
    node = Node.objects.get(hostname="j01")
    assert node.state == "active"
    shown = json.loads(cli("-o", "json", "nodes", "show", str(node.pk)).output)
    assert shown["recent_workflows"][0]["state"] == "succeeded"
    timeline = json.loads(cli("-o", "json", "nodes", "timeline", str(node.pk)).output)
    assert any(e["kind"] == "stage.completed" for e in timeline["results"])
    moments = [e["at"] for e in timeline["results"]]
    assert moments == sorted(moments)  # oldest first, as every maasctl timeline
    reimage = cli("-o", "json", "decommission", str(node.pk), "--mode", "reimage", "--yes",
                  "--reason", "new image", "--watch", "--interval", "0.3")  # fmt: skip
    assert reimage.exit_code == 0, reimage.output
    wf = settle_decommission(Decommission.objects.get(node=node).pk)
    assert wf.state == "succeeded" and wf.request_reason == "new image"
