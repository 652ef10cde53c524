"""The effective policy of (site, profile): one resolved object, tested field by field."""

from __future__ import annotations

from typing import Any

import pytest

from maas_domain.errors import InvalidInput
from maas_domain.policy import (
    POLICY_FIELDS,
    Policy,
    merge_policy,
    policy_sources,
    resolve_policy,
    validate_policy,
)
from workflows.kinds import effective_stage_timeouts

# For each field: a valid non-default site value and a different valid profile value.
SAMPLES: dict[str, tuple[Any, Any]] = {
    "auto_claim_new": (True, False),
    "match_pxe_mac": (False, True),
    "discovery_power_cycle": (False, True),
    "strict_pxe_preflight": (False, True),
    "deploy_retry_limit": (3, 0),
    "hardware_sync_required": (True, False),
    "roce_phase2_enabled": (True, False),
    "bootstrap_bundle_ref": ("https://bundles.test/site.tar.gz", "https://mirror.test/b-2.tgz"),
    "bootstrap_bundle_version": ("1.4.0", "2.0.1"),
    "bootstrap_bundle_digest": ("sha256:" + "a" * 64, "sha256:" + "b" * 64),
    "commission_enable_ssh": (False, True),
    "commission_skip_bmc_config": (False, True),
    "commission_skip_networking": (True, False),
    "commission_skip_storage": (True, False),
    "commission_scripts": (["fw-check"], ["raid-config", "fw-check"]),
    "erase_mode": ("secure", "none"),
    "release_fallback_allowed": (True, False),
    "erase_stuck_seconds": (600, 3600),
    "delete_machine_on_full_decommission": (False, True),
    "requalify_redeploys": (False, True),
    "leak_auto_sweep": (True, False),
    "rerun_enrollment_window": (300, 1200),
    "stage_timeouts": ({"deploy": 7200}, {"commission": 900}),
    "reachability_script": ("internet-connectivity", "infra-reach"),
    "batch_canary_size": (2, 1),
    "batch_pause_after_failures": (3, 1),
    "batch_pause_failure_percent": (10, 50),
    "max_concurrent_workflows": (50, 2),
    "hardware_conformance": ("warn", "enforce"),
    "acceptance_scripts": (["infra-gpu-burn"], ["infra-gpu", "infra-nccl"]),
    "acceptance_parameters": ({"infra-gpu-burn_duration": "1800"}, {"duration": "600"}),
}
# One invalid value per field, with a fragment of the reason the client sees.
INVALID: dict[str, tuple[Any, str]] = {
    "auto_claim_new": ("yes", "true or false"),
    "match_pxe_mac": (1, "true or false"),
    "discovery_power_cycle": (None, ""),  # None means unset: valid, handled separately
    "strict_pxe_preflight": ("true", "true or false"),
    "deploy_retry_limit": (9, "between 0 and 5"),
    "hardware_sync_required": ([], "true or false"),
    "roce_phase2_enabled": ("on", "true or false"),
    "bootstrap_bundle_ref": ("oci://reg.test/infra/site:2", "tool that speaks OCI"),
    "bootstrap_bundle_version": ("v" * 65, "At most 64"),
    "bootstrap_bundle_digest": ("md5:abc", "sha256"),
    "commission_enable_ssh": (0, "true or false"),
    "commission_skip_bmc_config": ("1", "true or false"),
    "commission_skip_networking": (2, "true or false"),
    "commission_skip_storage": ("no", "true or false"),
    "commission_scripts": (["#!/bin/sh\nrm -rf /"], "never script content"),
    "erase_mode": ("shred", "none, quick, secure"),
    "release_fallback_allowed": ("false", "true or false"),
    "erase_stuck_seconds": (30, "between 60 and 86400"),
    "delete_machine_on_full_decommission": (None, ""),
    "requalify_redeploys": ("yes", "true or false"),
    "leak_auto_sweep": ("yes", "true or false"),
    "rerun_enrollment_window": (59, "between 60 and 86400"),
    "stage_timeouts": ({"bogus": 10}, "Unknown stage"),
    "reachability_script": ("curl x | sh", "never script content"),
    "batch_canary_size": (101, "between 0 and 100"),
    "batch_pause_after_failures": (-1, "between 0 and 5000"),
    "batch_pause_failure_percent": (101, "between 0 and 100"),
    "max_concurrent_workflows": (0, "between 1 and 1000"),
    "hardware_conformance": ("off", "enforce, warn"),
    "acceptance_scripts": (["gpu-burn; reboot"], "never script content"),
    "acceptance_parameters": ({"duration": "60\nrm -rf /"}, "control characters"),
}


