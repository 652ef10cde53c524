"""Admin API views: parse and check the request, call one service, render the answer."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from maas_domain.api.filters import ProfileFilter, RoceFilter, SiteFilter
from maas_domain.api.serializers import (
    ProfileSerializer,
    RoceAssignmentSerializer,
    SiteSerializer,
)
from maas_domain.errors import InvalidInput
from maas_domain.models import MaasSite, RoceAssignment, SiteProfile
from maas_domain.services import credentials as credential_services
from maas_domain.services import probe as probe_services
from maas_domain.services import roce as roce_services
from maas_domain.services import sites as site_services


def expected_revision(request: Request) -> int | None:
    """``If-Match: "3"`` (or ``3``) → 3; absent → None; anything else is a 400."""
    raw = request.headers.get("If-Match")
    if raw is None:
        return None
    value = raw.strip().removeprefix("W/").strip('"')
    if not value.isdigit():
        raise InvalidInput("Invalid If-Match header.", fields={"If-Match": ["Must be a revision."]})
    return int(value)


def with_etag(response: Response, revision: int) -> Response:
    response["ETag"] = f'"{revision}"'
    return response


class SiteViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[MaasSite]
):
    """``/maas-sites``: create, list, read, patch, disable (DELETE), write credentials."""

    serializer_class = SiteSerializer
    filterset_class = SiteFilter

    def get_queryset(self) -> QuerySet[MaasSite]:
        return (
            MaasSite.objects.annotate(power_override_count=Count("power_overrides"))
            .prefetch_related("credentials")
            .order_by("name")
        )

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        site = self.get_object()
        return with_etag(Response(self.get_serializer(site).data), site.revision)

    def create(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        site = site_services.site_create(actor=request.user, data=serializer.validated_data)
        return self._answer(site, status.HTTP_201_CREATED)

    def partial_update(self, request: Request, pk: str) -> Response:
        site = self.get_object()
        serializer = self.get_serializer(site, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        site = site_services.site_update(
            actor=request.user,
            site_id=site.pk,
            changes=serializer.validated_data,
            expected_revision=expected_revision(request),
        )
        return self._answer(site)

    def destroy(self, request: Request, pk: str) -> Response:
        site = self.get_object()
        site = site_services.site_disable(
            actor=request.user, site_id=site.pk, expected_revision=expected_revision(request)
        )
        return self._answer(site)

    @action(detail=True, methods=["post"])
    def credentials(self, request: Request, pk: str) -> Response:
        site = self.get_object()
        meta = credential_services.site_credentials_write(
            actor=request.user, site=site, payload=request.data
        )
        return Response({"site_id": site.pk, **meta})

    @action(detail=True, methods=["post"])
    def probe(self, request: Request, pk: str) -> Response:
        site = self.get_object()
        if request.data:
            raise InvalidInput(
                "The probe takes no parameters.",
                fields={k: ["Unknown field."] for k in request.data},
            )
        return Response(probe_services.site_probe(actor=request.user, site_id=site.pk))

    def _answer(self, site: MaasSite, code: int = status.HTTP_200_OK) -> Response:
        site = self.get_queryset().get(pk=site.pk)
        return with_etag(Response(self.get_serializer(site).data, status=code), site.revision)


class SiteScopedMixin:
    """For resources under ``/maas-sites/{site_pk}/``: the site must exist (404 otherwise)."""

    kwargs: dict[str, Any]

    @property
    def site(self) -> MaasSite:
        if not hasattr(self, "_site"):
            self._site = get_object_or_404(MaasSite, pk=self.kwargs["site_pk"])
        return self._site


class ProfileViewSet(
    SiteScopedMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[SiteProfile],
):
    serializer_class = ProfileSerializer
    filterset_class = ProfileFilter

    def get_queryset(self) -> QuerySet[SiteProfile]:
        return SiteProfile.objects.filter(site=self.site).select_related("site").order_by("name")

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        profile = self.get_object()
        return with_etag(Response(self.get_serializer(profile).data), profile.revision)

    def create(self, request: Request, site_pk: str) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        profile = site_services.profile_create(
            actor=request.user, site=self.site, data=serializer.validated_data
        )
        return self._answer(profile, status.HTTP_201_CREATED)

    def partial_update(self, request: Request, site_pk: str, pk: str) -> Response:
        profile = self.get_object()
        serializer = self.get_serializer(profile, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        profile = site_services.profile_update(
            actor=request.user,
            site=self.site,
            profile_id=profile.pk,
            changes=serializer.validated_data,
            expected_revision=expected_revision(request),
        )
        return self._answer(profile)

    def destroy(self, request: Request, site_pk: str, pk: str) -> Response:
        profile = self.get_object()
        profile = site_services.profile_disable(
            actor=request.user,
            site=self.site,
            profile_id=profile.pk,
            expected_revision=expected_revision(request),
        )
        return self._answer(profile)

    def _answer(self, profile: SiteProfile, code: int = status.HTTP_200_OK) -> Response:
        profile = self.get_queryset().get(pk=profile.pk)
        return with_etag(Response(self.get_serializer(profile).data, status=code), profile.revision)


class RoceAssignmentViewSet(
    SiteScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet[RoceAssignment]
):
    """List, bulk upsert (POST ``{"items": [...]}``), delete one."""

    serializer_class = RoceAssignmentSerializer
    filterset_class = RoceFilter

    def get_queryset(self) -> QuerySet[RoceAssignment]:
        return RoceAssignment.objects.filter(site=self.site).order_by("hostname", "interface")

    def create(self, request: Request, site_pk: str) -> Response:
        body = request.data
        if not isinstance(body, dict):
            raise InvalidInput(
                "Invalid input.", fields={"non_field_errors": ["Must be an object."]}
            )
        unknown = sorted(set(body) - {"items"})
        if unknown:
            raise InvalidInput("Invalid input.", fields={k: ["Unknown field."] for k in unknown})
        summary = roce_services.roce_bulk_upsert(
            actor=request.user, site=self.site, items=body.get("items")
        )
        return Response(summary, status=status.HTTP_200_OK)

    def destroy(self, request: Request, site_pk: str, pk: str) -> Response:
        roce_services.roce_delete(actor=request.user, site=self.site, assignment_id=int(pk))
        return Response(status=status.HTTP_204_NO_CONTENT)
