"""Reconciliation: periodic per-site comparison of MAAS with our records.

Will own node_maas_state, reconcile runs and the drift ledger (open/cleared/resolved drift per
node or machine and kind), run by Celery beat. Never changes MAAS by itself. Built in issue 7.
"""
