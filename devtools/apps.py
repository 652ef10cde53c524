from django.apps import AppConfig


class DevtoolsConfig(AppConfig):
    """The embedded runner and the demo: installed only outside production
    (config/settings.py), never imported by product code (checked by import-linter)."""

    name = "devtools"
    verbose_name = "Developer tools"