def test_samples_cover_every_policy_field() -> None:
    assert set(SAMPLES) == set(POLICY_FIELDS) == set(INVALID)


@pytest.mark.parametrize("name", sorted(POLICY_FIELDS))
def test_field_defaults_then_site_then_profile(name: str) -> None:
    site_value, profile_value = SAMPLES[name]
    default = resolve_policy({})
    site_policy = validate_policy({name: site_value})
    if name == "bootstrap_bundle_ref":
        site_policy |= validate_policy(
            {"bootstrap_bundle_version": "1", "bootstrap_bundle_digest": "sha256:" + "c" * 64}
        )
    site_policy = merge_policy({}, site_policy)
    overrides = validate_policy({name: profile_value}, field_name="policy_overrides")

    on_site = getattr(resolve_policy(site_policy), name)
    on_profile = getattr(resolve_policy(site_policy, overrides), name)

    if name == "stage_timeouts":
        # merged per stage: the site lengthens deploy, the profile shortens commission
        defaults = effective_stage_timeouts(default)  # each stage's declared timeout
        assert defaults["deploy"] == 3600 and defaults["commission"] == 3600
        assert resolve_policy(site_policy).as_dict()["stage_timeouts"] == {
            **defaults,
            "deploy": 7200,
        }
        assert resolve_policy(site_policy, overrides).as_dict()["stage_timeouts"] == {
            **defaults,
            "deploy": 7200,
            "commission": 900,
        }
        assert (on_site, on_profile) == ({"deploy": 7200}, {"deploy": 7200, "commission": 900})
    else:
        expect = tuple if name in ("commission_scripts", "acceptance_scripts") else (lambda v: v)
        assert getattr(default, name) != expect(site_value)
        assert on_site == expect(site_value)
        assert on_profile == expect(profile_value)
    assert policy_sources(site_policy)[name] == "site"
    assert policy_sources(site_policy, overrides)[name] == "profile"
    assert policy_sources({})[name] == "default"


@pytest.mark.parametrize("name", sorted(POLICY_FIELDS))
def test_field_rejects_bad_value(name: str) -> None:
    value, reason = INVALID[name]
    if value is None:
        assert validate_policy({name: None}) == {name: None}
        return
    with pytest.raises(InvalidInput) as err:
        validate_policy({name: value})
    assert reason in err.value.extra["fields"][f"policy.{name}"][0]


def test_unknown_policy_key_is_rejected() -> None:
    with pytest.raises(InvalidInput) as err:
        validate_policy({"retry_forever": True})
    assert err.value.extra["fields"] == {"policy.retry_forever": ["Unknown policy field."]}


def test_null_unsets_a_key_in_a_merge_patch() -> None:
    stored = merge_policy({}, validate_policy({"erase_mode": "secure", "deploy_retry_limit": 2}))
    merged = merge_policy(stored, validate_policy({"erase_mode": None}))
    assert merged == {"deploy_retry_limit": 2}
    assert resolve_policy(merged).erase_mode == Policy().erase_mode


def test_bundle_reference_needs_version_and_digest() -> None:
    with pytest.raises(InvalidInput) as err:
        merge_policy({}, validate_policy({"bootstrap_bundle_ref": "https://b.test/x"}))
    assert "policy.bootstrap_bundle_ref" in err.value.extra["fields"]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"bad name!": "1"}, "Not a parameter name"),
        ({"duration": 1800}, "must be a string"),
        ({"duration": "x" * 257}, "at most 256"),
        ({f"p{i}": "1" for i in range(33)}, "At most 32"),
        (["duration=1"], "Must be an object"),
    ],
)
def test_acceptance_parameters_are_names_to_plain_strings(value: Any, reason: str) -> None:
    """What reaches MAAS's op=test as form fields: a name MAAS could take and a short,
    single-line value; never anything else."""
    with pytest.raises(InvalidInput) as err:
        validate_policy({"acceptance_parameters": value})
    assert reason in err.value.extra["fields"]["policy.acceptance_parameters"][0]


