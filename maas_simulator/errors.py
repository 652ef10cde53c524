"""The refusals MAAS answers with: a status, a body and its content type (docs/maas-api.md §11).

The model raises them where MAAS's models and forms refuse (a state violation is a 409 text, a
form error a 400 JSON body); the HTTP layer turns them into answers.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An answer MAAS gives for a refused request: status, body and its content type."""

    def __init__(
        self,
        status: int,
        body: Any,
        *,
        json_body: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(str(body))
        self.status = status
        self.body = body
        self.json_body = json_body
        self.headers = headers or {}


def conflict(message: str) -> ApiError:  # NodeStateViolation
    return ApiError(409, message)


def invalid(errors: dict[str, list[str]]) -> ApiError:  # form validation error
    return ApiError(400, errors, json_body=True)
