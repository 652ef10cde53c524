"""Rules for URLs an operator gives us and something then fetches (docs/security.md).

URLs are *parsed* (``urllib.parse``), never pattern-matched. A URL that a node fetches on first
boot (the site bootstrap bundle, the node-agent bootstrap script) must be:

* ``https`` (``http`` only where the site explicitly allows it), with a host and no userinfo,
  no fragment, and at most 2048 characters;
* made of URL characters only: letters, digits, ``-._~``, ``%XX`` escapes, the delimiters
  ``:/?@`` and the query separators ``&=+,``. No whitespace, control or shell metacharacters
  (``;|$`'"\\(){}<>!*``) unless percent-encoded; a presigned URL needs nothing else;
* on a host from the allowlist: the site's own, else the deployment default
  (``MAASCP_PAYLOAD_ALLOWED_HOSTS``). An entry is a host name or address, or ``*.suffix``;
* not a link-local or cloud metadata address (``169.254.0.0/16``, ``fe80::/10``,
  ``fd00:ec2::254``, ``100.100.100.200``, ``metadata.google.internal``…) unless the deployment
  allows it (``MAASCP_ALLOW_LINK_LOCAL_TARGETS``), checked on the literal and, before we
  connect, on every address the name resolves to.

Every check returns a reason (a sentence for the operator) or ``None``.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, urlsplit

from django.conf import settings

MAX_URL = 2048
_URL_CHARS = re.compile(r"[A-Za-z0-9\-._~%:/?@&=+,\[\]]*")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
METADATA_HOSTS = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)
METADATA_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "169.254.0.0/16",  # IPv4 link-local: AWS, GCP, Azure, OpenStack metadata live here
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::254/128",  # AWS IPv6 metadata
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "192.0.0.192/32",  # Oracle Cloud metadata (IPv4 special-purpose block)
        "168.63.129.16/32",  # Azure WireServer (platform agent and DHCP/DNS host)
    )
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052: the IPv4 address in the low 32 bits
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d


class UrlRefused(ValueError):
    """A URL that must not be used; ``str()`` is the reason."""


@dataclass(frozen=True)
class UrlRules:
    """What a URL may look like where it is used."""

    schemes: tuple[str, ...] = ("https",)
    allowed_hosts: tuple[str, ...] | None = None  # None: any host (the allowlist does not apply)
    allow_link_local: bool = False
    extra_hosts: tuple[str, ...] = field(default=())  # always allowed (the control plane itself)


def link_local_allowed() -> bool:
    return bool(getattr(settings, "ALLOW_LINK_LOCAL_TARGETS", False))


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        return None


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, in any form a host or a translator would
    reach it by: IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64
    (64:ff9b::a.b.c.d), 6to4 (2002:aabb:ccdd::/48), Teredo (the client address, inverted)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in NAT64 or (ip in IPV4_COMPATIBLE and int(ip) > 1):  # not :: or ::1
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_problem(address: str) -> str | None:
    """Why an IP address is refused as a target (link-local or a metadata service, also when
    an IPv6 address carries one), or None."""
    ip = _ip(address)
    if ip is None:
        return None
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address) and (inner := embedded_ipv4(ip)) is not None:
        candidates.append(inner)
    for candidate in candidates:
        if any(candidate in net for net in METADATA_NETWORKS if net.version == candidate.version):
            return f"{address} is a link-local or cloud metadata address"
    return None


def host_problem(host: str, *, allow_link_local: bool) -> str | None:
    """Why a host name or literal is refused as a target, or None (no DNS lookup)."""
    if allow_link_local:
        return None
    if host.lower().rstrip(".") in METADATA_HOSTS:
        return f"{host} is a cloud metadata host"
    return address_problem(host)


def resolved_problem(host: str, port: int | None = None) -> str | None:
    """Resolve ``host`` and refuse it when any address is link-local/metadata (unless allowed).

    Called right before connecting; a name that does not resolve is left to the connection to
    report. (A DNS answer that changes between this check and the connect is not covered.)
    """
    if link_local_allowed():
        return None
    if problem := host_problem(host, allow_link_local=False):
        return problem
    if _ip(host) is not None:
        return None
    try:
        infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None
    for info in infos:
        if problem := address_problem(str(info[4][0])):
            return f"{host} resolves to {problem}"
    return None


def host_entry_error(entry: object) -> str | None:
    """An allowlist entry: a host name, an IP address, or ``*.`` followed by a host name."""
    if not isinstance(entry, str) or not entry:
        return "Must be a non-empty string."
    name = entry.removeprefix("*.")
    if _ip(name) is not None and not entry.startswith("*."):
        return None
    labels = name.split(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
        return f"{entry!r} is not a host name, an IP address or *.domain (lowercase)."
    return None


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    host = host.lower().rstrip(".")
    for entry in allowed:
        entry = entry.lower()
        if entry.startswith("*."):
            if host.endswith(entry[1:]) and host != entry[2:]:
                return True
        elif host == entry.strip("[]"):
            return True
    return False


def split(url: object) -> SplitResult:
    """Parse a URL after the checks every use shares; raise UrlRefused with the reason."""
    if not isinstance(url, str) or not url:
        raise UrlRefused("Must be a non-empty URL.")
    if len(url) > MAX_URL:
        raise UrlRefused(f"At most {MAX_URL} characters.")
    if not _URL_CHARS.fullmatch(url):
        bad = next(c for c in url if not _URL_CHARS.fullmatch(c))
        raise UrlRefused(
            f"Character {bad!r} is not allowed in a URL here (whitespace, control and shell "
            "characters must be percent-encoded)."
        )
    if _PERCENT.search(url):
        raise UrlRefused("A '%' must start a %XX escape.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises ValueError for a bad port)
    except ValueError as exc:
        raise UrlRefused(f"Not a valid URL: {exc}.") from exc
    if "@" in parts.netloc:
        raise UrlRefused("A URL must not carry a user name or password.")
    if not parts.hostname:
        raise UrlRefused("A URL needs a host.")
    if ("[" in parts.netloc) != (_ip(parts.hostname) is not None and ":" in parts.hostname):
        raise UrlRefused("Brackets are only for an IPv6 address.")
    if "[" in parts.path + parts.query or "]" in parts.path + parts.query:
        raise UrlRefused("Brackets in a path or query must be percent-encoded.")
    if parts.fragment or url.endswith("#"):
        raise UrlRefused("A URL here must not have a #fragment.")
    return parts


def check(url: object, rules: UrlRules) -> str | None:
    """Why ``url`` is refused under ``rules``, or None."""
    try:
        parts = split(url)
    except UrlRefused as exc:
        return str(exc)
    if parts.scheme not in rules.schemes:
        return f"Must be {' or '.join(s + '://' for s in rules.schemes)} (got {parts.scheme}://)."
    host = parts.hostname or ""
    if _ip(host) is None and (host.startswith("*") or host_entry_error(host) is not None):
        return f"{host!r} is not a valid host name."
    if problem := host_problem(host, allow_link_local=rules.allow_link_local):
        return f"Refused: {problem} (MAASCP_ALLOW_LINK_LOCAL_TARGETS allows it)."
    if rules.allowed_hosts is not None and not host_allowed(
        host, (*rules.allowed_hosts, *rules.extra_hosts)
    ):
        return (
            f"Host {host} is not on the allowed list for this site "
            "(site payload_allowed_hosts, else MAASCP_PAYLOAD_ALLOWED_HOSTS)."
        )
    return None


def hosts_error(value: object) -> str | None:
    """A list of allowlist entries."""
    if not isinstance(value, list | tuple):
        return "Must be a list of host names."
    if len(value) > 100:
        return "At most 100 entries."
    for entry in value:
        if reason := host_entry_error(entry):
            return reason
    return None


def display(url: str) -> str:
    """A URL as it may be shown or logged: the query (a presigned URL's signature) dropped."""
    parts = urlsplit(url)
    return parts._replace(query="…" if parts.query else "", fragment="").geturl()


def hostname_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def site_rules(site: Any) -> UrlRules:
    """The rules for URLs a site's nodes fetch on first boot (bundle, node-agent bootstrap):
    the site's allowlist (else the deployment default) plus the control plane's own node URL
    host; ``http`` only when the site allows it."""
    hosts: Sequence[str] = site.payload_allowed_hosts or settings.PAYLOAD_ALLOWED_HOSTS
    return UrlRules(
        schemes=("https", "http") if site.allow_http else ("https",),
        allowed_hosts=tuple(h.lower() for h in hosts),
        allow_link_local=link_local_allowed(),
        extra_hosts=(hostname_of(settings.NODE_API_URL or ""),),
    )
