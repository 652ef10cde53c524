"""Reconciliation: periodic per-site comparison of MAAS with our records.

Owns node_maas_state, reconcile runs and the drift ledger (open/cleared/resolved drift per
node or machine and kind), run by Celery beat. Never changes MAAS by itself.
See docs/reconciliation.md.
"""
