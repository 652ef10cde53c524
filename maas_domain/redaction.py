"""What a secret looks like, in one place: for audit rows (by key name) and for log lines (by
key name and by shape). No Django imports: the logging configuration loads this module before
the apps are ready.

The log filter is the second line of defence (docs/security.md): code never logs a secret on
purpose, and the libraries that log requests (``requests_oauthlib``, ``oauthlib``, ``urllib3``,
``hvac``) are pinned to WARNING by the settings whatever ``MAASCP_LOG_LEVEL`` says.
"""

from __future__ import annotations

import re

REDACTED = "[redacted]"
# A key whose value is secret (audit rows, log ``extra`` fields, key=value text).
_KEYS = r"password|passwd|secret|token|api[-_]?key|credential|signature"
SECRET_NAME = re.compile(rf"({_KEYS}|power_pass|authorization)", re.IGNORECASE)
_TEXT_KEYS = rf"{_KEYS}|_pass|\bsig"  # in free text: also x_pass, sig=
# a quoted value up to its closing quote, escaped quotes inside included
_QUOTED = r"""(["'])(?:\\.|(?!\2)[^\\])*\2"""
_SHAPES = [
    # Authorization: the whole quoted value (it has quotes inside), else the rest of the line
    (
        re.compile(r"""(?i)(authorization["']?\s*[:=]\s*)""" + _QUOTED),
        r"\1\2" + REDACTED + r"\2",
    ),
    (
        re.compile(r"""(?i)(authorization["']?\s*[:=]\s*+)(?!["'])(?!\[redacted\])[^\n]+"""),
        r"\1" + REDACTED,
    ),
    (re.compile(r"(?i)\b(bearer|token|basic|oauth)\s+[A-Za-z0-9._~+/=%-]{8,}"), r"\1 " + REDACTED),
    # "key": "value" (a quoted value, whole), then key=value / key: value up to a separator,
    # for secret-looking keys (query strings, bodies, dict reprs)
    (
        re.compile(
            rf"""(?i)([\w.-]*(?:{_TEXT_KEYS})\b["']?\s*[:=]\s*)(?!["']\[redacted\])""" + _QUOTED
        ),
        r"\1\2" + REDACTED + r"\2",
    ),
    (
        re.compile(
            rf"""(?i)([\w.-]*(?:{_TEXT_KEYS})\b["']?\s*[:=]\s*+)(?!["'])(?!\[redacted\])"""
            r"""[^"'&,;\s}\]]+"""
        ),
        r"\1" + REDACTED,
    ),
    # a MAAS API key (consumer_key:token_key:token_secret)
    (re.compile(r"\b[A-Za-z0-9]{10,}:[A-Za-z0-9]{10,}:[A-Za-z0-9]{20,}\b"), REDACTED),
    # our API tokens, Vault tokens
    (re.compile(r"\bmcp_[A-Za-z0-9_-]{16,}"), REDACTED),
    (re.compile(r"\bhv[sbr]\.[A-Za-z0-9_-]{16,}"), REDACTED),
    # a PEM private key block
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
        REDACTED,
    ),
]


def redact_text(text: str) -> str:
    """Blank every known secret shape in ``text``."""
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text


def is_secret_name(name: object) -> bool:
    return bool(SECRET_NAME.search(str(name)))
