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
        _fleet_section()


def _fleet_section() -> None:
    """Open drift by severity on the fleet page (maas_domain/fleet.py): records nobody
    acknowledged yet, most severe first."""
    from maas_domain import fleet
    from maas_domain.humanize import SEVERITY_COLOURS
    from reconciliation.models import DriftRecord, Severity
    from reconciliation.selectors import open_drift_by_severity

    alarms: dict[str, str] = {
        str(s): SEVERITY_COLOURS[s] for s in (Severity.CRITICAL, Severity.WARNING)
    }
    fleet.register(
        fleet.Section(
            "open drift",
            30,
            lambda: [
                fleet.Column(
                    f"drift.{sev}",
                    str(sev),
                    fleet.changelist(DriftRecord, state="open", severity__exact=sev),
                    alarm=alarms.get(sev, ""),
                )
                for sev in reversed(Severity.values)  # critical, warning, info
            ],
            lambda: {
                (site, f"drift.{sev}"): n for (site, sev), n in open_drift_by_severity().items()
            },
        )
    )
