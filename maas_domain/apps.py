from django.apps import AppConfig


class MaasDomainConfig(AppConfig):
    name = "maas_domain"
    verbose_name = "MAAS domain"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from maas_domain import celery_signals  # noqa: F401 (connects the signal handlers)
        from maas_domain.logging import install_record_factory

        install_record_factory()
