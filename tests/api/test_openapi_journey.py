"""A client that knows only the OpenAPI document: every call below is found in the document
the live server serves (by operationId), and every answer is validated against it. It configures
a site, creates a SKU, onboards a node to success, reads the node and its timeline, and
reimages it, against the MAAS simulator and a real worker."""

from __future__ import annotations

import time
from typing import Any

import pytest
import requests
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from maas_domain.services.tokens import api_token_create
from maas_simulator.node import NodeSide
from tests.support.flows import CA_PEM, Flow
from tests.support.maas import API_KEY

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]  # fmt: skip


class DocumentClient:
    """Calls operations by their operationId, nothing else."""

    def __init__(self, base: str, token: str) -> None:
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.schema = schemathesis.openapi.from_url(
            f"{base}/api/v1/schema/?format=json", headers=dict(self.session.headers)
        )
        self.schema.config.update(base_url=base)
        self.used: list[str] = []

    def __call__(self, operation_id: str, *, expect: int, **parts: Any) -> Any:
        operation = self.schema.find_operation_by_id(operation_id)
        case = operation.Case(**parts)
        response = case.call(session=self.session)
        case.validate_response(response, checks=CHECKS)
        assert response.status_code == expect, (operation_id, response.text[:500])
        self.used.append(operation_id)
        return response.json() if response.content else None

    def until(self, operation_id: str, pk: int, states: tuple[str, ...], timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            wf = self(operation_id, expect=200, path_parameters={"id": pk},
                      query={"diagnostics": "false"})  # fmt: skip
            if wf["state"] in states or time.monotonic() > deadline:
                return wf
            time.sleep(0.3)


def test_configure_onboard_read_and_reimage_knowing_only_the_document(
    flow: Flow, node_side: NodeSide, live_server: Any, admin_user: Any
) -> None:
    _, token = api_token_create(actor=None, user=admin_user, name="openapi-client", scope="admin")
    api = DocumentClient(live_server.url, token)

    # the fixture's site is on the same simulator: one MAAS, one site, so the share is named
    site = api("sites_create", expect=201, body={
        "name": "doc-site", "maas_url": flow.sim.url, "pxe_subnet": "10.20.0.0/16",
        "ca_bundle_pem": CA_PEM, "share_maas_with": [flow.site.name],
        "policy": {"max_concurrent_workflows": 5},
    })  # fmt: skip
    assert site["ca_certificates"][0]["subject"] == "CN=maascp demo CA"
    creds = api("sites_set_credentials", expect=200, path_parameters={"id": site["id"]},
                body={"maas_api_key": API_KEY,
                      "ipmi": {"username": "maas", "password": "ipmi-pass"}})  # fmt: skip
    assert creds["maas_api_key"]["fields_set"] == ["api_key"] and "ipmi-pass" not in str(creds)
    probe = api("sites_probe", expect=200, path_parameters={"id": site["id"]})
    assert probe["health"] == "healthy", probe
    profile = api("profiles_create", expect=201, path_parameters={"site_pk": site["id"]},
                  body={"name": "h100", "distro_series": "jammy"})  # fmt: skip
    sku = api("skus_create", expect=201, body={"code": "doc-gpu", "name": "8x GPU",
                                               "gpu_count": 8})  # fmt: skip

    started = api("onboardings_start", expect=202, body={
        "site_id": site["id"], "profile_id": profile["id"], "sku_id": sku["id"],
        "hostname": "doc01", "ipmi_ip": "10.10.20.1",
    })  # fmt: skip
    done = api.until("onboardings_read", started["id"], ("succeeded", "failed"), 60)
    assert done["state"] == "succeeded", done

    nodes = api("nodes_list", expect=200, query={"search": "doc01", "site": site["id"]})
    [node] = nodes["results"]
    detail = api("nodes_read", expect=200, path_parameters={"id": node["id"]})
    assert (detail["state"], detail["sku_code"]) == ("active", "doc-gpu")
    assert detail["recent_workflows"][0]["id"] == started["id"]
    # one page of it all: MAAS stamps events to the second, and a fast simulated commissioning
    # puts more than a default page of them in the second the workflow started
    timeline = api("nodes_timeline", expect=200, path_parameters={"id": node["id"]},
                   query={"maas_events": True, "limit": 500})  # fmt: skip
    assert {e["source"] for e in timeline["results"]} >= {"workflow", "maas"}

    reimage = api("nodes_decommission", expect=202, path_parameters={"node_pk": node["id"]},
                  body={"mode": "reimage", "reason": "new image"})  # fmt: skip
    finished = api.until("decommissions_read", reimage["id"], ("succeeded", "failed"), 90)
    assert finished["state"] == "succeeded", finished
    assert api("nodes_read", expect=200, path_parameters={"id": node["id"]})["state"] == "active"
    # every call went through an operation the document declares (find_operation_by_id)
    assert set(api.used) == {
        "sites_create", "sites_set_credentials", "sites_probe", "profiles_create",
        "skus_create", "onboardings_start", "onboardings_read", "nodes_list", "nodes_read",
        "nodes_timeline", "nodes_decommission", "decommissions_read",
    }  # fmt: skip
