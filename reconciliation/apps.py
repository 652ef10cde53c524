from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from maas_domain import regions, retention, selectors
        from maas_domain.observability import metrics
        from reconciliation.metrics import open_drift_by_kind
        from reconciliation.retention import prune_runs
        from reconciliation.selectors import (
            node_observation,
            runs_in_flight_on_site,
            runs_waiting_by_region,
        )

        retention.register("reconcile_runs", "RETENTION_RECONCILE_RUN_DAYS", 86400, prune_runs)
        selectors.register_observation(node_observation)
        regions.register_source(
            regions.WorkSource("reconcile_runs", runs_waiting_by_region, runs_in_flight_on_site)
        )

        metrics.register_gauge_source(
            "drift", lambda: [metrics.open_drift_family(open_drift_by_kind())]
        )