def test_a_profile_replaces_the_site_acceptance_parameters_as_a_whole() -> None:
    site = validate_policy({"acceptance_parameters": {"infra-gpu-burn_duration": "1800"}})
    profile = validate_policy({"acceptance_parameters": {"duration": "60"}})
    assert resolve_policy(site, profile).acceptance_parameters == {"duration": "60"}
    assert resolve_policy(site).as_dict()["acceptance_scripts"] == []


@pytest.mark.parametrize("name", sorted(POLICY_FIELDS))
def test_a_profile_override_applies_where_the_site_leaves_the_field_unset(name: str) -> None:
    """The profile is not second to an unset site field: its value is the effective one."""
    _, profile_value = SAMPLES[name]
    overrides = validate_policy({name: profile_value}, field_name="policy_overrides")
    value = getattr(resolve_policy({}, overrides), name)
    expect = tuple(profile_value) if isinstance(profile_value, list) else profile_value
    assert value == expect
    assert getattr(resolve_policy({name: None}, overrides), name) == expect
    assert policy_sources({}, overrides)[name] == "profile"


def test_every_field_is_resolved_from_its_own_layers() -> None:
    """One field unset on the site does not stop the fields after it from resolving."""
    site = validate_policy({"erase_mode": "secure", "max_concurrent_workflows": 50})
    profile = validate_policy({"auto_claim_new": True, "deploy_retry_limit": 0})
    policy = resolve_policy(site, profile)
    assert (policy.erase_mode, policy.max_concurrent_workflows) == ("secure", 50)
    assert (policy.auto_claim_new, policy.deploy_retry_limit) == (True, 0)
    assert policy.commission_scripts == ()


NAMES_ONLY = "(names only, never script content)."
NOT_SCRIPT = f"Not a script name {NAMES_ONLY}"
TOO_LONG = "The value of 'd' must be a string of at most 256 characters."
CONTROL = "The value of 'd' must not contain control characters."
NOT_SECONDS = "Timeout for 'deploy' must be an integer number of seconds."


def reason_for(name: str, value: Any) -> str:
    with pytest.raises(InvalidInput) as err:
        validate_policy({name: value})
    assert err.value.message == "Invalid policy."
    reasons = err.value.extra["fields"][f"policy.{name}"]
    assert len(reasons) == 1
    return str(reasons[0])


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("auto_claim_new", "yes", "Must be true or false."),
        ("deploy_retry_limit", True, "Must be an integer."),
        ("deploy_retry_limit", "2", "Must be an integer."),
        ("deploy_retry_limit", -1, "Must be between 0 and 5."),
        ("deploy_retry_limit", 6, "Must be between 0 and 5."),
        ("erase_stuck_seconds", 59, "Must be between 60 and 86400."),
        ("erase_mode", 1, "Must be a string."),
        ("erase_mode", "shred", "Must be one of: none, quick, secure."),
        ("bootstrap_bundle_version", "1" * 65, "At most 64 characters."),
        ("bootstrap_bundle_digest", "a" * 513, "At most 512 characters."),
        ("reachability_script", "x; rm -rf /", NOT_SCRIPT),
        ("commission_scripts", "fw-check", "Must be a list of strings."),
        ("commission_scripts", ["fw-check", 3], "Must be a list of strings."),
        ("commission_scripts", ["fw"] * 33, "At most 32 entries."),
        ("commission_scripts", ["fw", "a b"], f"Not a script name: 'a b' {NAMES_ONLY}"),
        ("acceptance_parameters", [], "Must be an object of names to strings."),
        ("acceptance_parameters", {f"p{i}": "1" for i in range(33)}, "At most 32 entries."),
        ("acceptance_parameters", {"d": "x" * 257}, TOO_LONG),
        ("acceptance_parameters", {"d": "a\x1fb"}, CONTROL),
        ("acceptance_parameters", {"d": "a\x7fb"}, CONTROL),
        ("acceptance_parameters", {"d": "a\nb"}, CONTROL),
        ("stage_timeouts", [], "Must be an object of stage name to seconds."),
        ("stage_timeouts", {"deploy": True}, NOT_SECONDS),
        ("stage_timeouts", {"deploy": 9}, "Timeout for 'deploy' must be 10..86400s."),
        ("stage_timeouts", {"deploy": 86401}, "Timeout for 'deploy' must be 10..86400s."),
    ],
)  # fmt: skip
def test_a_refused_value_says_why(name: str, value: Any, reason: str) -> None:
    assert reason_for(name, value) == reason


