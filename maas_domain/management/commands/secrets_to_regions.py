"""``manage.py secrets_to_regions``: move every site's credentials under its region's prefix
(once, after upgrading to per-region secrets; docs/operations.md, "Regions"). Run it with the
central identity, before giving a region's workers their own. Sites already there are left as
they are: running it again moves nothing."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from maas_domain.models import MaasSite
from maas_domain.services.credentials import site_secrets_to_region


class Command(BaseCommand):
    help = "Move every site's credentials under its region's prefix in the secrets server."

    def handle(self, *args: Any, **opts: Any) -> None:
        moved = 0
        for site in MaasSite.objects.order_by("pk"):
            with transaction.atomic():
                moved += site_secrets_to_region(site)
        self.stdout.write(f"{moved} credential reference(s) moved")
