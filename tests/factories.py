"""Row builders for tests (plain functions; each takes overrides as keyword arguments)."""

from __future__ import annotations

import itertools
from typing import Any

from maas_domain.models import MaasSite, Node, SiteProfile, Sku

_seq = itertools.count(1)


def make_site(**overrides: Any) -> MaasSite:
    n = next(_seq)
    data: dict[str, Any] = {"name": f"site-{n}", "maas_url": f"http://maas-{n}.test:5240/MAAS/"}
    data.update(overrides)
    return MaasSite.objects.create(**data)


def make_profile(site: MaasSite, **overrides: Any) -> SiteProfile:
    data: dict[str, Any] = {"name": f"profile-{next(_seq)}"}
    data.update(overrides)
    return SiteProfile.objects.create(site=site, **data)


def make_sku(**overrides: Any) -> Sku:
    n = next(_seq)
    data: dict[str, Any] = {"code": f"sku-{n}", "name": f"SKU {n}", "gpu_count": 8}
    data.update(overrides)
    return Sku.objects.create(**data)


def make_node(site: MaasSite, **overrides: Any) -> Node:
    data: dict[str, Any] = {"hostname": f"node-{next(_seq)}", "sku": overrides.pop("sku", None)}
    if data["sku"] is None:
        data["sku"] = make_sku()
    data.update(overrides)
    return Node.objects.create(site=site, **data)


def make_onboarding(site: MaasSite, **overrides: Any) -> Any:
    from onboarding.models import Onboarding

    data: dict[str, Any] = {
        "hostname": f"gpu-{next(_seq)}",
        "ipmi_ip": f"10.0.{next(_seq) % 250}.{next(_seq) % 250 + 1}",
        "correlation_id": "test",
    }
    data.update(overrides)
    data.setdefault("profile", make_profile(site))
    data.setdefault("sku", make_sku())
    return Onboarding.objects.create(site=site, **data)
