"""Real Prometheus tools against what we ship: ``promtool check metrics`` over a real scrape, a
Prometheus server scraping a running stack with the configuration documented in
docs/observability.md, and the alerting rules in docs/prometheus/ (checked and unit-tested).

The binaries come from Debian's ``prometheus`` package, which ``make check`` installs
(scripts/ensure-debian); the tests skip, saying so, only where it cannot be installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from maas_domain.observability import metrics
from maas_domain.services.tokens import api_token_create
from maas_simulator.node import NodeSide
from tests.observability.scrape import parse, value
from tests.support.flows import Flow, settle, start, wait_until
from tests.support.openbao import free_port

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "docs" / "prometheus" / "alerts.yml"
RULE_TESTS = ROOT / "docs" / "prometheus" / "alerts.test.yml"
OBSERVABILITY = ROOT / "docs" / "observability.md"


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(
            f"{name} is not installed: scripts/ensure-debian installs Debian's prometheus "
            "package (needs root and apt-get); make check runs it"
        )
    return path


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary("promtool"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def documented_scrape_config() -> dict[str, Any]:
    """The scrape configuration block of docs/observability.md, as an operator copies it."""
    blocks = re.findall(r"```yaml\n(.*?)```", OBSERVABILITY.read_text(), re.S)
    configs = [yaml.safe_load(b) for b in blocks if "scrape_configs:" in b]
    assert len(configs) == 1, "docs/observability.md should document one scrape configuration"
    config: dict[str, Any] = configs[0]
    return config


# -- alerting rules ----------------------------------------------------------------------------


def alerts() -> dict[str, dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule for group in groups for rule in group["rules"]}


def test_alert_rules_pass_promtool_check_and_their_unit_tests() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in checked.stdout
    tested = promtool("test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_has_a_unit_test_and_queries_only_metrics_we_export() -> None:
    rules = alerts()
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    tested = {
        case["alertname"]
        for test in tests
        for case in test["alert_rule_test"]
        if case.get("exp_alerts")  # a test that sees it fire, not only stay quiet
    }
    assert set(rules) == tested, f"alerts never seen firing in a test: {set(rules) - tested}"
    exported = metrics.sample_names()
    for name, rule in rules.items():
        used = set(re.findall(r"\bmaascp_[a-z0-9_]+", rule["expr"]))
        assert used <= exported, f"{name} queries metrics nobody exports: {used - exported}"
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert rule["annotations"]["runbook"].startswith("docs/operations.md#"), name
    # what operators asked to be woken for
    expressions = " ".join(rule["expr"] for rule in rules.values())
    for needed in (
        'kind="workflow_stuck"',
        "maascp_outbox_oldest_unpublished_age_seconds",
        'severity="critical"',
        'severity="warning"',
        "maascp_maas_requests_total",
        'job="maascp-worker"',
    ):
        assert needed in expressions, needed


def test_a_broken_rule_fails_promtool(tmp_path: Path) -> None:
    """The gate can fail: promtool rejects a rule file with a bad expression."""
    broken = tmp_path / "broken.yml"
    broken.write_text(RULES.read_text().replace("> 300", "> > 300", 1))
    assert promtool("check", "rules", str(broken)).returncode != 0


# -- a real scrape, a real Prometheus --------------------------------------------------------


def start_prometheus(config: dict[str, Any], workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = (workdir / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary("prometheus"),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--web.enable-lifecycle",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError((workdir / "prometheus.log").read_text()[-3000:])
        try:
            return requests.get(f"{base}/-/ready", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False

    wait_until(ready, timeout=30, what="Prometheus to be ready")
    return process, base


def query(base: str, promql: str) -> list[dict[str, Any]]:
    body = requests.get(f"{base}/api/v1/query", params={"query": promql}, timeout=5).json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_prometheus_scrapes_the_running_stack_with_the_documented_configuration(
    flow: Flow, node_side: NodeSide, live_server: Any, tmp_path: Path
) -> None:
    binary("prometheus")
    flow.sim.add(hostname="unnamed-node", status="new", power_address="10.10.7.71")
    wf = settle(start(flow, "c07u71", "10.10.7.71").pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    _, token = api_token_create(actor=None, user=flow.admin, name="prometheus")

    # promtool lints a real scrape of the admin endpoint (names, types, help, units)
    scraped = requests.get(
        f"{live_server.url}/api/v1/admin/metrics",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert scraped.status_code == 200, scraped.text
    assert "maascp_workflow_stage_duration_seconds_bucket" in scraped.text
    linted = promtool("check", "metrics", stdin=scraped.text)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    # and the gate can fail: a counter without _total is a lint problem
    assert "maascp_maas_requests_total{" in scraped.text
    bad = scraped.text.replace("maascp_maas_requests_total", "maascp_maas_requests")
    refused = promtool("check", "metrics", stdin=bad)
    assert refused.returncode != 0
    assert 'maascp_maas_requests counter metrics should have "_total" suffix' in refused.stderr

    # Prometheus with the documented scrape configuration, pointed at this stack; the worker job
    # targets a port nobody serves (the in-process test worker has none): it must show as down
    config = documented_scrape_config()
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == {"maascp-api", "maascp-worker"}
    token_file = tmp_path / "maascp-token"
    token_file.write_text(token + "\n")  # files end in a newline; Prometheus trims it
    jobs["maascp-api"]["authorization"]["credentials_file"] = str(token_file)
    jobs["maascp-api"]["static_configs"] = [{"targets": [live_server.url.split("//", 1)[1]]}]
    jobs["maascp-worker"]["static_configs"] = [{"targets": [f"127.0.0.1:{free_port()}"]}]
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(RULES)]
    process, base = start_prometheus(config, tmp_path)  # the worker job's target: unserved
    try:
        succeeded = wait_until(
            lambda: query(
                base, 'maascp_workflows{job="maascp-api",kind="onboarding",state="succeeded"}'
            ),
            timeout=30,
            what="Prometheus to scrape the workflow gauge",
        )
        assert float(succeeded[0]["value"][1]) == 1
        ended = "maascp_workflow_stage_duration_seconds_count"
        stages = query(
            base,
            f'sum({ended}{{kind="onboarding",outcome="succeeded"}})',
        )
        # the same count the endpoint served (this process's earlier tests may have added to it)
        served = value(parse(scraped.text), ended, kind="onboarding", outcome="succeeded")
        assert served >= 9  # every stage of this onboarding ended once
        assert float(stages[0]["value"][1]) == served

        def health() -> dict[str, str]:
            targets = requests.get(f"{base}/api/v1/targets", timeout=5).json()["data"]
            return {t["labels"]["job"]: t["health"] for t in targets["activeTargets"]}

        wait_until(lambda: "unknown" not in health().values(), what="both jobs scraped")
        assert health() == {"maascp-api": "up", "maascp-worker": "down"}

        # the alerting rules load and evaluate against real series without errors: only the
        # worker alerts go pending (its job is down), nothing else
        def rules() -> list[dict[str, Any]]:
            groups = requests.get(f"{base}/api/v1/rules", timeout=5).json()["data"]["groups"]
            return [rule for group in groups for rule in group["rules"]]

        def pending() -> set[str]:
            return {r["name"] for r in rules() if r["state"] != "inactive"}

        expected = {"MaascpWorkerDown", "MaascpNoWorkers"}
        wait_until(lambda: pending() == expected, timeout=20, what=f"only {expected} pending")
        assert {r["name"]: r["health"] for r in rules()} == dict.fromkeys(alerts(), "ok")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
