"""A site on the MAAS simulator with a confirmed API key, and a helper that runs one reconcile
the way the worker does (request, then execute the queued run)."""

from __future__ import annotations

from typing import Any

import pytest

from maas_domain.models import MaasSite
from maas_domain.services.credentials import site_credentials_write
from reconciliation import services
from reconciliation.models import ReconcileRun
from tests.support.maas import API_KEY, Sim


def reconcile(site: MaasSite) -> ReconcileRun:
    run, created = services.reconcile_request(site=site, trigger="command")
    assert created, "a run was already in progress"
    done = services.reconcile_execute(run.pk)
    assert done is not None
    return done


@pytest.fixture
def site(db: None, sim: Sim, admin_user: Any) -> MaasSite:
    site = MaasSite.objects.create(name="recon-site", maas_url=sim.url)
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": API_KEY})
    return site
