"""The wire format of MAAS's API as real clients send it (docs/maas-api.md §1, §2): API keys,
the API root, multipart bodies with base64 parts, reading JSON answers, MAAS's clock."""

from __future__ import annotations

import base64
import gc
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import requests


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


def is_json(response: requests.Response) -> bool:
    return response.headers.get("Content-Type", "").split(";")[0].endswith("json")


def server_time(response: requests.Response) -> datetime | None:
    """MAAS's clock, from the answer's ``Date`` header (a deployed machine's ``last_sync`` is in
    the region's time, which need not be ours); None without a readable one."""
    try:
        when = parsedate_to_datetime(response.headers.get("Date", ""))
    except (TypeError, ValueError, IndexError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)
