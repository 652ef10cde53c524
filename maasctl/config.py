"""Where maasctl finds the API and its token: a config file, the environment, ``--profile``.

``~/.config/maasctl/config.toml`` (or ``$MAASCTL_CONFIG``) holds named profiles::

    [default]
    url = "http://127.0.0.1:8000"
    token_file = "~/.config/maasctl/token"

    [lab]
    url = "https://cp.lab.example:8443"

The profile is ``--profile``, else ``$MAASCTL_PROFILE``, else ``default``. ``$MAASCTL_URL``
overrides the profile's URL. The token comes from ``$MAASCTL_TOKEN``, else the file named by
``$MAASCTL_TOKEN_FILE`` or the profile's ``token_file``, else a hidden prompt; it is never a
command-line argument (arguments show in ``ps`` and shell history).
"""

from __future__ import annotations

import os
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"


class ConfigError(Exception):
    """A problem with the configuration (exit code 2)."""


@dataclass(frozen=True)
class Settings:
    url: str
    token: str
    profile: str
    timeout: float


def config_path() -> Path:
    explicit = os.environ.get("MAASCTL_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "maasctl" / "config.toml"


def _profiles(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    return data


def _read_token_file(name: str) -> str:
    path = Path(name).expanduser()
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc.strerror}") from None
    if not token:
        raise ConfigError(f"the token file {path} is empty")
    return token


def load(profile: str | None, *, prompt: bool = True) -> Settings:
    name = profile or os.environ.get("MAASCTL_PROFILE") or "default"
    path = config_path()
    profiles = _profiles(path)
    if name not in profiles and (profile or os.environ.get("MAASCTL_PROFILE")):
        raise ConfigError(f"no profile {name!r} in {path}")
    section = profiles.get(name, {})
    if not isinstance(section, dict):
        raise ConfigError(f"profile {name!r} in {path} is not a table")
    url = os.environ.get("MAASCTL_URL") or str(section.get("url") or DEFAULT_URL)
    token = os.environ.get("MAASCTL_TOKEN", "").strip()
    token_file = os.environ.get("MAASCTL_TOKEN_FILE") or section.get("token_file")
    if not token and token_file:
        token = _read_token_file(str(token_file))
    if not token and prompt:
        if not sys.stdin.isatty():
            raise ConfigError(
                "no API token: set MAASCTL_TOKEN or MAASCTL_TOKEN_FILE, or token_file in "
                f"{path} (a prompt needs a terminal)"
            )
        import getpass

        token = getpass.getpass("API token: ").strip()
    if not token:
        raise ConfigError("no API token given")
    timeout = float(section.get("timeout", 60))
    return Settings(url=url.rstrip("/"), token=token, profile=name, timeout=timeout)
