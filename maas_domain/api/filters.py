"""List filters (query parameters) per resource."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django.db.models import Q, QuerySet
from django_filters.fields import IsoDateTimeField
from drf_spectacular.utils import extend_schema_field

from maas_domain.models import (
    Allocation,
    AllocationState,
    Cordon,
    MaasSite,
    Node,
    NodeState,
    RoceAssignment,
    SiteProfile,
    Sku,
)
from maas_domain.validators import MAX_INT


class UtcIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 time in any offset ISO allows (up to ±23:59), compared in UTC: PostgreSQL
    refuses offsets past ±15:59 in a literal, and a time near year 1 or 9999 may not exist in
    UTC at all (a 400, not a 500)."""

    def to_python(self, value: Any) -> datetime | None:
        parsed: datetime | None = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError("Out of the range of representable times.") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": MAX_INT})
class IdFilter(django_filters.NumberFilter):
    """A row id in a list filter (``?site=3``): a whole number from 1 to ``MAX_INT``; anything
    else is a 400 naming the parameter, on SQLite and PostgreSQL alike."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_INT)
        super().__init__(*args, **kwargs)


class SiteFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = MaasSite
        fields = ["name", "status", "health", "region"]


class ProfileFilter(django_filters.FilterSet):
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = SiteProfile
        fields = ["name", "status", "distro_series", "architecture"]


class RoceFilter(django_filters.FilterSet):
    class Meta:
        model = RoceAssignment
        fields = ["hostname", "interface"]


class SkuFilter(django_filters.FilterSet):
    search = django_filters.CharFilter(method="search_code_or_name")

    class Meta:
        model = Sku
        fields = ["code", "active", "gpu_model"]

    def search_code_or_name(self, queryset: Any, name: str, value: str) -> Any:
        return queryset.filter(Q(code__icontains=value) | Q(name__icontains=value))


class NodeFilter(django_filters.FilterSet):
    site = IdFilter(field_name="site_id")
    sku = IdFilter(field_name="sku_id")
    state = django_filters.MultipleChoiceFilter(distinct=False, choices=NodeState.choices)
    search = django_filters.CharFilter(field_name="hostname", lookup_expr="icontains")
    cordoned = django_filters.BooleanFilter(
        method="filter_cordoned", help_text="Nodes with (true) or without (false) an active cordon."
    )

    class Meta:
        model = Node
        fields = ["site", "sku", "state", "hostname", "maas_system_id", "cordoned"]

    def filter_cordoned(self, queryset: QuerySet[Node], name: str, value: bool) -> QuerySet[Node]:
        held = Cordon.objects.filter(lifted_at__isnull=True).values("node_id")
        return queryset.filter(pk__in=held) if value else queryset.exclude(pk__in=held)


class AllocationFilter(django_filters.FilterSet):
    node = IdFilter(field_name="node_id")
    state = django_filters.MultipleChoiceFilter(distinct=False, choices=AllocationState.choices)
    holder = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Allocation
        fields = ["node", "state", "holder"]