def test_an_unknown_stage_names_the_known_ones() -> None:
    reason = reason_for("stage_timeouts", {"deploy": 60, "zzz": 60})
    from maas_domain.policy import _catalogue

    known = sorted(_catalogue.keys())
    assert reason == f"Unknown stage 'zzz'; stages are: {', '.join(known)}."
    assert len(known) > 1


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("deploy_retry_limit", 0),
        ("deploy_retry_limit", 5),
        ("erase_stuck_seconds", 60),
        ("erase_stuck_seconds", 86400),
        ("bootstrap_bundle_version", "1" * 64),
        ("commission_scripts", ["fw"] * 32),
        ("acceptance_parameters", {f"p{i}": "1" for i in range(32)}),
        ("acceptance_parameters", {"d": "x" * 256}),
        ("acceptance_parameters", {"d": "a b~\x80"}),
        ("stage_timeouts", {"deploy": 10, "commission": 86400}),
    ],
)
def test_a_value_at_the_limit_is_accepted(name: str, value: Any) -> None:
    assert validate_policy({name: value}) == {name: value}


def test_the_length_limit_comes_before_the_pattern() -> None:
    # 512 characters: the length is fine, the digest is not
    assert reason_for("bootstrap_bundle_digest", "a" * 512) != "At most 512 characters."


def test_a_policy_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidInput) as err:
        validate_policy(["erase_mode"], field_name="policy_overrides")
    assert err.value.message == "Invalid policy."
    assert err.value.extra["fields"] == {"policy_overrides": ["Must be an object."]}


def test_every_mistake_in_a_patch_is_reported_at_once() -> None:
    with pytest.raises(InvalidInput) as err:
        validate_policy(
            {"retry_forever": True, "erase_mode": None, "deploy_retry_limit": 9, "x": 1},
            field_name="policy_overrides",
        )
    assert err.value.extra["fields"] == {
        "policy_overrides.retry_forever": ["Unknown policy field."],
        "policy_overrides.deploy_retry_limit": ["Must be between 0 and 5."],
        "policy_overrides.x": ["Unknown policy field."],
    }


def test_an_unset_key_does_not_end_the_patch() -> None:
    assert validate_policy({"erase_mode": None, "deploy_retry_limit": 2}) == {
        "erase_mode": None,
        "deploy_retry_limit": 2,
    }


def test_unsetting_a_key_that_was_never_set_is_harmless() -> None:
    assert merge_policy({"erase_mode": "secure"}, {"deploy_retry_limit": None}) == {
        "erase_mode": "secure"
    }


@pytest.mark.parametrize("missing", ["bootstrap_bundle_version", "bootstrap_bundle_digest"])
def test_a_bundle_reference_needs_both_its_version_and_its_digest(missing: str) -> None:
    keys = {
        "bootstrap_bundle_ref": "https://b.test/x",
        "bootstrap_bundle_version": "1.0",
        "bootstrap_bundle_digest": "sha256:" + "a" * 64,
    }
    assert merge_policy({}, validate_policy(keys)) == keys
    del keys[missing]
    with pytest.raises(InvalidInput) as err:
        merge_policy({}, validate_policy(keys))
    assert err.value.message == "Invalid policy."
    assert err.value.extra["fields"] == {
        "policy.bootstrap_bundle_ref": [
            "A bundle reference needs bootstrap_bundle_version and bootstrap_bundle_digest."
        ]
    }


def test_every_field_is_documented() -> None:
    """The API docs show each field's doc (the policy schema)."""
    for name, f in POLICY_FIELDS.items():
        assert f.metadata["doc"], name


def test_the_stage_catalogue_is_what_the_engine_supplies() -> None:
    from maas_domain import policy as module

    saved = (module._catalogue.keys, module._catalogue.effective)
    try:
        module.use_stage_catalogue(lambda: {"only": 60}, lambda p: {"only": 61})
        assert validate_policy({"stage_timeouts": {"only": 90}}) == {"stage_timeouts": {"only": 90}}
        assert reason_for("stage_timeouts", {"deploy": 90}).startswith("Unknown stage 'deploy'")
        assert Policy().as_dict()["stage_timeouts"] == {"only": 61}
    finally:
        module.use_stage_catalogue(*saved)
