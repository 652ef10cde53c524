from django.apps import AppConfig


class OnboardingConfig(AppConfig):
    name = "onboarding"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from maas_domain import events
        from onboarding.budget import BATCH_PAUSED
        from onboarding.workflow import KIND
        from workflows.kinds import register

        register(KIND)
        events.register_type(BATCH_PAUSED)  # not a workflow outcome: registered deliberately
