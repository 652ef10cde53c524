"""The OpenAPI document (drf-spectacular): what every operation shares.

- Every operation has a summary and a description written for the API's users, given with
  ``extend_schema(summary=..., description=...)`` beside the view; view docstrings are notes for
  developers and never reach the document (``get_description``).
- Every operation documents the one error body (``Error``, maas_domain/api/exceptions.py) for the
  statuses it can answer with: 400, 401, 403, 404, 414, 429 and 503 (the database down)
  everywhere; 409, 413, 415 and 422 on writes. 429 and 503 declare their ``Retry-After`` header.
- Row ids in paths are integers (the routes take 1-18 digits: maas_domain/api/urls.py).
- Request bodies declare ``additionalProperties: false``: an unknown field is a 400 naming it,
  never ignored (docs/architecture.md, "Rules that keep it readable").
- The bearer token (``Authorization: Bearer mcp_…``) is the ``bearerAuth`` scheme.
- Only the API is described: the admin pages and the node agent's shell script are not.

docs/api.md ("OpenAPI") says where the document, Swagger UI and Redoc are served, and how the
committed docs/openapi.yaml and the fuzzing gate keep it true.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema as BaseAutoSchema
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

READ_ERRORS = ("400", "401", "403", "404", "414", "429", "503")
WRITE_ERRORS = (*READ_ERRORS, "409", "413", "415", "422")
DESCRIPTIONS = {
    "400": "Invalid input: `fields` names each bad field (an unknown one says `Unknown field.`), "
    "`rows` each bad row; or a query parameter the operation does not take.",
    "401": "No or bad credentials.",
    "403": "Authenticated but not an administrator.",
    "404": "No such resource.",
    "409": "Conflicts with the current state, which the body describes: `revision_mismatch` (a "
    "stale If-Match; `current_revision`), `conflict` (the state does not allow it, e.g. "
    "`current_state` and `allowed_verbs`, or another open workflow holds the host: "
    "`open_workflows`).",
    "413": 'The body is larger than this route takes (`limit`, docs/api.md "Limits").',
    "414": 'The path and query string are longer than 4096 bytes (docs/api.md, "Limits").',
    "415": "The body is not JSON.",
    "422": "The Idempotency-Key was used with another body.",
    "429": 'Too many requests for this token, user or address (docs/api.md, "Limits"): wait '
    "Retry-After seconds and send it again.",
    "503": "A dependency is unavailable (`dependency`: the database, the cache, the secrets "
    "backend, MAAS, a region's worker); the request did not complete. Try again after "
    "Retry-After seconds.",
}


class RowErrorSerializer(serializers.Serializer[Any]):
    index = serializers.IntegerField(help_text="0-based index of the row in the request.")
    field = serializers.CharField(allow_null=True)
    reason = serializers.CharField()


class ErrorSerializer(serializers.Serializer[Any]):
    """The one error body of the API. Conflicts add what a client needs to decide (for example
    ``open_workflows``, ``current_state``, ``allowed_verbs``, ``current_revision``)."""

    error = serializers.CharField(help_text="Stable machine-readable code.")
    detail = serializers.CharField(help_text="A sentence for a human.")
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text='Field path → reasons (at most 50; docs/api.md, "Limits").',
    )
    fields_omitted = serializers.IntegerField(
        required=False, help_text="How many more fields had errors than are listed."
    )
    rows = RowErrorSerializer(many=True, required=False, help_text="At most 1000.")
    rows_omitted = serializers.IntegerField(
        required=False, help_text="How many more row errors there were than are listed."
    )
    limit = serializers.IntegerField(
        required=False, help_text="413: the most bytes a body to this route may have."
    )


def error_component_hook(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing: an error body may carry more keys than ``error`` and ``detail``."""
    schema = result.get("components", {}).get("schemas", {}).get("Error")
    if schema is not None:
        schema["additionalProperties"] = True
    return result


RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 1},
        "description": "Seconds to wait before trying again.",
    }
}
# A row id in a path: maas_domain/api/urls.py ``id_group`` takes 1-18 digits.
PATH_ID = {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}
ID_GROUP = "[0-9]{1,18})"


# The node-facing operations' summaries (and node_health's description): their views
# (onboarding/api/node.py) are being reworked, so these wait here until they move into that
# file's extend_schema calls like every other operation's.
NODE_OPERATIONS: dict[str, tuple[str | None, str]] = {
    "node_health": (
        "Node-facing health check",
        "Answers 200 while the node listener serves: the first-boot scripts call it before "
        "enrolling. No token; nothing but the check's status.",
    ),
    "node_enroll": ("Enroll a node agent", ""),
    "node_report": (
        "Report a first-boot step",
        "Called by the first-boot scripts on the node, with the attempt's bootstrap token: the "
        "site bundle's outcome or the node agent's start. A failure reported here fails the "
        "onboarding with that part as its class.",
    ),
    "node_checkin": (
        "Check in a node agent",
        "Called by a running node agent with its bootstrap token: nothing to do, or, for a "
        "node of an earlier attempt that was not redeployed, the current attempt's tokens.",
    ),
}


