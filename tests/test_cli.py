"""The bulk CLI against a live server: CSV conversion, per-item results, exit codes, replays."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from decommission.models import Decommission
from maas_domain.auth import api_token_create
from maas_domain.cli import main
from maas_domain.models import Node, RoceAssignment
from onboarding.models import Onboarding, OnboardingBatch
from tests.factories import make_profile, make_site, make_sku

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server: Any, admin_user: Any) -> Any:
    _, token = api_token_create(user=admin_user, name="cli-test")

    def run(*argv: str) -> tuple[int, list[dict[str, Any]]]:
        out = io.StringIO()
        code = main(["--url", live_server.url, "--token", token, *argv], out=out)
        return code, [json.loads(line) for line in out.getvalue().splitlines()]

    return run


@pytest.fixture
def target() -> Any:
    site = make_site(health="healthy", last_probe_at=timezone.now())
    return site, make_profile(site), make_sku()


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "rows.csv"
    path.write_text(text)
    return str(path)


def test_onboard_csv_makes_one_batch_and_a_rerun_replays_it(
    cli: Any, target: Any, tmp_path: Path
) -> None:
    site, profile, sku = target
    csv_file = write(tmp_path, "hostname,ipmi_ip\nc01,10.1.0.1\nc02,10.1.0.2\n")
    ids = ("--site", str(site.pk), "--profile", str(profile.pk), "--sku", str(sku.pk))
    code, lines = cli("onboard-csv", csv_file, *ids)
    assert code == 0 and lines[0]["ok"] and lines[0]["size"] == 2
    assert Onboarding.objects.filter(batch_id=lines[0]["batch_id"]).count() == 2
    again = cli("onboard-csv", csv_file, *ids)
    assert again == (0, lines)  # same file: the first answer, nothing started twice
    assert OnboardingBatch.objects.count() == 1
    code, progress = cli("batch", str(lines[0]["batch_id"]))
    assert code == 0 and progress[0]["size"] == 2


def test_onboard_csv_errors_point_at_csv_lines(cli: Any, target: Any, tmp_path: Path) -> None:
    site, profile, sku = target
    csv_file = write(tmp_path, "hostname,ipmi_ip\nc01,10.1.0.1\nbad host!,10.1.0.2\nc03,nope\n")
    code, lines = cli(
        "onboard-csv", csv_file, "--site", str(site.pk), "--profile", str(profile.pk),
        "--sku", str(sku.pk),
    )  # fmt: skip
    assert code == 1
    assert {(x["line"], x["field"]) for x in lines if "line" in x} == {
        (3, "hostname"),
        (4, "ipmi_ip"),
    }
    assert not Onboarding.objects.exists()


def test_a_csv_with_other_columns_is_refused_before_any_call(
    cli: Any, target: Any, tmp_path: Path
) -> None:
    site, *_ = target
    with pytest.raises(SystemExit, match="header must be exactly"):
        cli("roce-csv", write(tmp_path, "hostname,iface,addr\nc01,eth2,10.0.0.1/31\n"),
            "--site", str(site.pk))  # fmt: skip


def test_roce_csv_is_all_or_nothing_with_line_numbers(
    cli: Any, target: Any, tmp_path: Path
) -> None:
    site, *_ = target
    header = "hostname,interface,ipv4_cidr\n"
    bad = write(tmp_path, header + "c01,ens1f0,10.50.0.2/31\nc02,ens1f0,10.50.0.2/31\n")
    code, lines = cli("roce-csv", bad, "--site", str(site.pk))
    assert code == 1
    assert [(x["line"], x["field"]) for x in lines if "line" in x] == [(3, "ipv4_cidr")]
    assert not RoceAssignment.objects.exists()
    good = write(tmp_path, header + "c01,ens1f0,10.50.0.2/31\nc02,ens1f0,10.50.0.4/31\n")
    code, lines = cli("roce-csv", good, "--site", str(site.pk))
    assert code == 0 and lines[0]["created"] == 2
    assert RoceAssignment.objects.count() == 2


def test_bulk_decommission_and_verbs_report_per_item(cli: Any, target: Any) -> None:
    site, _, sku = target
    nodes = [
        Node.objects.create(site=site, sku=sku, hostname=f"d{i}", ipmi_ip=f"10.2.0.{i}",
                            state=state)
        for i, state in enumerate(["active", "active", "registered"], start=1)
    ]  # fmt: skip
    code, lines = cli("decommission", "storage-cleanup", *(str(n.pk) for n in nodes), "--yes",
                      "--reason", "tenant churn")  # fmt: skip
    assert code == 1
    assert [x["ok"] for x in lines] == [True, True, False]
    assert lines[2]["status"] == 409 and lines[2]["node"]["state"] == "registered"
    made = list(Decommission.objects.order_by("id"))
    assert [d.request_reason for d in made] == ["tenant churn", "tenant churn"]
    code, plans = cli("verb", "decommissions", "cancel", *(str(d.pk) for d in made), "--dry-run")
    assert code == 0 and all(p["from_stage"] == "preflight" for p in plans)
    code, done = cli("verb", "decommissions", "cancel", str(made[0].pk), "--yes")
    assert code == 0 and done[0]["state"] in ("cancelled", "cancelling")
