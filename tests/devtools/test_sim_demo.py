"""The compose ``sim`` profile's one-shot (``manage.py sim_demo``), run here against the test
stack (a real worker, the live server as the node listener, the simulator): it registers the
demo site with its own CA (the production processes may have none), probes it, onboards c07u31
end to end and says so; it fails, saying why, when the onboarding does not succeed."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from maas_domain.models import MaasSite
from maas_domain.services.sites import site_disable
from maas_simulator.node import NodeSide
from tests.support.flows import Flow
from tests.support.maas import API_KEY

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_sim_demo_onboards_the_demo_machine_through_the_stack(
    flow: Flow, node_side: NodeSide, tmp_path: Path, settings: Any
) -> None:
    flow.sim.add(hostname="c07u31", status="new", power_address="10.10.7.31")
    # one MAAS, one site (docs/api.md): the fixture's site steps aside for the demo's
    site_disable(actor=None, site_id=flow.site.pk)
    key = tmp_path / "api-key"
    key.write_text(API_KEY)
    out = io.StringIO()
    call_command(
        "sim_demo", "--maas-url", flow.sim.url, "--api-key-file", str(key), "--timeout", "120",
        stdout=out,
    )  # fmt: skip
    text = out.getvalue()
    assert "demo site probe: healthy" in text and "of c07u31 succeeded" in text, text
    demo = MaasSite.objects.get(name="demo")
    assert demo.ca_bundle_pem.strip() == settings.NODE_CA_PEM.strip()  # its own, carried along


def test_sim_demo_names_a_missing_simulator_key(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="never appeared"):
        call_command(
            "sim_demo", "--maas-url", "http://127.0.0.1:9/MAAS/",
            "--api-key-file", str(tmp_path / "none"), "--timeout", "0",
        )  # fmt: skip
