"""Racing writers: exactly one wins, the others get 409 and change nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, MaasSite
from tests.factories import make_site


def _race(n: int, call: Any) -> list[int]:
    barrier = threading.Barrier(n)
    codes: list[int] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            codes.append(call(i))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(codes)


@pytest.mark.django_db(transaction=True)
def test_conditional_patches_race_one_wins(api: APIClient) -> None:
    site = make_site()

    def patch(i: int) -> int:
        response = api.patch(
            f"/api/v1/admin/maas-sites/{site.pk}",
            {"description": f"writer {i}"},
            format="json",
            HTTP_IF_MATCH='"1"',
        )
        return int(response.status_code)

    codes = _race(8, patch)
    assert codes.count(200) == 1
    assert codes.count(409) == 7
    site.refresh_from_db()
    assert site.revision == 2
    assert AuditLog.objects.filter(action="maas_site.update").count() == 1


@pytest.mark.django_db(transaction=True)
def test_same_name_created_concurrently_once(api: APIClient) -> None:
    def create(i: int) -> int:
        response = api.post(
            "/api/v1/admin/maas-sites",
            {"name": "contended", "maas_url": "http://m.test:5240/MAAS/"},
            format="json",
        )
        return int(response.status_code)

    codes = _race(6, create)
    assert codes.count(201) == 1
    assert codes.count(409) == 5
    assert MaasSite.objects.filter(name="contended").count() == 1
    assert AuditLog.objects.filter(action="maas_site.create").count() == 1
