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
        _fleet_section()


def _fleet_section() -> None:
    """Batches in flight on the fleet page (maas_domain/fleet.py)."""
    from maas_domain import fleet
    from onboarding import selectors
    from onboarding.models import OnboardingBatch

    fleet.register(
        fleet.Section(
            "batches",
            50,
            lambda: [
                fleet.Column(
                    "batches.in_flight",
                    "in flight",
                    fleet.changelist(OnboardingBatch, phase="in_flight"),
                )
            ],
            lambda: {
                (site, "batches.in_flight"): n for site, n in selectors.in_flight_per_site().items()
            },
        )
    )
