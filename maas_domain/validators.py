"""Input rules for identifiers that reach MAAS or the node: one definition each; and the one
rule for free text (``text_error``).

Every pattern matches the *whole* string (``fullmatch``): ``$`` alone would accept a trailing
newline (``"c07u40\n"``), a second visible name for the same host.
"""

from __future__ import annotations

import ipaddress
import re

HOSTNAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
INTERFACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,14}")
# Versions of what a node runs (the site bootstrap bundle, the node agent).
VERSION = re.compile(r"[A-Za-z0-9._+-]{1,64}")
SHA256_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# The largest whole number either database stores (signed 64 bits): a number past it in a
# body (maas_domain/api/body.py) or a query (an id filter) is a 400, never the database's
# overflow (a 500 on SQLite).
MAX_INT = 2**63 - 1
# Characters no free text may hold (SKU names, hardware strings, descriptions, reasons, any
# string of a request; docs/security.md, T18): C0 controls but tab, line feed and carriage
# return; DEL and the C1 controls (U+0080-U+009F: terminal escapes, NEL); the bidirectional
# formatting characters (ALM, LRM, RLM, the embeddings and overrides U+202A-U+202E, the isolates
# U+2066-U+2069), which make text display in another order than it is stored ("Trojan Source").
REFUSED_TEXT = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def text_error(value: object) -> str | None:
    """Why ``value`` (a string) is no acceptable text, else None."""
    if not isinstance(value, str) or not (found := REFUSED_TEXT.search(value)):
        return None
    kind = "a control" if found[0] <= "\x9f" else "a bidirectional formatting"
    return f"Holds {kind} character (U+{ord(found[0]):04X}); not accepted in text."


def hostname_error(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return "Must be a non-empty string."
    if not HOSTNAME.fullmatch(value):
        return (
            "Not a valid hostname: 1-63 lowercase letters, digits or hyphens, "
            "not starting or ending with a hyphen."
        )
    return None


def interface_error(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return "Must be a non-empty string."
    if not INTERFACE.fullmatch(value):
        return "Not a valid interface name: 1-15 characters of letters, digits, '_', '.', '-'."
    return None


def version_error(value: object) -> str | None:
    if not isinstance(value, str) or not VERSION.fullmatch(value):
        return "Must be 1-64 characters of letters, digits, '.', '_', '+', '-'."
    return None


def digest_error(value: object) -> str | None:
    if not isinstance(value, str) or not SHA256_DIGEST.fullmatch(value):
        return "Must look like sha256:<64 lowercase hex digits>."
    return None


def ipv4_cidr_error(value: object) -> str | None:
    """An IPv4 host address with its prefix, e.g. 172.30.9.61/31."""
    if not isinstance(value, str) or "/" not in value:
        return "Must be an IPv4 address with a prefix length, e.g. 172.30.9.61/31."
    try:
        iface = ipaddress.IPv4Interface(value)
    except ValueError:
        return "Not a valid IPv4 address/prefix."
    net = iface.network
    if net.prefixlen < 31 and iface.ip in (net.network_address, net.broadcast_address):
        return f"{iface.ip} is the network or broadcast address of {net}."
    if iface.ip.is_unspecified or iface.ip.is_loopback or iface.ip.is_multicast:
        return f"{iface.ip} cannot be assigned to an interface."
    return None


def ipv4_error(value: object) -> str | None:
    if not isinstance(value, str):
        return "Must be an IPv4 address."
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return "Not a valid IPv4 address."
    return None


def ipv4_subnet_error(value: object) -> str | None:
    if not isinstance(value, str):
        return "Must be an IPv4 network in CIDR form."
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        return f"Not a valid IPv4 network: {exc}."
    return None


# A region (docs/operations.md, "Regions"): a slug that names a Celery queue. The default region
# runs on the central queue; every other one on ``region-<name>``.
REGION = re.compile(r"[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?")


def region_error(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return "Must be a non-empty string."
    if not REGION.fullmatch(value):
        return (
            "Not a valid region name: 1-40 lowercase letters, digits or hyphens, "
            "not starting or ending with a hyphen."
        )
    return None
