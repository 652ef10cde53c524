"""``Idempotency-Key`` support for start requests and recovery verbs.

The first request with a key runs and its answer (success or domain error) is stored for that
caller and endpoint; a repeat with the same body gets the stored answer without running again;
the same key with another body is a 422. A repeat that arrives while the first is still running
gets 409. A replayed answer carries ``Idempotent-Replayed: true`` (docs/api.md), so a client
can say "already accepted" rather than "accepted".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from django.db import IntegrityError, transaction
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from maas_domain import dryrun
from maas_domain.errors import Conflict, DomainError, IdempotencyKeyReused, InvalidInput
from maas_domain.models import IdempotencyRecord

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"


def idempotent(request: Request, run: Callable[[], Response]) -> Response:
    key = request.headers.get(HEADER)
    if key is None or dryrun.active():  # a dry run is neither recorded nor replayed
        return run()
    if not key or len(key) > 200:
        raise InvalidInput("Invalid Idempotency-Key.", fields={HEADER: ["1 to 200 characters."]})
    scope = f"{request.user.pk}:{request.method}:{request.path}"
    digest = hashlib.sha256(
        json.dumps(
            [request.data, sorted(request.query_params.items())], sort_keys=True, cls=JSONEncoder
        ).encode()
    ).hexdigest()
    try:
        with transaction.atomic():
            record = IdempotencyRecord.objects.create(key=key, scope=scope, request_hash=digest)
    except IntegrityError:
        record = IdempotencyRecord.objects.get(key=key, scope=scope)
        if record.request_hash != digest:
            raise IdempotencyKeyReused(
                "This Idempotency-Key was used with a different request body."
            ) from None
        if record.status_code is None:
            raise Conflict(
                "A request with this Idempotency-Key is still being processed."
            ) from None
        return Response(record.body, status=record.status_code, headers={REPLAYED: "true"})
    try:
        response = run()
    except DomainError as exc:
        response = Response(
            {"error": exc.code, "detail": exc.message, **exc.extra}, status=exc.status
        )
    except Exception:
        IdempotencyRecord.objects.filter(pk=record.pk).delete()
        raise
    body = json.loads(json.dumps(response.data, cls=JSONEncoder))
    IdempotencyRecord.objects.filter(pk=record.pk).update(
        status_code=response.status_code, body=body
    )
    return response
