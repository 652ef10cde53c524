from django.apps import AppConfig


class DecommissionConfig(AppConfig):
    name = "decommission"
    default_auto_field = "django.db.models.BigAutoField"
