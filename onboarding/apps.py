from django.apps import AppConfig


class OnboardingConfig(AppConfig):
    name = "onboarding"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from maas_domain import workflows
        from onboarding.models import Onboarding

        workflows.register("onboarding", Onboarding)
