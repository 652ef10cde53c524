"""Admin API views: parse and check the request, call one service, render the answer."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar

from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from maas_domain import dryrun
from maas_domain.access import Action
from maas_domain.api.filters import (
    ProfileFilter,
    RoceFilter,
    SiteFilter,
)
from maas_domain.api.schema import IF_MATCH, path_id
from maas_domain.api.serializers import (
    CredentialsAnswerSerializer,
    IndexSerializer,
    ProbeResultSerializer,
    ProbeSerializer,
    ProfileSerializer,
    ReleaseSerializer,
    RoceAssignmentSerializer,
    RoceBulkSerializer,
    RoceSummarySerializer,
    SiteCredentialsSerializer,
    SiteSerializer,
    TokenCreatedSerializer,
    TokenCreateSerializer,
    TokenSerializer,
)
from maas_domain.errors import InvalidInput
from maas_domain.models import (
    ApiToken,
    MaasSite,
    RoceAssignment,
    SiteProfile,
)
from maas_domain.services import credentials as credential_services
from maas_domain.services import probe as probe_services
from maas_domain.services import roce as roce_services
from maas_domain.services import sites as site_services
from maas_domain.services import tokens as token_services


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


class RevisionedMixin(mixins.RetrieveModelMixin):
    """A row with a ``revision``: read with its ETag, created, patched and removed through its
    services (``create_with``, ``update_with``, ``remove_with``, each called with the row's id
    as ``row_id`` and the view's ``scope()``), every write answering the row as read back (its
    new revision as the ETag), so ``If-Match`` works from any answer. A removal that leaves
    nothing to show (a service answering None) is a 204."""

    create_with: ClassVar[Callable[..., Any]]
    update_with: ClassVar[Callable[..., Any]]
    remove_with: ClassVar[Callable[..., Any]]
    row_id: ClassVar[str]

    def scope(self) -> dict[str, Any]:
        return {}

    def create(self, request: Request, **kwargs: Any) -> Response:
        body = self.get_serializer(data=request.data)  # type: ignore[attr-defined]
        body.is_valid(raise_exception=True)
        row = type(self).create_with(actor=request.user, data=body.validated_data, **self.scope())
        return self._answer(row, status.HTTP_201_CREATED)

    def partial_update(self, request: Request, **kwargs: Any) -> Response:
        row = self.get_object()  # type: ignore[attr-defined]
        body = self.get_serializer(row, data=request.data, partial=True)  # type: ignore[attr-defined]
        body.is_valid(raise_exception=True)
        row = type(self).update_with(
            actor=request.user,
            changes=body.validated_data,
            expected_revision=expected_revision(request),
            **{self.row_id: row.pk},
            **self.scope(),
        )
        return self._answer(row)

    def destroy(self, request: Request, **kwargs: Any) -> Response:
        row = self.get_object()  # type: ignore[attr-defined]
        kept = type(self).remove_with(
            actor=request.user,
            expected_revision=expected_revision(request),
            **{self.row_id: row.pk},
            **self.scope(),
        )
        if kept is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return self._answer(kept)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        row = self.get_object()  # type: ignore[attr-defined]
        return with_etag(Response(self.get_serializer(row).data), row.revision)  # type: ignore[attr-defined]

    def _answer(self, row: Any, code: int = status.HTTP_200_OK) -> Response:
        row = self.get_queryset().get(pk=row.pk)  # type: ignore[attr-defined]
        data = self.get_serializer(row).data  # type: ignore[attr-defined]
        return with_etag(Response(data, status=code), row.revision)


@extend_schema_view(
    list=extend_schema(
        operation_id="sites_list",
        summary="List MAAS sites",
        description=(
            "Every MAAS site with its health, last probe, policy (explicit and effective), "
            "node trust and credential metadata (never a secret). Filter by name, status or "
            "health."
        ),
        tags=["sites"],
    ),
    retrieve=extend_schema(
        operation_id="sites_read",
        summary="Read a MAAS site",
        description=(
            "One site with its effective policy and where each value comes from, its node "
            "trust, probe result and credential metadata. The `ETag` is its revision, for "
            "`If-Match`."
        ),
        tags=["sites"],
    ),
    create=extend_schema(
        operation_id="sites_create",
        summary="Register a MAAS site",
        description=(
            "Register a MAAS region by name and URL. Its nodes reach and trust this control "
            "plane by default (`node_trust`: the deployment's node URL and CA, "
            'docs/settings.md "Node trust"); a site whose nodes would have nothing to trust '
            "is refused with the field and the fix. Then write its credentials and probe it."
        ),
        tags=["sites"],
    ),
    partial_update=extend_schema(
        operation_id="sites_update",
        summary="Change a MAAS site",
        description=(
            "Change any writable field; `policy` is a JSON merge-patch (`null` removes a key, "
            "which then inherits its default). Send `If-Match` with the revision you read to "
            "refuse a change made meanwhile (409). Changing `region` is refused (409, naming "
            "the work in `open_work`) while the site has work running, waiting or cancelling."
        ),
        tags=["sites"],
        parameters=[IF_MATCH],
    ),
    destroy=extend_schema(
        operation_id="sites_disable",
        summary="Disable a MAAS site",
        description=(
            "Disable the site: it is never deleted, so its history stays. Refused (409) while "
            "workflows are open on it."
        ),
        tags=["sites"],
        parameters=[IF_MATCH],
        responses={200: SiteSerializer},
    ),
    credentials=extend_schema(
        operation_id="sites_set_credentials",
        summary="Write or rotate a site's credentials",
        description=(
            "Store the MAAS API key and/or IPMI credentials (any subset) in the secrets "
            "backend. The answer shows which fields are set, their versions and who rotated "
            "them, never a value. A new MAAS key stays pending until a probe authenticates "
            "with it."
        ),
        tags=["sites"],
        request=SiteCredentialsSerializer,
        responses={200: CredentialsAnswerSerializer},
    ),
    probe=extend_schema(
        operation_id="sites_probe",
        summary="Probe a MAAS site",
        description=(
            "Check what onboarding needs from this MAAS now: connectivity, authentication, "
            "version, boot resources per profile, PXE subnets, power credentials and node "
            "trust. Each check says ok or what failed; the site's health follows. A pending "
            "MAAS key is promoted when MAAS accepts it. A site outside the default region is "
            "probed by a worker of its region: 503 when none is live or it does not answer in "
            "time."
        ),
        tags=["sites"],
        request=ProbeSerializer,
        responses={200: ProbeResultSerializer},
    ),
)
class SiteViewSet(RevisionedMixin, mixins.ListModelMixin, viewsets.GenericViewSet[MaasSite]):
    """``/maas-sites``: create, list, read, patch, disable (DELETE), write credentials."""

    serializer_class = SiteSerializer
    filterset_class = SiteFilter
    action_classes = {"probe": Action.OPERATE}  # writes, credentials: admin (the default)
    dry_run_plans = frozenset({"probe"})  # a dry-run probe reads MAAS and stores nothing
    create_with = staticmethod(site_services.site_create)
    update_with = staticmethod(site_services.site_update)
    remove_with = staticmethod(site_services.site_disable)  # disabled, never deleted
    row_id = "site_id"

    def get_queryset(self) -> QuerySet[MaasSite]:
        return (
            MaasSite.objects.annotate(power_override_count=Count("power_overrides"))
            .prefetch_related("credentials")
            .order_by("name")
        )

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
        body = ProbeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(
            probe_services.site_probe_in_region(
                actor=request.user,
                site_id=site.pk,
                dry_run=dryrun.active(),
                **body.validated_data,
            )
        )


class SiteScopedMixin:
    """For resources under ``/maas-sites/{site_pk}/``: the site must exist (404 otherwise)."""

    kwargs: dict[str, Any]

    @property
    def site(self) -> MaasSite:
        if not hasattr(self, "_site"):
            self._site = get_object_or_404(MaasSite, pk=self.kwargs["site_pk"])
        return self._site


@extend_schema_view(
    list=extend_schema(
        operation_id="profiles_list",
        summary="List a site's profiles",
        description=(
            "The site's profiles (runtime target and policy overrides) with their effective policy."
        ),
    ),
    retrieve=extend_schema(
        operation_id="profiles_read",
        summary="Read a profile",
        description=("One profile with its effective policy and where each value comes from."),
    ),
    create=extend_schema(
        operation_id="profiles_create",
        summary="Add a profile to a site",
        description=(
            "A profile: architecture, distro series, kernel, storage layout, PXE interface "
            "and subnet, and policy overrides of the site's values."
        ),
    ),
    partial_update=extend_schema(
        operation_id="profiles_update",
        summary="Change a profile",
        description=(
            "Change any writable field; `policy_overrides` is a JSON merge-patch (`null` "
            "removes a key). `If-Match` makes the change conditional on the revision you "
            "read."
        ),
        parameters=[IF_MATCH],
    ),
    destroy=extend_schema(
        operation_id="profiles_disable",
        summary="Disable a profile",
        description=("Disable the profile (never deleted); refused (409) while workflows use it."),
        parameters=[IF_MATCH],
        responses={200: ProfileSerializer},
    ),
)
@extend_schema(tags=["profiles"], parameters=[path_id("site_pk", "The site.")])
class ProfileViewSet(
    SiteScopedMixin, RevisionedMixin, mixins.ListModelMixin, viewsets.GenericViewSet[SiteProfile]
):
    serializer_class = ProfileSerializer
    filterset_class = ProfileFilter
    create_with = staticmethod(site_services.profile_create)
    update_with = staticmethod(site_services.profile_update)
    remove_with = staticmethod(site_services.profile_disable)
    row_id = "profile_id"

    def get_queryset(self) -> QuerySet[SiteProfile]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request
            return SiteProfile.objects.none()
        return SiteProfile.objects.filter(site=self.site).select_related("site").order_by("name")

    def scope(self) -> dict[str, Any]:
        return {"site": self.site}


@extend_schema_view(
    list=extend_schema(
        operation_id="roce_assignments_list",
        summary="List a site's RoCE assignments",
        description=(
            "The RoCE interface addresses planned for the site's hosts (hostname, interface, "
            "address)."
        ),
    ),
    create=extend_schema(
        operation_id="roce_assignments_upsert",
        summary="Upsert RoCE assignments",
        description=(
            "Create or change assignments in bulk, keyed by (hostname, interface): all or "
            "nothing, every bad row named with its index."
        ),
        request=RoceBulkSerializer,
        responses={200: RoceSummarySerializer},
    ),
    destroy=extend_schema(
        operation_id="roce_assignments_delete",
        summary="Delete a RoCE assignment",
        description=(
            "Remove one RoCE assignment of the site (its address may then be given to another)."
        ),
    ),
)
@extend_schema(tags=["roce"], parameters=[path_id("site_pk", "The site.")])
class RoceAssignmentViewSet(
    SiteScopedMixin, mixins.ListModelMixin, viewsets.GenericViewSet[RoceAssignment]
):
    """List, bulk upsert (POST ``{"items": [...]}``), delete one."""

    serializer_class = RoceAssignmentSerializer
    filterset_class = RoceFilter

    def get_queryset(self) -> QuerySet[RoceAssignment]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request
            return RoceAssignment.objects.none()
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


@extend_schema_view(
    list=extend_schema(
        operation_id="tokens_list",
        summary="List API tokens",
        description=(
            "Your tokens (administrators: everyone's, or one user's with `?user=`): name, "
            "scope, expiry, who made and revoked them. A token's value is never shown again."
        ),
        parameters=[
            OpenApiParameter(
                "user", str, description="Only this user's tokens (a user name).", required=False
            )
        ],
    ),
    create=extend_schema(
        operation_id="tokens_create",
        summary="Create an API token",
        description=(
            "A token with a scope (`read`, `operate`, `admin`) and an expiry, for the calling "
            "user or, with `user`, for a colleague (admin role; the scope within their role). "
            "The token is in this answer only: store it now."
        ),
        request=TokenCreateSerializer,
        responses={201: TokenCreatedSerializer},
    ),
)
@extend_schema(tags=["tokens"])
class TokenViewSet(mixins.ListModelMixin, viewsets.GenericViewSet[ApiToken]):
    """``/tokens``: list (never the token itself), create (shown once), revoke: thin views over
    maas_domain/services/tokens.py (scopes, expiry limits, who may manage whose tokens)."""

    serializer_class = TokenSerializer

    def get_queryset(self) -> QuerySet[ApiToken]:
        name = self.request.query_params.get("user")
        user = token_services.token_user(name) if name is not None else None
        return token_services.api_token_list(actor=self.request.user, user=user)

    def create(self, request: Request) -> Response:
        body = TokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        days = body.validated_data.get("expires_in_days")
        named = body.validated_data.get("user")
        token, raw = token_services.api_token_create(
            actor=request.user,
            user=token_services.token_user(named) if named is not None else request.user,
            name=body.validated_data["name"],
            scope=body.validated_data["scope"],
            expires_in=timedelta(days=days) if days else None,
            parent=request.auth if isinstance(request.auth, ApiToken) else None,
        )
        data = dict(TokenSerializer(token).data)
        if not dryrun.active():  # a rehearsed token is never made: no value to show
            data["token"] = raw
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="tokens_revoke",
        summary="Revoke an API token",
        description=("Stop a token from working at once; the reason is audited."),
        request=ReleaseSerializer,
        responses={200: TokenSerializer},
    )
    def revoke(self, request: Request, pk: str) -> Response:
        body = ReleaseSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token = token_services.api_token_revoke(
            actor=request.user, token_id=int(pk), reason=body.validated_data["reason"]
        )
        return Response(TokenSerializer(token).data)


class IndexView(APIView):
    """``GET /api/v1/admin/``: where each resource lives, and the API's own documents."""

    RESOURCES = {
        "maas_sites": "maas-sites",
        "skus": "skus",
        "nodes": "nodes",
        "allocations": "allocations",
        "onboardings": "onboardings",
        "onboarding_batches": "onboardings/batches",
        "decommissions": "decommissions",
        "reconciliation_status": "reconciliation/status",
        "reconciliation_drift": "reconciliation/drift",
        "tokens": "tokens",
        "metrics": "metrics",
    }

    @extend_schema(
        operation_id="index",
        summary="List the API's resources",
        description=(
            "Where each resource of the admin API lives, and the links to this API's OpenAPI "
            "document, Swagger UI and Redoc."
        ),
        tags=["index"],
        responses={200: IndexSerializer},
    )
    def get(self, request: Request) -> Response:
        base = request.build_absolute_uri("/api/v1/")
        return Response(
            {
                "resources": {k: f"{base}admin/{v}" for k, v in self.RESOURCES.items()},
                "schema": f"{base}schema/",
                "docs": f"{base}docs/",
                "redoc": f"{base}redoc/",
            }
        )
