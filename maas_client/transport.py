"""One HTTP request to MAAS straight through the session's urllib3 pool.

``requests.Session.request`` spends more CPU on each request than the request itself costs a
local MAAS (merging settings, preparing, hooks, building the response: docs/benchmarks.md,
"2026-11-27 — the worker's CPU per node"). A keyed client sends every request to one host with
fixed headers, auth, TLS setting and no proxy, so ``send`` does what ``HTTPAdapter.send`` does
with what requests would have prepared: the same URL (``requote_uri`` of the root, the path
and the urlencoded query), the session's headers then the request's, ``Content-Length``,
the PLAINTEXT ``Authorization``; the same pool (``get_connection_with_tls_context``: the
session's CA bundle and TLS verification), ``urlopen`` arguments, timeouts and no retries.
Its errors are requests' (``RequestError`` maps urllib3's as ``HTTPAdapter.send`` and
``Response.iter_content`` do), so the client classifies them as before. No cookie is kept or
sent (MAAS authenticates every API request by its OAuth header). A client with a proxy or
without a key uses ``Session.request``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode, urlsplit

import requests
from requests import exceptions as rex
from requests.utils import requote_uri
from urllib3 import BaseHTTPResponse, Timeout
from urllib3 import exceptions as u3

from maas_client.wire import PlaintextAuth


def as_requests_error(exc: Exception, *, reading: bool = False) -> Exception:
    """The exception requests raises for urllib3's ``exc`` (``HTTPAdapter.send``, or
    ``Response.iter_content`` while ``reading`` the body); ``exc`` itself where requests lets
    it through."""
    if reading:
        if isinstance(exc, u3.ProtocolError):
            return rex.ChunkedEncodingError(exc)
        if isinstance(exc, u3.DecodeError):
            return rex.ContentDecodingError(exc)
        if isinstance(exc, u3.ReadTimeoutError):
            return rex.ConnectionError(exc)
        if isinstance(exc, u3.SSLError):
            return rex.SSLError(exc)
        return exc
    if isinstance(exc, u3.ProtocolError | OSError):
        return rex.ConnectionError(exc)
    if isinstance(exc, u3.MaxRetryError):
        reason = exc.reason
        if isinstance(reason, u3.ConnectTimeoutError) and not isinstance(
            reason, u3.NewConnectionError
        ):
            return rex.ConnectTimeout(exc)
        if isinstance(reason, u3.ResponseError):
            return rex.RetryError(exc)
        if isinstance(reason, u3.ProxyError):
            return rex.ProxyError(exc)
        if isinstance(reason, u3.SSLError):
            return rex.SSLError(exc)
        return rex.ConnectionError(exc)
    if isinstance(exc, u3.ClosedPoolError):
        return rex.ConnectionError(exc)
    if isinstance(exc, u3.ProxyError):
        return rex.ProxyError(exc)
    if isinstance(exc, u3.SSLError):
        return rex.SSLError(exc)
    if isinstance(exc, u3.ReadTimeoutError):
        return rex.ReadTimeout(exc)
    if isinstance(exc, u3.InvalidHeader):
        return rex.InvalidHeader(exc)
    return exc


class Answer:
    """What the client reads of a ``requests.Response``: the status, the headers (urllib3's
    case-insensitive dict), the body in chunks, ``close`` (the connection goes back to the
    pool when the body was read to its end, else it is closed)."""

    def __init__(self, raw: BaseHTTPResponse) -> None:
        self.raw = raw
        self.status_code = raw.status
        self.headers = raw.headers
        self._consumed = False

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        try:
            yield from self.raw.stream(chunk_size, decode_content=True)
        except (u3.HTTPError, OSError) as exc:
            raise as_requests_error(exc, reading=True) from exc
        self._consumed = True

    def close(self) -> None:
        if not self._consumed:
            self.raw.close()
        self.raw.release_conn()


class Direct:
    """``Session.request(method, root + path, params=..., data=..., headers=...,
    timeout=..., stream=True, allow_redirects=False)`` for a keyed client's session."""

    def __init__(self, session: requests.Session, root: str, auth: PlaintextAuth) -> None:
        self.session, self.auth = session, auth
        parts = urlsplit(root)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.root = root
        self.headers = dict(session.headers)  # the session's, in its order
        self.pool_key = requests.PreparedRequest()
        self.pool_key.url = root

    def send(
        self,
        method: str,
        path: str,
        *,
        params: Sequence[tuple[str, str]],
        body: bytes | None,
        headers: Mapping[str, str],
        timeout: tuple[float, float],
    ) -> Answer:
        url = self.root + path
        if params:
            url += "?" + urlencode(list(params), doseq=True)
        url = requote_uri(url)
        merged = {**self.headers, **headers}
        if body is not None:
            merged["Content-Length"] = str(len(body))
        elif method not in ("GET", "HEAD"):
            merged["Content-Length"] = "0"
        merged["Authorization"] = self.auth.header()
        adapter: Any = self.session.get_adapter(url)
        try:
            pool = adapter.get_connection_with_tls_context(self.pool_key, self.session.verify)
            raw = pool.urlopen(
                method=method,
                url=url[len(self.origin) :],
                body=body,
                headers=merged,
                redirect=False,
                assert_same_host=False,
                preload_content=False,
                decode_content=False,
                retries=adapter.max_retries,
                timeout=Timeout(connect=timeout[0], read=timeout[1]),
                chunked=False,
            )
        except (u3.HTTPError, OSError) as exc:
            raise as_requests_error(exc) from exc
        return Answer(raw)
