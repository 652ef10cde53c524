"""The core records every workflow shares: sites, profiles, SKUs, nodes, allocations, tokens,
audit, the event outbox, secrets and observability, with their services, API and admin pages.

Each concept has one home: site policy is resolved in ``policy``, every privileged change is
written through ``audit``, secrets only pass through ``secrets``, MAAS clients are built in
``site_client``. The workflow engine (``workflows``) and the apps build on it; the core learns
about workflow kinds only from their registration (``work``), never by importing them.
"""
