"""The HTTP client: one session, the API's error body turned into an exception with an exit
code (docs/cli.md, "Exit codes")."""

from __future__ import annotations

from typing import Any

import requests

from maasctl.config import Settings

USAGE, CONFLICT, NOT_FOUND, SERVER = 2, 3, 4, 5


class ApiError(Exception):
    """An answer other than 2xx, or no answer at all. ``exit_code`` follows docs/cli.md."""

    def __init__(self, status: int | None, body: dict[str, Any], message: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.message = message

    @property
    def exit_code(self) -> int:
        if self.status is None or self.status >= 500:
            return SERVER
        if self.status == 404:
            return NOT_FOUND
        if self.status == 409:
            return CONFLICT
        return USAGE


class Api:
    def __init__(self, settings: Settings) -> None:
        self.base = settings.url + "/api/v1/admin"
        self.timeout = settings.timeout
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {settings.token}"
        self.session.headers["User-Agent"] = "maasctl"

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        url = self.base + path
        try:
            response = self.session.request(
                method,
                url,
                json=body,
                params={k: v for k, v in (params or {}).items() if v not in (None, "")},
                headers=headers,
                timeout=self.timeout,
            )
        except requests.RequestException as exc:
            raise ApiError(None, {}, f"cannot reach {self.base}: {type(exc).__name__}") from None
        if response.status_code == 204:
            return None
        try:
            data = response.json()
        except ValueError:
            data = {"error": "not_json", "detail": response.text[:200].strip()}
        if response.status_code >= 300:
            detail = data.get("detail") if isinstance(data, dict) else None
            raise ApiError(
                response.status_code,
                data if isinstance(data, dict) else {},
                f"{response.status_code} {detail or response.reason}",
            )
        return data

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params=params)

    def pages(self, path: str, *, limit: int, **params: Any) -> list[dict[str, Any]]:
        """Up to ``limit`` items of a list, following ``next`` pages."""
        items: list[dict[str, Any]] = []
        offset = 0
        while len(items) < limit:
            page = self.get(path, limit=min(500, limit - len(items)), offset=offset, **params)
            items += page["results"]
            if not page.get("next") or not page["results"]:
                break
            offset += len(page["results"])
        return items
