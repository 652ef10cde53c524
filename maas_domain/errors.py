"""Domain errors. Services raise these; the API layer maps each to one HTTP status.

A service never returns an HTTP status itself: the same service is called from the API, the
admin pages and the CLI, each of which reports the error its own way.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base class: ``code`` is a stable machine-readable name, ``extra`` goes into the body."""

    status = 400
    code = "error"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra


class InvalidInput(DomainError):
    """Bad input. ``fields`` maps a field name to a list of reasons; ``rows`` lists row errors."""

    status = 400
    code = "validation_error"


class NotFound(DomainError):
    status = 404
    code = "not_found"


class Conflict(DomainError):
    """The request is valid but clashes with the current state (409)."""

    status = 409
    code = "conflict"


class PreconditionFailed(Conflict):
    """The client's ``If-Match`` revision is stale: someone else changed the row first."""

    code = "revision_mismatch"


class ServiceUnavailable(DomainError):
    """A dependency we need right now (the database, the cache, the secrets backend, MAAS, a
    region's worker) is down; try again later: the answer's ``Retry-After`` says when."""

    status = 503
    code = "unavailable"
    retry_after = 10  # seconds


def secrets_unavailable(exc: Exception, consequence: str) -> ServiceUnavailable:
    """The 503 for a secrets backend that failed (sealed, down, refused our identity): names the
    dependency so a client or an operator knows where to look. ``exc`` never carries a value."""
    return ServiceUnavailable(
        f"The secrets backend is unavailable ({exc}); {consequence}. "
        "Try again once /health/ready passes.",
        dependency="secrets",
    )


class CacheUnavailable(ServiceUnavailable):
    """The cache down or hung (Redis in production: the rate-limit counters every mutation, node
    POST and admin login is counted against): the request did nothing."""

    def __init__(self, exc: Exception) -> None:
        super().__init__(
            f"The cache (Redis: the rate-limit counters) is unavailable ({type(exc).__name__}); "
            "the request was not completed. Try again shortly: /health/ready says when it is "
            "back.",
            dependency="cache",
        )


class CredentialsUnconfirmed(Conflict):
    """The site's MAAS URL or TLS setting changed since its API key was written: nothing is sent
    there until an operator confirms the new address (docs/security.md). Not an outage: the
    secrets backend is fine, the request needs an operator's decision first."""

    code = "credentials_unconfirmed"


class GuardrailFailed(Conflict):
    """A guardrail refuses the request (docs/api.md, "Guardrails"): fix the site or profile
    first."""

    code = "guardrail_failed"


class MaasInUse(Conflict):
    """Another site already uses this MAAS region (docs/api.md, "One MAAS, one site"): two
    sites on one MAAS could each onboard the same machine, and each reports the other's
    machines as drift. Refused unless the request names every such site to share with."""

    code = "maas_in_use"


class Forbidden(DomainError):
    status = 403
    code = "forbidden"


class IdempotencyKeyReused(DomainError):
    """The same Idempotency-Key was sent with a different request body."""

    status = 422
    code = "idempotency_key_reused"
