"""The workflow engine: durable workflows of any kind, run stage by stage against MAAS by
Celery, with leases, checkpoints, timeouts, the sweep, the recovery verbs, and the API and
admin pages every kind shares (docs/architecture.md, "Workflows").
"""
