"""Regions as a trust boundary for secrets (docs/security.md, T27), against a real OpenBao
(``bao server -dev``, tests/support/openbao.py): a region's workers log in with an AppRole whose
policy is ``manage.py secrets_policy --region`` and read only their region's sites' credentials
and node tokens; the central identity (``deploy/openbao/maascp-policy.hcl``) writes them and
moves a site's secrets when it changes region. Before, every region's workers logged in as the
central identity, so one region's host held every site's MAAS and IPMI credentials."""

from __future__ import annotations

import io
import secrets as pysecrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from maas_domain.models import CredentialKind, MaasSite, SiteCredential
from maas_domain.secrets import SecretsForbidden, get_backend
from maas_domain.secrets.sites import ipmi_credentials, maas_api_key
from maas_domain.services.credentials import site_credentials_write
from maas_domain.services.sites import site_update
from onboarding import payload
from onboarding.models import Onboarding
from tests.factories import make_onboarding, make_site
from tests.support.maas import API_KEY
from tests.support.openbao import OpenBao

pytestmark = pytest.mark.django_db
CENTRAL = Path(__file__).resolve().parents[1] / "deploy/openbao/maascp-policy.hcl"
IPMI = {"username": "maas", "password": "bmc-secret"}


@pytest.fixture
def identities(openbao: OpenBao, settings: Any) -> Callable[[str], None]:
    """``login(who)``: the product's secrets backend is now OpenBao as ``who`` ("central", or a
    region's name), with the shipped policies under a prefix of this test's own."""
    prefix = "maascp-rs-" + pysecrets.token_hex(4)
    central = CENTRAL.read_text().replace("maascp/", f"{prefix}/")
    roles = {"central": openbao.approle(central)}
    for region in ("east", "west"):
        out = io.StringIO()
        settings.VAULT = {**settings.VAULT, "MOUNT": "secret", "PATH_PREFIX": prefix}
        call_command("secrets_policy", region=region, stdout=out)
        roles[region] = openbao.approle(out.getvalue())

    def login(who: str) -> None:
        role = roles[who]
        settings.SECRETS_BACKEND = "vault"
        settings.VAULT = {"ADDR": openbao.url, "TOKEN": None, "ROLE_ID": role.role_id,
                          "SECRET_ID": role.secret_id, "MOUNT": "secret", "PATH_PREFIX": prefix,
                          "NAMESPACE": None, "CACERT": None, "TIMEOUT": 5}  # fmt: skip
        settings.SECRETS_CACHE_SECONDS = 0
        get_backend.cache_clear()

    return login


def credentials(admin: Any, site: MaasSite) -> None:
    site_credentials_write(actor=admin, site=site, payload={"maas_api_key": API_KEY, "ipmi": IPMI})
    SiteCredential.objects.filter(site=site, kind=CredentialKind.MAAS_API_KEY).update(
        version=1, pending_version=None
    )  # as a probe confirms it


def test_a_region_reads_its_own_sites_secrets_and_nobody_elses(
    identities: Callable[[str], None], admin_user: Any
) -> None:
    identities("central")
    east, west = make_site(name="e1", region="east"), make_site(name="w1", region="west")
    for site in (east, west):
        credentials(admin_user, site)
    east_wf = make_onboarding(east, hostname="e-node")
    west_wf = make_onboarding(west, hostname="w-node")

    identities("east")
    assert maas_api_key(site=east) == API_KEY  # its site's MAAS key and BMC password
    assert ipmi_credentials(site=east, hostname="e-node").password == IPMI["password"]
    tokens, _ = payload.mint_tokens(east_wf.pk, 1)  # its onboardings' node tokens
    assert get_backend().read(payload.tokens_path("east", east_wf.pk, 1))["bootstrap_token"] == (
        tokens.bootstrap
    )
    with pytest.raises(SecretsForbidden):  # another region's credentials
        maas_api_key(site=west)
    with pytest.raises(SecretsForbidden):
        ipmi_credentials(site=west, hostname="w-node")
    with pytest.raises(SecretsForbidden):  # another region's node tokens
        payload.mint_tokens(west_wf.pk, 1)
    with pytest.raises(SecretsForbidden):  # writing credentials is the central identity's
        get_backend().write(f"regions/east/sites/{east.pk}/maas-api-key", {"api_key": "a:b:c"})

    identities("west")
    assert maas_api_key(site=west) == API_KEY
    with pytest.raises(SecretsForbidden):
        maas_api_key(site=east)


def test_a_site_that_changes_region_takes_its_secrets_along(
    identities: Callable[[str], None], admin_user: Any
) -> None:
    identities("central")
    site = make_site(name="mover", region="west")
    credentials(admin_user, site)
    wf = make_onboarding(site, hostname="m-node", state="succeeded")
    payload.mint_tokens(wf.pk, 1)
    Onboarding.objects.filter(pk=wf.pk).update(node_token_attempt=1, token_attempt=1)
    site_update(actor=admin_user, site_id=site.pk, changes={"region": "east"})
    site.refresh_from_db()
    refs = SiteCredential.objects.filter(site=site)
    assert refs.count() == 2 and all(r.path.startswith("regions/east/") for r in refs)

    identities("east")
    assert maas_api_key(site=site) == API_KEY
    assert ipmi_credentials(site=site, hostname="m-node").username == "maas"
    assert get_backend().read(payload.tokens_path("east", wf.pk, 1))  # what its node holds
    identities("west")
    with pytest.raises(SecretsForbidden):  # the region it left reads it no more
        maas_api_key(site=site)


def test_credentials_written_before_regions_had_prefixes_move_once(
    identities: Callable[[str], None], admin_user: Any
) -> None:
    identities("central")
    site = make_site(name="old", region="east")
    credentials(admin_user, site)
    legacy = f"sites/{site.pk}/maas-api-key"  # where they were written before
    get_backend().write(legacy, {"api_key": API_KEY})
    SiteCredential.objects.filter(site=site, kind=CredentialKind.MAAS_API_KEY).update(
        path=legacy, version=1
    )
    identities("east")
    with pytest.raises(SecretsForbidden):  # outside the region's prefix: not readable to it
        maas_api_key(site=site)
    identities("central")
    out = io.StringIO()
    call_command("secrets_to_regions", stdout=out)
    assert "1 credential reference(s) moved" in out.getvalue()
    identities("east")
    assert maas_api_key(site=site) == API_KEY
    identities("central")
    again = io.StringIO()
    call_command("secrets_to_regions", stdout=again)
    assert "0 credential reference(s) moved" in again.getvalue()
