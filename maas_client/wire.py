"""The wire format of MAAS's API as real clients send it (docs/maas-api.md §1, §2): API keys,
the API root, multipart bodies with base64 parts, reading JSON answers, MAAS's clock."""

from __future__ import annotations

import base64
import gc
import os
import random
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Protocol
from urllib.parse import quote, urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.utils import get_environ_proxies


@dataclass(frozen=True)
class Credentials:
    consumer_key: str
    token_key: str
    token_secret: str

    @classmethod
    def parse(cls, api_key: str) -> Credentials:
        parts = api_key.strip().split(":")
        if len(parts) != 3 or not all(parts):
            raise ValueError("a MAAS API key is consumer_key:token_key:token_secret")
        return cls(*parts)

    def __repr__(self) -> str:
        return f"Credentials(consumer_key={self.consumer_key!r}, token_key=…, token_secret=…)"


def _escape(value: str) -> str:
    """oauthlib's ``escape``: percent-encode all but unreserved characters."""
    return quote(value, safe="~")


class PlaintextAuth(requests.auth.AuthBase):
    """OAuth1 PLAINTEXT with an empty consumer secret, as MAAS checks it: the header
    ``requests_oauthlib.OAuth1(..., signature_method=PLAINTEXT)`` writes for a request whose
    body is not a URL-encoded form (ours are multipart or none), byte for byte but for the
    nonce and timestamp, without oauthlib's per-request signing machinery. Never logs."""

    def __init__(self, creds: Credentials) -> None:
        signature = _escape("&" + _escape(creds.token_secret))
        self._fixed = (
            f'oauth_version="1.0", oauth_signature_method="PLAINTEXT", '
            f'oauth_consumer_key="{_escape(creds.consumer_key)}", '
            f'oauth_token="{_escape(creds.token_key)}", oauth_signature="{signature}"'
        )

    def header(self) -> str:
        """The ``Authorization`` header of one request (a nonce and timestamp of its own)."""
        stamp = str(int(time.time()))
        nonce = str(random.getrandbits(64)) + stamp
        return f'OAuth oauth_nonce="{nonce}", oauth_timestamp="{stamp}", {self._fixed}'

    def __call__(self, r: requests.PreparedRequest) -> requests.PreparedRequest:
        r.headers["Authorization"] = self.header()
        return r

    def __repr__(self) -> str:
        return "PlaintextAuth(…)"


class _SharedAdapter(HTTPAdapter):
    """The process's connection pools to MAAS, shared by every client it builds (a workflow
    step builds one per execution): a client's ``close`` leaves them open for the next."""

    def close(self) -> None:
        """Kept open: the next client of this process reuses its connections."""


_adapters: dict[int, HTTPAdapter] = {}
_adapters_lock = threading.Lock()


def shared_adapter() -> HTTPAdapter:
    """This process's pools (per process id: a forked child never uses its parent's
    sockets). urllib3 keys a pool by scheme, host, port and TLS settings, so clients of
    different sites, or of one site with another TLS setting, never share a connection."""
    pid = os.getpid()
    adapter = _adapters.get(pid)
    if adapter is None:
        with _adapters_lock:
            adapter = _adapters.get(pid)
            if adapter is None:
                _adapters.clear()
                adapter = _adapters[pid] = _SharedAdapter(pool_connections=16, pool_maxsize=16)
    return adapter


# what decides the proxy of an http(s) URL (urllib's names, in either case)
_PROXY_VARIABLES = tuple(
    name
    for base in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    for name in (base, base.upper())
)
_proxies: dict[tuple[str, tuple[str | None, ...]], dict[str, str]] = {}


def environ_proxies(url: str) -> dict[str, str]:
    """``requests.utils.get_environ_proxies(url)``, remembered while the variables it reads
    for an http(s) URL are unchanged (it costs more than the request to a local MAAS)."""
    parts = urlsplit(url)
    key = (f"{parts.scheme}://{parts.netloc}", tuple(os.environ.get(n) for n in _PROXY_VARIABLES))
    found = _proxies.get(key)
    if found is None:
        if len(_proxies) >= 256:
            _proxies.clear()
        found = _proxies[key] = dict(get_environ_proxies(url))
    return dict(found)


def api_root(url: str) -> str:
    """``http://h:5240/MAAS`` or ``…/MAAS/`` or ``…/MAAS/api/2.0/`` → ``…/MAAS/api/2.0/``."""
    url = url.rstrip("/") + "/"
    if not urlsplit(url).path.rstrip("/").endswith("/api/2.0"):
        url += "api/2.0/"
    return url


def encode_multipart(fields: Sequence[tuple[str, str]]) -> tuple[bytes, str]:
    """multipart/form-data with every part base64-encoded, as python-libmaas and Drydock do."""
    boundary = "maascp" + "".join(random.choices("0123456789abcdef", k=24))  # noqa: S311
    lines: list[bytes] = []
    for name, value in fields:
        lines += [
            f"--{boundary}".encode(),
            f'Content-Disposition: form-data; name="{name}"'.encode(),
            b'Content-Type: text/plain; charset="utf-8"',
            b"Content-Transfer-Encoding: base64",
            b"",
            base64.b64encode(value.encode()),
        ]
    lines += [f"--{boundary}--".encode(), b""]
    return b"\r\n".join(lines), f"multipart/form-data; boundary={boundary}"


@contextmanager
def gc_paused(pause: bool) -> Iterator[None]:
    """Pause the cyclic GC while decoding a large answer: a 10,000-machine listing allocates
    millions of containers, and the collections they trigger cost 3x the parse itself."""
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Headed(Protocol):
    """An answer's headers: a ``requests.Response`` or a ``transport.Answer``."""

    @property
    def headers(self) -> Mapping[str, str]: ...


def is_json(response: Headed) -> bool:
    return response.headers.get("Content-Type", "").split(";")[0].endswith("json")


def server_time(response: Headed) -> datetime | None:
    """MAAS's clock, from the answer's ``Date`` header (a deployed machine's ``last_sync`` is in
    the region's time, which need not be ours); None without a readable one."""
    try:
        when = parsedate_to_datetime(response.headers.get("Date", ""))
    except (TypeError, ValueError, IndexError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
