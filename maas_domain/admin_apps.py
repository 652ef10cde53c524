"""``django.contrib.admin`` with the control plane's admin site (maas_domain/admin_site.py)."""

from django.contrib.admin.apps import AdminConfig


class ControlPlaneAdminConfig(AdminConfig):
    """The admin whose site throttles failed logins."""

    default_site = "maas_domain.admin_site.ControlPlaneAdminSite"
