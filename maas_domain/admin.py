"""Operators' admin pages for the MAAS domain's own records (sites, profiles, RoCE assignments,
SKUs, nodes, credentials metadata, audit log, API tokens).

Every write calls the same service as the API (``site_create``/``site_update``,
``profile_create``/``profile_update``, ``site_probe``, ``site_credentials_write``,
``sku_create``/``sku_update``): forms only check the *shape* of input with the services' own
validators, and a service error is shown to the operator with nothing changed. Workflow pages
live in ``workflows/admin.py`` (generic) and each app's ``admin.py``. The pages are in
``admin_sites``, ``admin_inventory`` and ``admin_accounts``, their shared pieces in
``admin_common``.
"""

from maas_domain import admin_accounts, admin_audit, admin_inventory, admin_sites

__all__ = ["admin_accounts", "admin_inventory", "admin_sites"]  # registered on import

admin_audit.install()

# Drift and reconcile runs: reconciliation/admin.py registers its own admins (docs/admin.md,
# "Drift"), built with the same helpers (maas_domain/admin_common.py).
