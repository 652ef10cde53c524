"""The outbound address rules (maas_domain/urlsafety.py, docs/security.md T9): a metadata or
link-local address is refused however it is written, and nothing else is."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from maas_domain.urlsafety import (
    UrlRules,
    address_problem,
    check,
    display,
    embedded_ipv4,
    host_allowed,
    host_entry_error,
    host_problem,
    hostname_of,
    hosts_error,
    link_local_allowed,
    resolved_problem,
    site_rules,
)

METADATA_V4 = ["169.254.169.254", "169.254.0.1", "100.100.100.200", "192.0.0.192", "168.63.129.16"]


def forms(v4: str) -> list[str]:
    """Every way an IPv6 address can carry ``v4``."""
    n = int(ipaddress.IPv4Address(v4))
    hi, lo = n >> 16, n & 0xFFFF
    return [
        f"::ffff:{v4}",  # IPv4-mapped
        f"::{v4}",  # IPv4-compatible
        f"64:ff9b::{v4}",  # NAT64
        f"2002:{hi:x}:{lo:x}::1",  # 6to4
        f"2001:0:4136:e378:8000:63bf:{hi ^ 0xFFFF:x}:{lo ^ 0xFFFF:x}",  # Teredo client
    ]


@pytest.mark.parametrize("v4", METADATA_V4)
def test_a_metadata_address_is_refused_in_every_form(v4: str) -> None:
    assert address_problem(v4)
    for form in forms(v4):
        assert address_problem(form), form
        assert host_problem(f"[{form}]", allow_link_local=False), form
    assert host_problem(v4, allow_link_local=True) is None  # the deployment may allow them


@pytest.mark.parametrize(
    "address",
    ["10.0.0.1", "192.0.0.193", "168.63.129.17", "2001:db8::1", "::1", "::", "64:ff9b::a00:1",
     "2002:a00:1::1", "fd00:ec2::253", "169.253.255.255", "169.255.0.0"],
)  # fmt: skip
def test_ordinary_addresses_pass(address: str) -> None:
    assert address_problem(address) is None
    assert host_problem(address, allow_link_local=False) is None


@pytest.mark.parametrize("host", ["metadata.google.internal", "METADATA.goog.", "instance-data"])
def test_metadata_names_are_refused(host: str) -> None:
    assert host_problem(host, allow_link_local=False)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_an_embedded_address_is_judged_as_the_address_itself(n: int) -> None:
    v4 = str(ipaddress.IPv4Address(n))
    bad = address_problem(v4) is not None
    for form in forms(v4)[:4]:  # Teredo needs a real server prefix; the rest are exact
        if form in ("::0.0.0.0", "::0.0.0.1"):
            continue  # :: and ::1 are not IPv4-compatible addresses
        assert (address_problem(form) is not None) == bad, form


# The URL rules an operator meets (urlsafety.check): each refusal is the sentence the API and the
# admin show, so a test names the exact reason, and every rule has a URL just inside it that passes.

HTTPS = UrlRules()
BOTH = UrlRules(schemes=("https", "http"))
CHARS = "(whitespace, control and shell characters must be percent-encoded)."


@pytest.mark.parametrize(
    ("url", "rules", "reason"),
    [
        ("", HTTPS, "Must be a non-empty URL."),
        (None, HTTPS, "Must be a non-empty URL."),
        ("https://a.example/" + "x" * 2031, HTTPS, "At most 2048 characters."),
        ("https://a.example/x y", HTTPS, f"Character ' ' is not allowed in a URL here {CHARS}"),
        ("https://a.example/a;b", HTTPS, f"Character ';' is not allowed in a URL here {CHARS}"),
        ("https://a.example/%zz", HTTPS, "A '%' must start a %XX escape."),
        ("https://a.example/%4", HTTPS, "A '%' must start a %XX escape."),
        ("https://a.example:99999/", HTTPS, "Not a valid URL: Port out of range 0-65535."),
        ("https://u:p@a.example/", HTTPS, "A URL must not carry a user name or password."),
        ("https://u@a.example/", HTTPS, "A URL must not carry a user name or password."),
        ("https:///x", HTTPS, "A URL needs a host."),
        ("https://a.example/x[1]", HTTPS, "Brackets in a path or query must be percent-encoded."),
        ("https://a.example/?q]=1", HTTPS, "Brackets in a path or query must be percent-encoded."),
        ("https://a.example/x[", HTTPS, "Brackets in a path or query must be percent-encoded."),
        ("http://a.example/", HTTPS, "Must be https:// (got http://)."),
        ("ftp://a.example/", BOTH, "Must be https:// or http:// (got ftp://)."),
        ("https://bad_host/", HTTPS, "'bad_host' is not a valid host name."),
        ("https://-a.example/", HTTPS, "'-a.example' is not a valid host name."),
        (
            "https://169.254.169.254/latest/meta-data",
            HTTPS,
            "Refused: 169.254.169.254 is a link-local or cloud metadata address "
            "(MAASCP_ALLOW_LINK_LOCAL_TARGETS allows it).",
        ),
        (
            "https://[::ffff:169.254.169.254]/",
            HTTPS,
            "Refused: ::ffff:169.254.169.254 is a link-local or cloud metadata address "
            "(MAASCP_ALLOW_LINK_LOCAL_TARGETS allows it).",
        ),
        (
            "https://metadata.google.internal/",
            HTTPS,
            "Refused: metadata.google.internal is a cloud metadata host "
            "(MAASCP_ALLOW_LINK_LOCAL_TARGETS allows it).",
        ),
        (
            "https://other.example/bundle",
            UrlRules(allowed_hosts=("files.example",)),
            "Host other.example is not on the allowed list for this site "
            "(site payload_allowed_hosts, else MAASCP_PAYLOAD_ALLOWED_HOSTS).",
        ),
    ],
)  # fmt: skip
def test_a_refused_url_says_why(url: object, rules: UrlRules, reason: str) -> None:
    assert check(url, rules) == reason


@pytest.mark.parametrize(
    ("url", "rules"),
    [
        ("https://a.example/" + "x" * 2030, HTTPS),  # 2048 characters: the limit itself
        ("https://a.example/p%2Fq?sig=a%3D&x=1", HTTPS),
        ("https://a.example:8443/x", HTTPS),
        ("http://a.example/", BOTH),
        ("https://10.0.0.1/", HTTPS),
        ("https://[2001:db8::1]/", HTTPS),
        ("https://169.254.169.254/", UrlRules(allow_link_local=True)),
        ("https://files.example/b", UrlRules(allowed_hosts=("files.example",))),
        ("https://cp.example/", UrlRules(allowed_hosts=("f.a",), extra_hosts=("cp.example",))),
        ("https://x.files.example/b", UrlRules(allowed_hosts=("*.files.example",))),
        ("https://any.example/", UrlRules(allowed_hosts=None)),
    ],
)  # fmt: skip
def test_a_url_inside_every_rule_passes(url: str, rules: UrlRules) -> None:
    assert check(url, rules) is None


def test_check_refuses_a_metadata_host_even_when_it_is_allowlisted() -> None:
    rules = UrlRules(allowed_hosts=("169.254.169.254", "metadata.google.internal"))
    assert check("https://169.254.169.254/", rules) is not None
    assert check("https://metadata.google.internal/", rules) is not None


@pytest.mark.parametrize(
    ("host", "allowed", "expected"),
    [
        ("a.example.com", ["*.example.com"], True),
        ("a.b.example.com", ["*.example.com"], True),
        ("A.Example.COM.", ["*.EXAMPLE.com"], True),
        ("example.com", ["*.example.com"], False),  # the wildcard needs a label in front
        ("badexample.com", ["*.example.com"], False),
        ("files.example", ["FILES.example"], True),
        ("files.example.", ["files.example"], True),
        ("files.example", ["other.example", "files.example"], True),
        ("files.example.evil", ["files.example"], False),
        ("::1", ["[::1]"], True),
        ("files.example", [], False),
    ],
)  # fmt: skip
def test_host_allowed(host: str, allowed: list[str], expected: bool) -> None:
    assert host_allowed(host, allowed) is expected


NOT_A_HOST = "is not a host name, an IP address or *.domain (lowercase)."
LONG_NAME = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 253 characters


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("", "Must be a non-empty string."),
        (5, "Must be a non-empty string."),
        (None, "Must be a non-empty string."),
        ("Files.example", f"'Files.example' {NOT_A_HOST}"),
        ("a..example", f"'a..example' {NOT_A_HOST}"),
        ("*.*.example", f"'*.*.example' {NOT_A_HOST}"),
        ("*.", f"'*.' {NOT_A_HOST}"),
        ("*.2001:db8::1", f"'*.2001:db8::1' {NOT_A_HOST}"),
        ("x" * 64 + ".example", f"'{'x' * 64}.example' {NOT_A_HOST}"),
        (LONG_NAME + "e", f"'{LONG_NAME}e' {NOT_A_HOST}"),
        (LONG_NAME, None),
        ("files.example", None),
        ("*.files.example", None),
        ("10.0.0.1", None),
        ("2001:db8::1", None),
    ],
)  # fmt: skip
def test_host_entry_error(entry: object, reason: str | None) -> None:
    assert host_entry_error(entry) == reason


def test_hosts_error() -> None:
    assert hosts_error("files.example") == "Must be a list of host names."
    assert hosts_error(["files.example"] * 100) is None
    assert hosts_error(("files.example",)) is None
    assert hosts_error(["files.example"] * 101) == "At most 100 entries."
    assert hosts_error(["files.example", "Bad"]) == (f"'Bad' {NOT_A_HOST}")


def test_display_drops_a_presigned_urls_signature() -> None:
    assert display("https://h.example/b.tar?X-Amz-Signature=abc#f") == "https://h.example/b.tar?…"
    assert display("https://h.example/b.tar") == "https://h.example/b.tar"


def test_hostname_of() -> None:
    assert hostname_of("https://CP.Example:8443/x") == "cp.example"
    assert hostname_of("") == ""


@pytest.mark.parametrize(
    ("ip", "inner"),
    [
        ("::ffff:10.0.0.1", "10.0.0.1"),
        ("::10.0.0.1", "10.0.0.1"),
        ("::2", "0.0.0.2"),  # the smallest IPv4-compatible address
        ("::1", None),  # loopback, not 0.0.0.1
        ("::", None),
        ("64:ff9b::a00:1", "10.0.0.1"),
        ("2002:a00:1::1", "10.0.0.1"),
        ("2001:db8::1", None),
    ],
)
def test_embedded_ipv4(ip: str, inner: str | None) -> None:
    found = embedded_ipv4(ipaddress.IPv6Address(ip))
    assert (str(found) if found else None) == inner


def test_a_zone_index_does_not_hide_a_link_local_address() -> None:
    assert (
        address_problem("fe80::1%eth0") == "fe80::1%eth0 is a link-local or cloud metadata address"
    )
    assert address_problem("169.254.169.254%eth0") is not None
    assert host_problem("[fe80::1%eth0]", allow_link_local=False)


def test_the_reasons_name_the_address() -> None:
    assert host_problem("METADATA.goog.", allow_link_local=False) == (
        "METADATA.goog. is a cloud metadata host"
    )
    assert host_problem("169.254.169.254", allow_link_local=False) == (
        "169.254.169.254 is a link-local or cloud metadata address"
    )
    assert host_problem("metadata.google.internal", allow_link_local=True) is None


class _Resolver:
    def __init__(self, *addresses: str, fails: bool = False) -> None:
        self.addresses, self.fails = addresses, fails
        self.asked: list[tuple[str, int, int]] = []

    def __call__(self, host, port, proto=0):
        self.asked.append((host, port, proto))
        if self.fails:
            raise OSError("no such host")
        return [(socket.AF_INET, socket.SOCK_STREAM, proto, "", (a, port)) for a in self.addresses]


def test_a_name_resolving_to_a_metadata_address_is_refused_before_connecting(monkeypatch) -> None:
    resolver = _Resolver("10.0.0.5", "169.254.169.254")
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    assert resolved_problem("evil.example", 8443) == (
        "evil.example resolves to 169.254.169.254 is a link-local or cloud metadata address"
    )
    assert resolver.asked == [("evil.example", 8443, socket.IPPROTO_TCP)]
    resolved_problem("evil.example")
    assert resolver.asked[-1][1] == 443


def test_resolution_leaves_good_and_unknown_names_to_the_connection(monkeypatch) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", _Resolver("10.0.0.5"))
    assert resolved_problem("good.example") is None
    monkeypatch.setattr(socket, "getaddrinfo", _Resolver(fails=True))
    assert resolved_problem("missing.example") is None


def test_resolution_judges_literals_without_dns(monkeypatch) -> None:
    resolver = _Resolver("169.254.169.254")
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    assert resolved_problem("10.0.0.1") is None
    assert resolved_problem("metadata.google.internal") == (
        "metadata.google.internal is a cloud metadata host"
    )
    assert resolver.asked == []


def test_the_deployment_may_allow_link_local_targets(monkeypatch, settings) -> None:
    monkeypatch.setattr(socket, "getaddrinfo", _Resolver("169.254.169.254"))
    settings.ALLOW_LINK_LOCAL_TARGETS = True
    assert link_local_allowed() is True
    assert resolved_problem("evil.example") is None
    assert resolved_problem("169.254.169.254") is None
    settings.ALLOW_LINK_LOCAL_TARGETS = False
    assert link_local_allowed() is False
    assert resolved_problem("169.254.169.254") is not None
    del settings.ALLOW_LINK_LOCAL_TARGETS  # a deployment that does not say: refused
    assert link_local_allowed() is False


class _Site:
    def __init__(self, hosts: list[str], allow_http: bool) -> None:
        self.payload_allowed_hosts, self.allow_http = hosts, allow_http


def test_site_rules(settings) -> None:
    settings.NODE_API_URL = "https://CP.example:8443/"
    settings.PAYLOAD_ALLOWED_HOSTS = ["default.example"]
    settings.ALLOW_LINK_LOCAL_TARGETS = False
    rules = site_rules(_Site(["Files.Example"], allow_http=False))
    assert rules == UrlRules(
        schemes=("https",),
        allowed_hosts=("files.example",),
        allow_link_local=False,
        extra_hosts=("cp.example",),
    )
    assert check("https://cp.example/agent", rules) is None  # the control plane itself
    fallback = site_rules(_Site([], allow_http=True))
    assert fallback.schemes == ("https", "http")
    assert fallback.allowed_hosts == ("default.example",)
    settings.ALLOW_LINK_LOCAL_TARGETS = True
    settings.NODE_API_URL = ""
    rules = site_rules(_Site(["files.example"], allow_http=False))
    assert rules.allow_link_local is True
    assert rules.extra_hosts == ("",)
