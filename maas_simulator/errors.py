"""The refusals MAAS answers with: a status, a body and its content type (docs/maas-api.md §11).

The model raises them where MAAS's models and forms refuse (a state violation is a 409 text, a
form error a 400 JSON body); the HTTP layer turns them into answers.
"""

from __future__ import annotations

import re
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
        content_type: str | None = None,
    ) -> None:
        super().__init__(str(body))
        self.status = status
        self.body = body
        self.json_body = json_body
        self.headers = headers or {}
        self._content_type = content_type

    @property
    def content_type(self) -> str:
        """What MAAS labels it (recorded against MAAS 3.5.10): a form error is JSON, a piston
        ``Http404`` is bare ``text/plain``, an OAuth refusal piston's ``text/html``, any other
        refusal ``text/plain; charset=utf-8``."""
        if self._content_type is not None:
            return self._content_type
        if self.json_body:
            return "application/json; charset=utf-8"
        if self.status == 404 and NOT_FOUND.match(str(self.body)):
            return "text/plain"
        return "text/plain; charset=utf-8"


NOT_FOUND = re.compile(r"^No \w+ matches the given query\.$")


def conflict(message: str) -> ApiError:  # NodeStateViolation
    return ApiError(409, message)


def invalid(errors: dict[str, list[str]]) -> ApiError:  # form validation error
    return ApiError(400, errors, json_body=True)
