"""Site credentials: write/rotate through the secrets backend; the database keeps references.

What is written: the MAAS API key (``consumer:token:secret``), the site default IPMI
credentials, and per-hostname IPMI overrides. What is returned and audited: metadata only
(which fields are set, versions, who rotated and when).

Rotation of the MAAS API key is two-phase: the new version is recorded as ``pending_version``
and the previous version stays the one workflows use (and stays readable in the backend) until a
site probe authenticates with the new key and confirms it. IPMI credentials cannot be proven by a
probe (only MAAS talks to BMCs), so they take effect at once; old versions remain in the backend.

Secrets are written before the database transaction: if that transaction then fails, the new
backend version is simply unreferenced, and nothing the product uses has changed.

The MAAS API key is bound to the site's MAAS URL and TLS setting as they were when it was
written (docs/security.md): once either changes, ``maas_api_key`` refuses to hand the key out
(``CredentialNotConfirmed``) until an operator confirms the new address
(``credentials_confirm_url``, called by a probe with ``confirm_maas_url``) or writes new
credentials, which are bound to the current address and take effect at once (the old key was
for another address).
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction
from django.utils import timezone

from maas_domain import audit, dryrun
from maas_domain.errors import InvalidInput, secrets_unavailable
from maas_domain.models import CredentialKind, MaasSite, PowerCredentialOverride, SiteCredential
from maas_domain.models.sites import SecretRef, SiteHealth
from maas_domain.regions import secrets_prefix
from maas_domain.secrets import SecretsError, get_backend
from maas_domain.validators import hostname_error

_KEY_PART = re.compile(r"[A-Za-z0-9]+")
MAX_OVERRIDES = 1000


def api_key_error(value: object) -> str | None:
    if not isinstance(value, str):
        return "Must be a string."
    parts = value.split(":")
    if len(parts) != 3 or not all(_KEY_PART.fullmatch(p) for p in parts):
        return "Must be a MAAS API key: consumer_key:token_key:token_secret (three parts)."
    return None


def _ipmi_errors(value: object, prefix: str, extra: tuple[str, ...] = ()) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        return {prefix: ["Must be an object with username and password."]}
    errors: dict[str, list[str]] = {}
    for key in sorted(set(value) - {"username", "password", *extra}):
        errors[f"{prefix}.{key}"] = ["Unknown field."]
    for key, limit in (("username", 64), ("password", 128)):
        item = value.get(key)
        if not isinstance(item, str) or not item:
            errors[f"{prefix}.{key}"] = ["This field is required (non-empty string)."]
        elif len(item) > limit or any(ord(c) < 32 for c in item):
            errors[f"{prefix}.{key}"] = [f"At most {limit} printable characters."]
    return errors


def _validate(payload: Any) -> None:
    if not isinstance(payload, dict):
        raise InvalidInput("Invalid input.", fields={"non_field_errors": ["Must be an object."]})
    errors: dict[str, list[str]] = {}
    for key in sorted(set(payload) - {"maas_api_key", "ipmi", "power_overrides"}):
        errors[key] = ["Unknown field."]
    if not any(k in payload for k in ("maas_api_key", "ipmi", "power_overrides")):
        errors["non_field_errors"] = ["Give at least one of maas_api_key, ipmi, power_overrides."]
    if "maas_api_key" in payload and (reason := api_key_error(payload["maas_api_key"])):
        errors["maas_api_key"] = [reason]
    if "ipmi" in payload:
        errors.update(_ipmi_errors(payload["ipmi"], "ipmi"))
    if "power_overrides" in payload:
        rows = payload["power_overrides"]
        if not isinstance(rows, list) or not rows or len(rows) > MAX_OVERRIDES:
            errors["power_overrides"] = [f"Must be a list of 1 to {MAX_OVERRIDES} objects."]
        else:
            seen: set[str] = set()
            for i, row in enumerate(rows):
                prefix = f"power_overrides[{i}]"
                errors.update(_ipmi_errors(row, prefix, extra=("hostname",)))
                host = row.get("hostname") if isinstance(row, dict) else None
                if reason := hostname_error(host):
                    errors[f"{prefix}.hostname"] = [reason]
                elif host in seen:
                    errors[f"{prefix}.hostname"] = [f"{host} appears twice."]
                else:
                    seen.add(str(host))
    if errors:
        raise InvalidInput("Invalid credentials payload; nothing was stored.", fields=errors)


def _path(site: MaasSite, leaf: str) -> str:
    return f"{secrets_prefix(site.region)}/sites/{site.pk}/{leaf}"


def site_secrets_to_region(site: MaasSite) -> int:
    """Move the site's credentials under its region's prefix (``regions.secrets_prefix``) when
    they are elsewhere (a site that changed region, or a reference written before regions had
    prefixes): each version a reference names (the confirmed and the pending one) is copied to
    the new path, the reference rows then name the copies. Returns how many references moved.
    The old paths stay readable to the central identity; nothing reads them any more."""
    prefix = secrets_prefix(site.region) + "/"
    moved = 0
    refs: list[SiteCredential | PowerCredentialOverride] = [
        *SiteCredential.objects.filter(site=site),
        *PowerCredentialOverride.objects.filter(site=site),
    ]
    backend = get_backend()
    for ref in refs:
        if ref.path.startswith(prefix):
            continue
        leaf = ref.path.split(f"sites/{site.pk}/", 1)[-1]
        path = f"{prefix}sites/{site.pk}/{leaf}"
        versions = {}
        try:
            for field in ("version", "pending_version"):
                if (old := getattr(ref, field)) is not None:
                    versions[field] = backend.write(path, backend.read(ref.path, old))
        except SecretsError as exc:
            raise secrets_unavailable(exc, "the site's credentials were not moved") from exc
        type(ref).objects.filter(pk=ref.pk).update(path=path, **versions)
        moved += 1
    return moved


def _write(path: str, data: dict[str, str]) -> int:
    if dryrun.active():
        # a dry run writes nothing: the version the backend would give is the next one
        return _recorded_version(path) + 1
    try:
        return get_backend().write(path, data)
    except SecretsError as exc:
        raise secrets_unavailable(exc, "nothing was stored") from exc


def _recorded_version(path: str) -> int:
    refs: list[SecretRef] = [*SiteCredential.objects.filter(path=path)]
    refs += PowerCredentialOverride.objects.filter(path=path)
    return max([max(r.version or 0, r.pending_version or 0) for r in refs], default=0)


def _apply_version(ref: SecretRef, version: int, *, two_phase: bool, actor: audit.Actor) -> None:
    now = timezone.now()
    if two_phase and ref.version is not None:
        # Versions only grow: a slower concurrent rotation never moves pending backwards.
        ref.pending_version = max(ref.pending_version or 0, version)
    else:
        ref.version = max(ref.version or 0, version)
        ref.confirmed_at = None if two_phase else now
    ref.rotated_at = now
    ref.rotated_by = audit.actor_name(actor)


def site_credentials_write(*, actor: audit.Actor, site: MaasSite, payload: Any) -> dict[str, Any]:
    """Write/rotate any of: MAAS API key, default IPMI credentials, per-host overrides."""
    _validate(payload)
    written: list[tuple[str, str | None, int, list[str]]] = []
    if "maas_api_key" in payload:
        version = _write(_path(site, "maas-api-key"), {"api_key": payload["maas_api_key"]})
        written.append((CredentialKind.MAAS_API_KEY, None, version, ["api_key"]))
    if "ipmi" in payload:
        creds = {k: payload["ipmi"][k] for k in ("username", "password")}
        version = _write(_path(site, "ipmi-default"), creds)
        written.append((CredentialKind.IPMI_DEFAULT, None, version, ["username", "password"]))
    for row in payload.get("power_overrides", []):
        creds = {k: row[k] for k in ("username", "password")}
        version = _write(_path(site, f"power/{row['hostname']}"), creds)
        written.append(("power_override", row["hostname"], version, ["username", "password"]))

    with transaction.atomic():
        MaasSite.objects.select_for_update().filter(pk=site.pk).first()
        before = site_credentials_metadata(site=site)
        site = MaasSite.objects.get(pk=site.pk)  # the URL the key is written for, as of now
        for kind, hostname, version, fields_set in written:
            ref: SecretRef
            if hostname is None:
                ref, _ = SiteCredential.objects.get_or_create(
                    site=site, kind=kind, defaults={"path": _path(site, _leaf(kind))}
                )
            else:
                ref, _ = PowerCredentialOverride.objects.get_or_create(
                    site=site,
                    hostname=hostname,
                    defaults={"path": _path(site, f"power/{hostname}")},
                )
            is_key = kind == CredentialKind.MAAS_API_KEY
            if is_key and isinstance(ref, SiteCredential) and not ref.bound_to(site):
                # written for a new address: the previous key belongs to the old one, so the
                # new key is the one in use (no pending phase that could fall back to the old)
                ref.pending_version = None
                ref.version = None
            _apply_version(ref, version, two_phase=is_key, actor=actor)
            if is_key and isinstance(ref, SiteCredential):
                ref.bound_url, ref.bound_verify_tls = site.maas_url, site.verify_tls
            ref.fields_set = fields_set
            ref.save()
        after = site_credentials_metadata(site=site)
        audit.record(
            actor=actor,
            action="maas_site.credentials.write",
            target=site,
            before=before,
            after=after,
        )
    return after


def _leaf(kind: str) -> str:
    return {
        CredentialKind.MAAS_API_KEY: "maas-api-key",
        CredentialKind.IPMI_DEFAULT: "ipmi-default",
    }[CredentialKind(kind)]


def site_credentials_metadata(*, site: MaasSite) -> dict[str, Any]:
    """What the API may show: per credential, fields set and version info; never values."""
    creds = {c.kind: c.metadata() for c in SiteCredential.objects.filter(site=site)}
    overrides = [
        {"hostname": o.hostname, **o.metadata()}
        for o in PowerCredentialOverride.objects.filter(site=site).order_by("hostname")
    ]
    return {
        "maas_api_key": creds.get(CredentialKind.MAAS_API_KEY),
        "ipmi": creds.get(CredentialKind.IPMI_DEFAULT),
        "power_overrides": overrides,
    }


def credentials_unbind_on_change(*, site: MaasSite, before: dict[str, Any]) -> str:
    """Called (in the site update's transaction) after ``maas_url``/``verify_tls`` may have
    changed: health and key confirmation reset. Returns the audit reason ('' if unchanged)."""
    changed = [k for k in ("maas_url", "verify_tls") if before[k] != getattr(site, k)]
    if not changed:
        return ""
    site.health, site.last_probe_at, site.probe_result = SiteHealth.UNKNOWN, None, {}
    SiteCredential.objects.filter(site=site, kind=CredentialKind.MAAS_API_KEY).update(
        confirmed_at=None
    )
    return (
        f"credentials_unbound: {' and '.join(changed)} changed; the MAAS API key is not sent "
        "to the new address until an operator confirms it"
    )


def confirm_url_matches(*, site: MaasSite, confirm_maas_url: str) -> None:
    """A confirmation must name the site's current MAAS URL exactly (400 otherwise)."""
    if confirm_maas_url != site.maas_url:
        raise InvalidInput(
            "The confirmation must name the site's current MAAS URL.",
            fields={"confirm_maas_url": [f"Must equal the site's maas_url ({site.maas_url})."]},
        )


def credentials_confirm_url(*, actor: audit.Actor, site: MaasSite, confirm_maas_url: str) -> bool:
    """An operator's explicit confirmation that the site's current MAAS URL (and TLS setting)
    may receive its API key. Returns whether a binding changed (audited when it did)."""
    confirm_url_matches(site=site, confirm_maas_url=confirm_maas_url)
    with transaction.atomic():
        locked = MaasSite.objects.select_for_update().get(pk=site.pk)
        ref = SiteCredential.objects.filter(site=locked, kind=CredentialKind.MAAS_API_KEY).first()
        if ref is None or ref.bound_to(locked) or locked.maas_url != confirm_maas_url:
            return False
        before = {"maas_url": ref.bound_url, "verify_tls": ref.bound_verify_tls}
        ref.bound_url, ref.bound_verify_tls = locked.maas_url, locked.verify_tls
        ref.save(update_fields=["bound_url", "bound_verify_tls"])
        audit.record(
            actor=actor,
            action="maas_site.credentials.confirm_url",
            target=locked,
            before=before,
            after={"maas_url": locked.maas_url, "verify_tls": locked.verify_tls},
            reason="operator confirmed the new MAAS address for the site's API key",
        )
    return True
