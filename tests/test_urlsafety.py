"""The outbound address rules (maas_domain/urlsafety.py, docs/security.md T9): a metadata or
link-local address is refused however it is written, and nothing else is."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from maas_domain.urlsafety import address_problem, host_problem

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
