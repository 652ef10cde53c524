from django.apps import AppConfig


class DecommissionConfig(AppConfig):
    name = "decommission"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from decommission.workflow import KIND
        from workflows.kinds import register

        register(KIND)
