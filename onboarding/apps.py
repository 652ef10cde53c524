from django.apps import AppConfig


class OnboardingConfig(AppConfig):
    name = "onboarding"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from maas_domain.workflow import engine
        from onboarding.workflow import KIND

        engine.register(KIND)
