from django.apps import AppConfig


class MaasSimulatorConfig(AppConfig):
    """Development and test tool: installed only outside production (config/settings.py)."""

    name = "maas_simulator"
    verbose_name = "MAAS simulator"
