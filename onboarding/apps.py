from django.apps import AppConfig


class OnboardingConfig(AppConfig):
    name = "onboarding"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from maas_domain import events, regions
        from onboarding.budget import BATCH_PAUSED
        from onboarding.payload import tokens_to_region
        from onboarding.workflow import KIND
        from workflows.kinds import register

        register(KIND)
        if tokens_to_region not in regions.SITE_MOVED:
            regions.SITE_MOVED.append(tokens_to_region)
        events.register_type(BATCH_PAUSED)  # not a workflow outcome: registered deliberately
