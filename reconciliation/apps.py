from django.apps import AppConfig


class ReconciliationConfig(AppConfig):
    name = "reconciliation"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from maas_domain.observability import metrics
        from reconciliation.metrics import open_drift_by_kind

        metrics.register_gauge_source(
            "drift", lambda: [metrics.open_drift_family(open_drift_by_kind())]
        )
