from django.apps import AppConfig


class RepairConfig(AppConfig):
    name = "repair"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from repair.workflow import KIND
        from workflows.kinds import register

        register(KIND)
