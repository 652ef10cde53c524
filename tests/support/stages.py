"""Running one stage function against the simulator with no broker and no worker.

``Bench`` is a ready site on a fresh simulator (credentials in the database secrets backend, a
healthy probe, a profile, a SKU) and a node-facing HTTP server that answers 200, so a stage can
be called with the engine's real context (lease, heartbeat, the site's MAAS client). MAAS
mutations are read from the simulator's counters, never from a stubbed client.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import F
from django.utils import timezone

from devtools.demo import demo_ca_pem
from maas_domain.models import MaasSite, Node, SiteProfile, Sku
from maas_domain.services.credentials import site_credentials_write
from onboarding.models import Onboarding
from tests.support.maas import API_KEY, Sim, make_sim
from workflows import step
from workflows.kinds import KINDS, StageContext
from workflows.results import Result

CA_PEM = demo_ca_pem()


class _Ok(BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:
        self.send_response(200)
        self.end_headers()

    do_GET = do_HEAD

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class Bench:
    sim: Sim
    site: MaasSite
    profile: SiteProfile
    sku: Sku
    admin: Any

    def node(self, hostname: str, ipmi_ip: str, **fields: Any) -> Node:
        return Node.objects.create(
            site=self.site, sku=self.sku, hostname=hostname, ipmi_ip=ipmi_ip, **fields
        )

    def onboarding(self, hostname: str, ipmi_ip: str, **fields: Any) -> Onboarding:
        """An onboarding of a provisioning node of the bench's site (a row, nothing run)."""
        node = self.node(hostname, ipmi_ip, state="provisioning")
        fields.setdefault("correlation_id", "stage-test")
        return Onboarding.objects.create(
            site=self.site, profile=self.profile, sku=self.sku, node=node, hostname=hostname,
            ipmi_ip=ipmi_ip, **fields,
        )  # fmt: skip

    def policy(self, **values: Any) -> None:
        self.site.policy = {**self.site.policy, **values}
        self.site.save(update_fields=["policy"])


@pytest.fixture
def bench(db: None) -> Iterator[Bench]:
    sim = make_sim({"users": []})
    node_api = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    threading.Thread(target=node_api.serve_forever, args=(0.05,), daemon=True).start()
    admin = get_user_model().objects.create_user("stage-admin", is_staff=True, is_superuser=True)
    site = MaasSite.objects.create(
        name="stage-site",
        maas_url=sim.url,
        pxe_subnet="10.20.0.0/16",
        ca_bundle_pem=CA_PEM,
        node_api_url=f"http://127.0.0.1:{node_api.server_address[1]}",
        allow_http=True,  # a lab on loopback (docs/security.md: https otherwise)
        health="healthy",
        last_probe_at=timezone.now(),
    )
    site_credentials_write(
        actor=admin,
        site=site,
        payload={"maas_api_key": API_KEY, "ipmi": {"username": "maas", "password": "ipmi-pass"}},
    )
    profile = SiteProfile.objects.create(site=site, name="h100", distro_series="jammy")
    sku = Sku.objects.create(code="gpu-8x", name="8x GPU", gpu_count=8)
    yield Bench(sim, site, profile, sku, admin)
    node_api.shutdown()
    sim.server.stop()


def run_stage(
    kind_name: str, wf: Any, stage: str | None = None, *, record: bool = False
) -> tuple[Result, list[Any]]:
    """Run ``stage`` (default: the row's; the kind's cancel stage runs while cancelling) of
    workflow ``wf`` once, as an execution that holds
    its lease would; returns the stage's result (exceptions mapped as the engine maps them)
    and the timeline entries it asked for. Nothing is recorded unless ``record`` (then the
    engine records the result, scratch data included, as after a real step)."""
    kind = KINDS[kind_name]
    cancelling = kind.cancel is not None and stage == kind.cancel.name
    updated = kind.model._default_manager.filter(pk=wf.pk).update(
        state="cancelling" if cancelling else "running",
        stage=wf.stage if cancelling or stage is None else stage,
        dispatch=F("dispatch") + 1,
        lease_owner="",
        lease_expires_at=None,
    )
    assert updated == 1
    dispatch = kind.model._default_manager.values_list("dispatch", flat=True).get(pk=wf.pk)
    claimed = step.claim(kind, wf.pk, dispatch)
    assert claimed is not None
    row, owner = claimed
    ctx = StageContext(kind, row, owner)
    recording = Recording(ctx)
    ctx.__dict__["maas"] = recording  # the context's cached client, through the recorder
    result = step.execute(ctx)
    missing = undeclared(kind, recording.called)
    assert not missing, f"MAAS calls the stage declarations lack: {missing}"
    assert result is not None, "the stage lost its lease"
    if record:
        step.record(ctx, result)
    wf.refresh_from_db()
    return result, ctx.events


class Recording:
    """The stage's MAAS client, seen through a recorder: which methods each stage called (the
    stage current at the call), built lazily as the engine builds it."""

    def __init__(self, ctx: StageContext[Any]) -> None:
        self._ctx = ctx
        self._client: Any = None
        self.called: list[tuple[str, str]] = []

    def _stage(self) -> str:
        kind, wf = self._ctx.kind, self._ctx.wf
        cancelling = wf.state == "cancelling" and kind.cancel is not None
        return kind.cancel.name if cancelling and kind.cancel is not None else wf.stage

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = StageContext.maas.func(self._ctx)  # type: ignore[attr-defined]
        target = getattr(self._client, name)
        if not callable(target) or name.startswith("_") or name == "close":
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.called.append((self._stage(), name))
            return target(*args, **kwargs)

        return call


def undeclared(kind: Any, called: list[tuple[str, str]]) -> list[str]:
    """Calls a stage made that its declaration (``Stage.maas_calls``) does not name."""
    declared = {s.name: {c.method for c in s.maas_calls} for s in kind.all_stages}
    return sorted({f"{stage}: {m}" for stage, m in called if m not in declared.get(stage, ())})
