"""Reconciliation: periodic per-site comparison of MAAS with our records.

Owns node_maas_state, reconcile runs and the drift ledger (open/cleared/resolved drift per
node or machine and kind), run by Celery beat, and the sweep of leaked machines (the only MAAS
change it makes: an admin's, or its own where policy allows it).
See docs/reconciliation.md.
"""
