"""A site's CA bundle: the certificates nodes use to trust the control plane.

One place parses it: the site services validate it on every write (API and admin pages), the API
shows what it holds (subject, SHA-256 fingerprint, validity), and the onboarding preflight checks
it again before a node is touched.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

MAX_BUNDLE_BYTES = 256 * 1024
MAX_CERTIFICATES = 50
_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----")


def parse_ca_bundle(pem: str) -> list[x509.Certificate]:
    """The certificates of a PEM bundle; ValueError with a reason an operator can act on."""
    if len(pem.encode()) > MAX_BUNDLE_BYTES:
        raise ValueError(f"At most {MAX_BUNDLE_BYTES // 1024} KiB.")
    labels = _BLOCK.findall(pem)
    if not labels:
        raise ValueError("Not PEM: expected -----BEGIN CERTIFICATE----- blocks.")
    others = sorted({label for label in labels if label != "CERTIFICATE"})
    if others:
        # A private key pasted here would be stored and shown in clear: refuse it outright.
        raise ValueError(f"Only CERTIFICATE blocks are accepted (found {', '.join(others)}).")
    if len(labels) > MAX_CERTIFICATES:
        raise ValueError(f"At most {MAX_CERTIFICATES} certificates.")
    try:
        certs = x509.load_pem_x509_certificates(pem.encode())
    except ValueError:
        raise ValueError("A CERTIFICATE block does not parse as an X.509 certificate.") from None
    now = datetime.now(UTC)
    for cert in certs:
        if cert.not_valid_after_utc <= now:
            raise ValueError(
                f"Certificate {cert.subject.rfc4514_string()!r} expired on "
                f"{cert.not_valid_after_utc:%Y-%m-%d}."
            )
    return certs


def ca_bundle_error(value: object) -> str | None:
    if not isinstance(value, str):
        return "Must be a string."
    if not value.strip():
        return None  # no bundle: the onboarding preflight reports it
    try:
        parse_ca_bundle(value)
    except ValueError as exc:
        return str(exc)
    return None


def describe_ca_bundle(pem: str) -> list[dict[str, Any]]:
    """What the API shows beside the PEM: one entry per certificate (empty when none parse)."""
    if not pem.strip():
        return []
    try:
        certs = x509.load_pem_x509_certificates(pem.encode())
    except ValueError:
        return []
    return [
        {
            "subject": cert.subject.rfc4514_string(),
            "fingerprint_sha256": cert.fingerprint(hashes.SHA256()).hex(":").upper(),
            "not_before": cert.not_valid_before_utc.isoformat(),
            "not_after": cert.not_valid_after_utc.isoformat(),
        }
        for cert in certs
    ]


def self_signed_ca(common_name: str, *, days: int = 365) -> str:
    """A new self-signed CA certificate as PEM (its key is thrown away): the embedded stack's
    own node CA (config/settings.py) and the demo's. Nothing can be signed with it; it exists so
    that a site made the documented way has CA material (docs/settings.md, "Node trust")."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()
