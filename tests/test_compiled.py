"""maas_domain/compiled.py: a read compiled once answers what its QuerySet answers, call after
call with other values, and every call reads the database (a rotated key is seen at once)."""

from __future__ import annotations

from typing import Any

import pytest

from maas_domain import compiled
from maas_domain.models import CredentialKind, MaasSite, SiteCredential
from maas_domain.models.security import SecretVersion
from maas_domain.secrets.sites import maas_api_key
from maas_domain.services.credentials import site_credentials_write
from tests.factories import make_site

pytestmark = pytest.mark.django_db

KEY = "Consumer12345678:Token12345678901:Secret1234567890123456789012345"
ROTATED = "Consumer12345678:Token12345678901:Other12345678901234567890123456"


def test_first_is_what_the_queryset_answers(django_assert_num_queries: Any) -> None:
    for n in range(3):
        for v in (1, 2, 3):
            SecretVersion.objects.create(path=f"p/{n}", version=v, ciphertext=f"{n}-{v}".encode())
    SecretVersion.objects.filter(path="p/1", version=3).update(destroyed=True)
    for n in range(4):  # one shape, compiled once, read with each path
        for version in (1, 2, 3, 4):
            where: dict[str, Any] = {"path": f"p/{n}", "destroyed": False, "version": version}
            expected = SecretVersion.objects.filter(**where).first()
            with django_assert_num_queries(1):
                found = compiled.first(SecretVersion, **where)
            assert (found and (found.pk, bytes(found.ciphertext))) == (
                expected and (expected.pk, bytes(expected.ciphertext))
            )
        latest = SecretVersion.objects.filter(path=f"p/{n}", destroyed=False)
        found = compiled.first(SecretVersion, order=("-version",), path=f"p/{n}", destroyed=False)
        expected = latest.order_by("-version").first()
        assert (found and found.pk) == (expected and expected.pk)


def test_a_none_runs_the_queryset(django_assert_num_queries: Any) -> None:
    site = make_site()
    SiteCredential.objects.create(
        site=site, kind=CredentialKind.MAAS_API_KEY, path="x", version=None
    )
    with django_assert_num_queries(1):
        found = compiled.first(SiteCredential, site_id=site.pk, version=None)
    assert found is not None and found.path == "x"
    assert compiled.first(SiteCredential, site_id=site.pk + 1000, version=None) is None


def test_get_is_what_the_queryset_gets(django_assert_num_queries: Any) -> None:
    sites = [make_site(name=f"compiled-{n}") for n in range(3)]
    for site in sites:
        with django_assert_num_queries(1):
            assert compiled.get(MaasSite, site.pk).name == site.name
    with pytest.raises(MaasSite.DoesNotExist):
        compiled.get(MaasSite, max(s.pk for s in sites) + 1000)


def test_the_sites_key_is_read_at_every_call_so_a_rotation_is_seen_at_once(
    admin_user: Any,
) -> None:
    site = make_site()
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": KEY})
    assert maas_api_key(site=site) == KEY
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": ROTATED})
    assert maas_api_key(site=site) == KEY  # pending until a probe confirms it
    assert maas_api_key(site=site, pending=True) == ROTATED
    ref = SiteCredential.objects.get(site=site, kind=CredentialKind.MAAS_API_KEY)
    ref.version, ref.pending_version = ref.pending_version, None  # what the probe does
    ref.save()
    assert maas_api_key(site=site) == ROTATED


def test_the_hot_reads_do_not_fall_back_to_the_queryset(
    monkeypatch: pytest.MonkeyPatch, admin_user: Any
) -> None:
    """What the engine reads at every step runs compiled (a fallback would be silent: the
    same answers, the ORM's CPU again)."""
    from django.db.models import QuerySet

    site = make_site()
    site_credentials_write(actor=admin_user, site=site, payload={"maas_api_key": KEY})
    SecretVersion.objects.create(path="t/1", version=1, ciphertext=b"a")
    SecretVersion.objects.create(path="t/1", version=2, ciphertext=b"b", destroyed=True)

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("ran through the QuerySet")

    monkeypatch.setattr(QuerySet, "first", refused)
    monkeypatch.setattr(QuerySet, "get", refused)
    assert maas_api_key(site=site) == KEY
    latest = compiled.first(SecretVersion, order=("-version",), path="t/1", destroyed=False)
    assert latest is not None and latest.version == 1
    gone = compiled.first(SecretVersion, path="t/1", destroyed=True, version=2)
    assert gone is not None and bytes(gone.ciphertext) == b"b"
    assert compiled.first(SecretVersion, path="t/1", destroyed=False, version=2) is None
    assert compiled.get(MaasSite, site.pk).pk == site.pk