DRY_RUN = OpenApiParameter(
    "dry_run",
    bool,
    description="Answer what the request would do (200) and change nothing: no row written, "
    'nothing sent to MAAS (docs/api.md, "Dry runs"). `?dry_run` alone counts as true.',
)
MUTATING = ("POST", "PUT", "PATCH", "DELETE")


class AutoSchema(BaseAutoSchema):
    def dry_runnable(self) -> bool:
        """Every state-changing admin operation takes ``dry_run`` (maas_domain/api/query.py
        enforces the parameters declared here; node-facing routes take none)."""
        return self.method in MUTATING and self.path.startswith("/api/v1/admin/")

    def plans_itself(self) -> bool:
        return getattr(self.view, "action", None) in getattr(self.view, "dry_run_plans", ())

    def get_description(self) -> str:  # type: ignore[override]  # as drf-spectacular
        """Only what ``extend_schema(description=...)`` gives: a docstring is for developers."""
        return NODE_OPERATIONS.get(self.get_operation_id(), ("", ""))[1]

    def get_summary(self) -> str | None:
        return NODE_OPERATIONS.get(self.get_operation_id(), (None, ""))[0]

    def _resolve_path_parameters(self, variables: Any) -> list[dict[str, Any]]:
        """A path variable matched by an id group (``{id}`` is the route's ``pk``) is an
        integer, whatever drf-spectacular guesses from the view."""
        params: list[dict[str, Any]] = super()._resolve_path_parameters(variables)  # type: ignore[no-untyped-call]
        for param in params:
            group = "pk" if param["name"] == "id" else param["name"]
            if f"(?P<{group}>{ID_GROUP}" in self.path_regex:
                param["schema"] = dict(PATH_ID)
        return params

    def _map_serializer(
        self, serializer: Any, direction: Any, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        """Request bodies refuse unknown fields (a 400 naming each): say so. A component is
        described by its own serializer's docstring only, never one inherited from a mixin
        (StrictMixin's is about our code, not the body)."""
        schema: dict[str, Any] = super()._map_serializer(  # type: ignore[no-untyped-call]
            serializer, direction, bypass_extensions
        )
        cls = serializer if isinstance(serializer, type) else type(serializer)
        if not cls.__dict__.get("__doc__"):
            schema.pop("description", None)
        if direction == "request" and schema.get("type") == "object":
            schema["additionalProperties"] = False
        return schema

    def get_override_parameters(self) -> list[Any]:
        params = list(super().get_override_parameters())
        if self.dry_runnable():
            params.append(DRY_RUN)
        return params

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if self.dry_runnable() and not self.plans_itself():
            self._add_dry_run_plan(responses, direction)
        authenticated = bool(getattr(self.view, "authentication_classes", None))
        codes = WRITE_ERRORS if self.method in ("POST", "PUT", "PATCH", "DELETE") else READ_ERRORS
        for code in codes:
            if code == "401" and not authenticated:  # a refusal (403) can still happen
                continue
            if code not in responses:
                response = self._get_response_for_code(  # type: ignore[no-untyped-call]
                    ErrorSerializer, code, direction=direction
                )
                response["description"] = DESCRIPTIONS[code]
                if code in ("429", "503"):
                    response["headers"] = RETRY_AFTER
                responses[code] = response
        return responses

    def _add_dry_run_plan(self, responses: dict[str, Any], direction: Any) -> None:
        """200 with ``dry_run=true``: the plan; where the real answer is a 200 too, either."""
        from maas_domain.api.dryrun import DryRunPlanSerializer

        plan = self._get_response_for_code(  # type: ignore[no-untyped-call]
            DryRunPlanSerializer, "200", direction=direction
        )
        existing = responses.get("200")
        if existing is None:
            plan["description"] = "dry_run=true: what the request would do; nothing changed."
            responses["200"] = plan
            return
        content = existing["content"]["application/json"]
        content["schema"] = {
            "oneOf": [content["schema"], plan["content"]["application/json"]["schema"]]
        }
        existing["description"] += " With dry_run=true: the plan (DryRunPlan); nothing changed."


class BearerTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "maas_domain.auth.ApiTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token (`maasctl tokens create`, `manage.py api_token create` "
            "or `POST /tokens`), shown once when it is made.",
        }


def path_id(name: str, what: str) -> OpenApiParameter:
    """A row id in a path, bounded as the URL's pattern bounds it (at most 18 digits)."""
    schema = {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}
    return OpenApiParameter(name, schema, OpenApiParameter.PATH, description=what)


IF_MATCH = OpenApiParameter(
    "If-Match",
    str,
    OpenApiParameter.HEADER,
    description='Make the change conditional on the revision, e.g. `"3"` (409 when stale).',
)
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="The same key and body replay the first answer; another body is a 422.",
)
