"""Typed reading of ``MAASCP_*`` environment variables.

Every setting the project reads from the environment goes through :class:`Env`, so that
(1) there is one prefix, (2) a malformed value is reported with the variable's name and what
was expected, and (3) all problems are reported together at start-up instead of one per restart.
``Env.known`` records every variable name read, which is how the docker-compose test checks that
the compose file only sets variables the settings understand.

Every variable may instead be given as ``MAASCP_<NAME>_FILE``, the path of a file holding the
value (compose's secrets under /run/secrets/, docs/operations.md): a secret then never sits in
the environment, where ``docker inspect`` and every child process see it. Setting both is an
error; an unreadable file is one too.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

PREFIX = "MAASCP_"


@dataclass
class Env:
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    errors: list[str] = field(default_factory=list)
    known: set[str] = field(default_factory=set)

    def _raw(self, name: str) -> str | None:
        key = PREFIX + name
        self.known |= {key, f"{key}_FILE"}
        value = self.environ.get(key)
        if path := (self.environ.get(f"{key}_FILE") or "").strip():
            if value is not None and value.strip():
                self.errors.append(f"{key} and {key}_FILE are both set: keep one")
            try:
                value = Path(path).read_text()
            except OSError as exc:
                self.errors.append(f"{key}_FILE={path!r} cannot be read: {exc.strerror}")
                return None
        if value is None or value.strip() == "":
            return None
        return value.strip()

    def string(
        self, name: str, default: str | None = None, *, required: bool = False
    ) -> str | None:
        value = self._raw(name)
        if value is None:
            if required:
                self.errors.append(f"{PREFIX}{name} is required in production mode")
            return default
        return value

    def flag(self, name: str, default: bool) -> bool:
        value = self._raw(name)
        if value is None:
            return default
        lowered = value.lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        self.errors.append(f"{PREFIX}{name}={value!r} is not a boolean (use true or false)")
        return default

    def integer(self, name: str, default: int, *, minimum: int | None = None) -> int:
        value = self._raw(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            self.errors.append(f"{PREFIX}{name}={value!r} is not an integer")
            return default
        if minimum is not None and number < minimum:
            self.errors.append(f"{PREFIX}{name}={number} must be at least {minimum}")
            return default
        return number

    def items(self, name: str, default: list[str]) -> list[str]:
        value = self._raw(name)
        if value is None:
            return list(default)
        return [item.strip() for item in value.split(",") if item.strip()]

    def url(
        self,
        name: str,
        default: str | None,
        *,
        schemes: tuple[str, ...],
        required: bool = False,
    ) -> str | None:
        value = self.string(name, None, required=required)
        if value is None:
            return default
        scheme = urlsplit(value).scheme
        if scheme not in schemes:
            self.errors.append(
                f"{PREFIX}{name} must be a URL with scheme {' or '.join(schemes)} (got {scheme!r})"
            )
            return default
        return value

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value = self._raw(name)
        if value is None:
            return default
        if value not in choices:
            self.errors.append(f"{PREFIX}{name}={value!r} must be one of {', '.join(choices)}")
            return default
        return value

    def check(self) -> None:
        """Raise one error naming every bad or missing variable."""
        if self.errors:
            lines = "\n  - ".join(self.errors)
            raise ImproperlyConfigured(f"Invalid environment configuration:\n  - {lines}")


def database_from_url(url: str) -> dict[str, object]:
    """``postgresql://user:pass@host:port/name`` or ``sqlite:///path`` → a DATABASES entry."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        path = parts.path
        if url.startswith("sqlite:////"):
            path = "/" + path.lstrip("/")
        elif path.startswith("/"):
            path = path[1:]
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path,
            # Several processes (API, worker, beat) share the file in the embedded mode: WAL lets
            # readers proceed during a write, IMMEDIATE takes the write lock at BEGIN so two
            # writers queue on ``timeout`` instead of failing with "database is locked".
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    from urllib.parse import parse_qsl, unquote

    options = dict(parse_qsl(parts.query))
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": options,
    }


def generated_once(path: Path, make: Callable[[], str]) -> str:
    """The value kept in ``path``, made by ``make`` if the file does not exist yet (embedded
    mode's generated keys). Processes starting at once from a fresh data folder agree on one
    value: each writes its candidate to a private file and hard-links it into place, which
    fails if another got there first, so the file only ever appears whole and is never
    replaced (two processes with different keys would not read each other's secrets)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        candidate = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
        candidate.write_text(make())
        candidate.chmod(0o600)
        try:
            os.link(candidate, path)
        except FileExistsError:
            pass  # another process's value stands
        finally:
            candidate.unlink()
    return path.read_text().strip()
