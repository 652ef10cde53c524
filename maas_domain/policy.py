"""Site policy: one catalogue of fields, one resolver.

The site carries the policy as its implicit default profile; a profile may override any field.
Resolution order, per field: the profile's override, else the site's value, else the default
below. ``stage_timeouts`` merges per key, so a profile can lengthen one stage's timeout without
restating the others; its keys are ``<stage>`` (that stage in every workflow kind) or
``<kind>.<stage>`` (one kind's stage, which wins), and the defaults are each stage's own
declaration (``workflows/kinds.py``, ``Stage.timeout``).

Storage: ``MaasSite.policy`` and ``SiteProfile.policy_overrides`` hold only the keys that were
set explicitly (JSON merge-patch on update: a ``null`` removes a key). Every write goes through
:func:`validate_policy`, so stored policy is always valid against this catalogue.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from maas_domain import urlsafety
from maas_domain.errors import InvalidInput
from maas_domain.urlsafety import UrlRules
from maas_domain.validators import digest_error, version_error

ERASE_MODES = ("none", "quick", "secure")
_SCRIPT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# The bundle is fetched by the node on first boot. Its URL's syntax is checked here; the site's
# rules (https unless the site allows http, host allowlist) by the site services and again when
# the payload is rendered (maas_domain/urlsafety.py).
_BUNDLE_URL = UrlRules(schemes=("https", "http"), allow_link_local=True)


def _bundle_url_error(value: object) -> str | None:
    if isinstance(value, str) and value.lower().startswith("oci://"):
        return (
            "oci:// references are refused until the first-boot payload fetches with a tool "
            "that speaks OCI; publish the bundle at an https:// URL."
        )
    return urlsafety.check(value, _BUNDLE_URL)


def _script_name_error(value: object) -> str | None:
    if isinstance(value, str) and _SCRIPT_NAME.fullmatch(value):
        return None
    return "Not a script name (names only, never script content)."


_PATTERNS: dict[str, Callable[[object], str | None]] = {
    "digest": digest_error,
    "version": version_error,
    "bundle": _bundle_url_error,
    "script": _script_name_error,
}


def _doc(text: str, **rules: Any) -> dict[str, Any]:
    return {"doc": text, **rules}


@dataclass(frozen=True)
class Policy:
    """The effective policy for one (site, profile). Field docs are shown in the API docs."""

    auto_claim_new: bool = field(
        default=False, metadata=_doc("Discovery may claim the only machine in state New.")
    )
    match_pxe_mac: bool = field(
        default=True, metadata=_doc("Discovery tries a known PXE MAC after hostname and IPMI IP.")
    )
    discovery_power_cycle: bool = field(
        default=True,
        metadata=_doc("Power-cycle an unknown machine and wait for it to enlist before creating."),
    )
    strict_pxe_preflight: bool = field(
        default=True, metadata=_doc("Fail before deploy when the PXE link cannot reach metadata.")
    )
    deploy_retry_limit: int = field(
        default=1,
        metadata=_doc("Redeploys after a datasource/cloud-init-like failure.", min=0, max=5),
    )
    hardware_sync_required: bool = field(
        default=False, metadata=_doc("Deploy with hardware sync and wait for its first seed.")
    )
    roce_phase2_enabled: bool = field(
        default=False, metadata=_doc("Onboarding requires and applies RoCE assignments.")
    )
    bootstrap_bundle_ref: str = field(
        default="",
        metadata=_doc(
            "Site bootstrap bundle URL (https://; a presigned URL is fine; oci:// is refused "
            "until the first-boot payload fetches with a tool that speaks OCI). Its host must "
            "be on the site's allowed list.",
            pattern="bundle",
            max_length=urlsafety.MAX_URL,
        ),
    )
    bootstrap_bundle_version: str = field(
        default="",
        metadata=_doc(
            "Version of the site bootstrap bundle ([A-Za-z0-9._+-], at most 64).",
            pattern="version",
            max_length=64,
        ),
    )
    bootstrap_bundle_digest: str = field(
        default="", metadata=_doc("sha256:<hex> digest of the bundle.", pattern="digest")
    )
    reachability_script: str = field(
        default="",
        metadata=_doc(
            "MAAS testing script (e.g. MAAS's built-in internet-connectivity) run on the "
            "machine before deploy with the node-facing URLs as its url parameter; empty: not "
            "run.",
            pattern="script",
            max_length=128,
        ),
    )
    commission_enable_ssh: bool = field(
        default=True, metadata=_doc("Commission with enable_ssh=1 (prototype behaviour).")
    )
    commission_skip_bmc_config: bool = field(
        default=True, metadata=_doc("Commission with skip_bmc_config=1 (prototype behaviour).")
    )
    commission_skip_networking: bool = field(
        default=False, metadata=_doc("Commission with skip_networking=1.")
    )
    commission_skip_storage: bool = field(
        default=False, metadata=_doc("Commission with skip_storage=1.")
    )
    commission_scripts: tuple[str, ...] = field(
        default=(),
        metadata=_doc("Names of commissioning scripts already registered in MAAS.", max_items=32),
    )
    hardware_conformance: str = field(
        default="enforce",
        metadata=_doc(
            "What a machine that does not conform to its SKU's hardware profile does: enforce "
            "(the onboarding fails hardware_nonconformant and the node is quarantined) or warn "
            "(recorded on the timeline; for a site still being surveyed).",
            choices=("enforce", "warn"),
        ),
    )
    acceptance_scripts: tuple[str, ...] = field(
        default=(),
        metadata=_doc(
            "MAAS testing scripts (names or tags, registered in MAAS by infra) every machine "
            "must pass after commissioning, before deploy; empty: none.",
            max_items=32,
        ),
    )
    acceptance_parameters: dict[str, str] = field(
        default_factory=dict,
        metadata=_doc(
            "Parameters of the acceptance scripts as MAAS takes them: <script>_<parameter> for "
            "one script, <parameter> for every script that declares it (e.g. "
            "infra-gpu-burn_duration: 1800).",
            max_items=32,
            max_length=256,
        ),
    )
    erase_mode: str = field(
        default="quick", metadata=_doc("Disk erase on release.", choices=ERASE_MODES)
    )
    release_fallback_allowed: bool = field(
        default=False,
        metadata=_doc(
            "After a failed erase: abort it and mark the machine Broken in MAAS (never released "
            "to Ready with unerased disks). Off: the machine is left as MAAS shows it."
        ),
    )
    erase_stuck_seconds: int = field(
        default=1800,
        metadata=_doc(
            "An erase still running after this long (MAAS never times one out) counts as failed "
            "(then the fallback).",
            min=60,
            max=86400,
        ),
    )
    delete_machine_on_full_decommission: bool = field(
        default=True, metadata=_doc("Full decommission deletes the machine from MAAS.")
    )
    requalify_redeploys: bool = field(
        default=True,
        metadata=_doc(
            "A repaired node requalifies through the onboarding's deploy, enrollment and "
            "completion stages back to active; off: it returns to the pool with its machine "
            "Ready in MAAS once commissioned, judged and tested."
        ),
    )
    leak_auto_sweep: bool = field(
        default=False,
        metadata=_doc(
            "Reconciliation sweeps by itself a leaked machine (held by our MAAS user in Failed "
            "deployment, commissioning, testing or disk erasing, no open workflow) that never "
            'reached a tenant, once two runs saw it (docs/reconciliation.md, "Leaks"). Off: '
            "only an operator's sweep."
        ),
    )
    rerun_enrollment_window: int = field(
        default=600,
        metadata=_doc(
            "Seconds a rerun or retry that redeployed nothing waits at enrollment for the "
            "node's agent to check in with this attempt's tokens; then it ends with the reason "
            '(docs/onboarding.md, "Reruns and adopt").',
            min=60,
            max=86400,
        ),
    )
    stage_timeouts: dict[str, int] = field(
        default_factory=dict,
        metadata=_doc(
            "Stage timeouts in seconds that override the stages' defaults, by <stage> or "
            "<kind>.<stage>.",
            min=10,
            max=86400,
        ),
    )
    batch_canary_size: int = field(
        default=0,
        metadata=_doc(
            "Nodes a batch onboards first; the rest wait until all of them succeed (0: none).",
            min=0,
            max=100,
        ),
    )
    batch_pause_after_failures: int = field(
        default=0,
        metadata=_doc(
            "A batch's admission pauses once this many of its workflows failed (0: never).",
            min=0,
            max=5000,
        ),
    )
    batch_pause_failure_percent: int = field(
        default=0,
        metadata=_doc(
            "A batch's admission pauses once this share of it failed, in percent (0: never).",
            min=0,
            max=100,
        ),
    )
    max_concurrent_workflows: int = field(
        default=10, metadata=_doc("Workflows running at once on the site.", min=1, max=1000)
    )

    def as_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in _LISTS:
            data[name] = list(data[name])
        data["stage_timeouts"] = _catalogue.effective(self)
        return data


POLICY_FIELDS = {f.name: f for f in fields(Policy)}
_LISTS = [name for name, f in POLICY_FIELDS.items() if f.type == "tuple[str, ...]"]


@dataclass
class _StageCatalogue:
    """The stages policy may time out, supplied by the registry of workflow kinds
    (``workflows/kinds.py``): the keys ``stage_timeouts`` accepts with the defaults
    they override, and the effective table the API shows."""

    keys: Callable[[], Mapping[str, int | None]] = dict
    effective: Callable[[Policy], dict[str, int]] = lambda p: dict(p.stage_timeouts)


_catalogue = _StageCatalogue()


def use_stage_catalogue(
    keys: Callable[[], Mapping[str, int | None]], effective: Callable[[Policy], dict[str, int]]
) -> None:
    _catalogue.keys, _catalogue.effective = keys, effective


def _default(name: str) -> Any:
    f = POLICY_FIELDS[name]
    if f.default is not MISSING:
        return f.default
    return f.default_factory()  # type: ignore[operator]


Checked = tuple[Any, str | None]  # (clean value, None) or (None, reason)


def _bool(value: Any, rules: Mapping[str, Any]) -> Checked:
    return (value, None) if isinstance(value, bool) else (None, "Must be true or false.")


def _int(value: Any, rules: Mapping[str, Any]) -> Checked:
    if isinstance(value, bool) or not isinstance(value, int):
        return None, "Must be an integer."
    if value < rules["min"] or value > rules["max"]:
        return None, f"Must be between {rules['min']} and {rules['max']}."
    return value, None


def _str(value: Any, rules: Mapping[str, Any]) -> Checked:
    if not isinstance(value, str):
        return None, "Must be a string."
    if "choices" in rules and value not in rules["choices"]:
        return None, f"Must be one of: {', '.join(rules['choices'])}."
    if len(value) > rules.get("max_length", 512):
        return None, f"At most {rules.get('max_length', 512)} characters."
    pattern = rules.get("pattern")
    if value and pattern and (reason := _PATTERNS[pattern](value)):
        return None, reason
    return value, None


def _names(value: Any, rules: Mapping[str, Any]) -> Checked:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None, "Must be a list of strings."
    if len(value) > rules["max_items"]:
        return None, f"At most {rules['max_items']} entries."
    bad = [v for v in value if not _SCRIPT_NAME.fullmatch(v)]
    if bad:
        return None, f"Not a script name: {bad[0]!r} (names only, never script content)."
    return list(value), None


def _parameters(value: Any, rules: Mapping[str, Any]) -> Checked:
    if not isinstance(value, dict):
        return None, "Must be an object of names to strings."
    if len(value) > rules["max_items"]:
        return None, f"At most {rules['max_items']} entries."
    for key, text in value.items():
        if not _SCRIPT_NAME.fullmatch(key):
            return None, f"Not a parameter name: {key!r} (<script>_<parameter> or <parameter>)."
        limit = rules["max_length"]
        if not isinstance(text, str) or len(text) > limit:
            return None, f"The value of {key!r} must be a string of at most {limit} characters."
        if any(ord(c) < 32 or ord(c) == 127 for c in text):
            return None, f"The value of {key!r} must not contain control characters."
    return dict(value), None


def _timeouts(value: Any, rules: Mapping[str, Any]) -> Checked:
    if not isinstance(value, dict):
        return None, "Must be an object of stage name to seconds."
    known = _catalogue.keys()
    unknown = sorted(set(value) - set(known))
    if unknown:
        return None, f"Unknown stage {unknown[0]!r}; stages are: {', '.join(sorted(known))}."
    for stage, seconds in value.items():
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            return None, f"Timeout for {stage!r} must be an integer number of seconds."
        if not rules["min"] <= seconds <= rules["max"]:
            return None, f"Timeout for {stage!r} must be {rules['min']}..{rules['max']}s."
    return dict(value), None


# One checker per field type of the catalogue (a field of another type is a bug: KeyError).
_CHECKERS: dict[str, Callable[[Any, Mapping[str, Any]], Checked]] = {
    "bool": _bool,
    "int": _int,
    "str": _str,
    "tuple[str, ...]": _names,
    "dict[str, str]": _parameters,
    "dict[str, int]": _timeouts,
}


# every field of the catalogue has its checker (checked when the module loads)
assert {str(f.type) for f in POLICY_FIELDS.values()} <= set(_CHECKERS), (
    "a policy type lacks a checker"
)


def _check_value(name: str, value: Any) -> Checked:
    """Return (clean value, None) or (None, reason)."""
    f = POLICY_FIELDS[name]
    return _CHECKERS[str(f.type)](value, f.metadata)


def validate_policy(patch: Any, *, field_name: str = "policy") -> dict[str, Any]:
    """Validate a merge-patch of policy keys (``None`` means "unset"). Raise InvalidInput."""
    if not isinstance(patch, dict):
        raise InvalidInput("Invalid policy.", fields={field_name: ["Must be an object."]})
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    for key, value in patch.items():
        if key not in POLICY_FIELDS:
            errors[f"{field_name}.{key}"] = ["Unknown policy field."]
            continue
        if value is None:
            clean[key] = None
            continue
        checked, reason = _check_value(key, value)
        if reason:
            errors[f"{field_name}.{key}"] = [reason]
        else:
            clean[key] = checked
    if errors:
        raise InvalidInput("Invalid policy.", fields=errors)
    return clean


def merge_policy(stored: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply a validated merge-patch to stored explicit keys."""
    merged = dict(stored)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    bundle = {k: merged.get(k) for k in ("bootstrap_bundle_ref", "bootstrap_bundle_version")}
    if bundle["bootstrap_bundle_ref"] and not (
        bundle["bootstrap_bundle_version"] and merged.get("bootstrap_bundle_digest")
    ):
        raise InvalidInput(
            "Invalid policy.",
            fields={
                "policy.bootstrap_bundle_ref": [
                    "A bundle reference needs bootstrap_bundle_version and bootstrap_bundle_digest."
                ]
            },
        )
    return merged


def resolve_policy(site_policy: dict[str, Any], overrides: dict[str, Any] | None = None) -> Policy:
    """The effective policy: profile override, else site value, else default."""
    values: dict[str, Any] = {}
    for name in POLICY_FIELDS:
        value = _default(name)
        for layer in (site_policy, overrides or {}):
            if layer.get(name) is None:
                continue
            merge = name == "stage_timeouts"
            value = {**value, **layer[name]} if merge else layer[name]
        values[name] = tuple(value) if name in _LISTS else value
    return Policy(**values)


def policy_sources(
    site_policy: dict[str, Any], overrides: dict[str, Any] | None = None
) -> dict[str, str]:
    """Where each effective value comes from: default, site or profile."""
    sources = {}
    for name in POLICY_FIELDS:
        if (overrides or {}).get(name) is not None:
            sources[name] = "profile"
        elif site_policy.get(name) is not None:
            sources[name] = "site"
        else:
            sources[name] = "default"
    return sources
