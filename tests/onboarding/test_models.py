"""The database holds the one-open-onboarding-per-host rule, whatever the code above it does."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from tests.factories import make_onboarding, make_site

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "state", ["pending", "running", "waiting", "cancelling", "manual_intervention"]
)
def test_second_open_onboarding_for_a_host_is_refused(state: str) -> None:
    site = make_site()
    make_onboarding(site, hostname="c07u31", state=state)
    with pytest.raises(IntegrityError), transaction.atomic():
        make_onboarding(site, hostname="c07u31")


@pytest.mark.parametrize("state", ["succeeded", "failed", "cancelled"])
def test_closed_onboardings_do_not_block_a_new_one(state: str) -> None:
    site = make_site()
    make_onboarding(site, hostname="c07u31", state=state)
    make_onboarding(site, hostname="c07u31")
    make_onboarding(make_site(), hostname="c07u31")  # another site is another host
