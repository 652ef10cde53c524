from django.apps import AppConfig


class MaasDomainConfig(AppConfig):
    name = "maas_domain"
    verbose_name = "MAAS domain"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from maas_domain import (
            celery_signals,  # noqa: F401 (connects the signal handlers)
            events,
            fleet,  # noqa: F401 (the core's sections of the fleet page)
        )
        from maas_domain.events import outbox_gauge
        from maas_domain.logging import install_record_factory
        from maas_domain.observability.metrics import register_gauge_source
        from maas_domain.regions import regions_gauge
        from maas_domain.services import cordons
        from maas_domain.work import workflows_gauge

        install_record_factory()
        # The metrics endpoint's database-derived gauges (docs/observability.md): each part of
        # the core registers its own, so observability never imports the engine.
        register_gauge_source("workflows", workflows_gauge)
        register_gauge_source("outbox", outbox_gauge)
        register_gauge_source("regions", regions_gauge)
        register_gauge_source("cordons", cordons.cordons_gauge)
        # not workflow outcomes: registered deliberately (asyncapi.draft.yaml)
        events.register_type(cordons.CORDONED)
        events.register_type(cordons.UNCORDONED)
