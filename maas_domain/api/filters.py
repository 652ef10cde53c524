"""List filters (query parameters) per resource."""

from __future__ import annotations

import django_filters

from maas_domain.models import MaasSite, RoceAssignment, SiteProfile


class SiteFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = MaasSite
        fields = ["name", "status", "health"]


class ProfileFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = SiteProfile
        fields = ["name", "status", "distro_series", "architecture"]


class RoceFilter(django_filters.FilterSet):
    class Meta:
        model = RoceAssignment
        fields = ["hostname", "interface"]
