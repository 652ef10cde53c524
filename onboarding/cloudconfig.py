"""The first-boot cloud-config, built as data and written by a YAML library (docs/security.md).

Nothing here is a text template. The document has exactly two keys, ``write_files`` and
``runcmd``. Every value an operator can influence (URLs, versions, the digest, the hostname, CA
material, RoCE addresses) is the *content of a file*; the commands are fixed argv lists that run
two fixed scripts (``templates/firstboot/site-bundle.sh`` then ``node-agent.sh``, copied
verbatim; both report their outcome with the fixed ``report.sh``), which read the values from
those files. So no value is ever in a command position,
whatever it contains.

``render`` checks every value first (the same rules as the write paths: a row written before
those rules existed is refused here), dumps with ``yaml.safe_dump``, parses the text back and
refuses to return it unless it equals the intended document exactly.

The node-agent bootstrap script the node then downloads from the control plane
(``agent_bootstrap``, served at ``/api/v1/node/agent/<version>/bootstrap.sh``) runs as root: the
payload pins its SHA-256, and ``node-agent.sh`` refuses to run bytes with another digest.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from django.conf import settings
from django.template.loader import render_to_string

from maas_domain import urlsafety
from maas_domain.urlsafety import UrlRules
from maas_domain.validators import (
    digest_error,
    hostname_error,
    interface_error,
    ipv4_cidr_error,
    version_error,
)

AGENT_CONFIG = "/etc/gpuaas/node-agent.yaml"  # for the node agent itself (a YAML reader)
# One file per value for the first-boot scripts, read with ``cat``: YAML would quote a hostname
# such as 1001, 0123, on or null, and a script that strips YAML by hand would send the quotes.
NODE_DIR = "/etc/gpuaas/node"
SECRET_VALUES = frozenset({"enrollment_token", "bootstrap_token"})
CA_FILE = "/etc/gpuaas/ca.pem"
ROCE_FILE = "/etc/gpuaas/roce.yaml"
BUNDLE_DIR = "/etc/gpuaas/site-bundle"
AGENT_DIR = "/etc/gpuaas/agent-bootstrap"
SCRIPT_DIR = "/usr/local/lib/gpuaas"
BUNDLE_SCRIPT = f"{SCRIPT_DIR}/site-bundle.sh"
AGENT_SCRIPT = f"{SCRIPT_DIR}/node-agent.sh"
REPORT_SCRIPT = f"{SCRIPT_DIR}/report.sh"
KEYS = frozenset({"write_files", "runcmd"})
_TEMPLATES = Path(settings.BASE_DIR) / "templates" / "firstboot"
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,128}")
_PEM = re.compile(r"[\x20-\x7e\n]*")


@functools.cache
def _script(name: str) -> str:
    """A fixed first-boot script, read once per process (they ship with the code)."""
    return (_TEMPLATES / name).read_text()


@functools.cache
def agent_bootstrap(version: str) -> bytes:
    """The node-agent bootstrap script of ``version`` (a checked version string), as the node
    route serves it and as the payload pins it (``agent_sha256``)."""
    return render_to_string("firstboot/agent-bootstrap.sh", {"agent_version": version}).encode()


class PayloadRefused(ValueError):
    """A value may not go into a node's first-boot payload; ``field`` names it."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class Bundle:
    url: str
    version: str
    sha256: str  # hex, without the sha256: prefix


@dataclass(frozen=True)
class FirstBoot:
    """Everything one attempt's payload carries."""

    onboarding_id: int
    attempt: int
    hostname: str
    node_api_url: str
    agent_version: str
    enrollment_token: str
    bootstrap_token: str
    bundle: Bundle | None = None
    ca_pem: str = ""
    roce: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:  # the tokens stay out of tracebacks and logs
        return f"FirstBoot(onboarding_id={self.onboarding_id}, attempt={self.attempt}, …)"

    @property
    def enroll_url(self) -> str:
        return f"{self.node_api_url}/api/v1/node/enroll"

    @property
    def report_url(self) -> str:
        return f"{self.node_api_url}/api/v1/node/report"

    @property
    def checkin_url(self) -> str:
        return f"{self.node_api_url}/api/v1/node/checkin"

    @property
    def agent_script_url(self) -> str:
        return f"{self.node_api_url}/api/v1/node/agent/{self.agent_version}/bootstrap.sh"

    @property
    def agent_sha256(self) -> str:
        return hashlib.sha256(agent_bootstrap(self.agent_version)).hexdigest()


def problems(fb: FirstBoot, *, node_rules: UrlRules, bundle_rules: UrlRules) -> list[str]:
    """Every reason this payload must not be rendered (empty: it may)."""
    found: list[tuple[str, str | None]] = [
        ("hostname", hostname_error(fb.hostname)),
        ("node_api_url", urlsafety.check(fb.node_api_url, node_rules)),
        ("agent_version", version_error(fb.agent_version)),
    ]
    if not found[1][1]:
        if urlsplit(fb.node_api_url).query:
            found.append(("node_api_url", "a base URL takes no query"))
        found.append(("agent_script_url", urlsafety.check(fb.agent_script_url, node_rules)))
    tokens = (("enrollment_token", fb.enrollment_token), ("bootstrap_token", fb.bootstrap_token))
    for name, token in tokens:
        if not _TOKEN.fullmatch(token):
            found.append((name, "not a token this control plane mints"))
    if fb.bundle is not None:
        found += [
            ("bootstrap_bundle_ref", urlsafety.check(fb.bundle.url, bundle_rules)),
            ("bootstrap_bundle_version", version_error(fb.bundle.version)),
            ("bootstrap_bundle_digest", digest_error("sha256:" + fb.bundle.sha256)),
        ]
    if not _PEM.fullmatch(fb.ca_pem):
        found.append(("ca_bundle_pem", "CA material must be printable ASCII PEM text"))
    for interface, cidr in fb.roce:
        found += [("roce.interface", interface_error(interface)), ("roce", ipv4_cidr_error(cidr))]
    return [f"{name}: {reason}" for name, reason in found if reason]


def _file(path: str, content: str, permissions: str = "0644") -> dict[str, str]:
    return {"path": path, "permissions": permissions, "content": content}


# libyaml's safe dumper and loader when PyYAML has them: the pure-Python ones were a fifth of a
# worker's CPU in an onboarding burst (docs/benchmarks.md). Same YAML subset, same safety.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml(data: Any) -> str:
    return yaml.dump(
        data, Dumper=_DUMPER, default_flow_style=False, sort_keys=False, allow_unicode=False
    )


def document(fb: FirstBoot) -> dict[str, Any]:
    """The intended cloud-config as data."""
    agent = {
        "control_plane_url": fb.node_api_url,
        "enroll_url": fb.enroll_url,
        "onboarding_id": fb.onboarding_id,
        "attempt": fb.attempt,
        "hostname": fb.hostname,
        "enrollment_token": fb.enrollment_token,
        "bootstrap_token": fb.bootstrap_token,
        "agent_bootstrap_version": fb.agent_version,
        # the node reports its bundle and agent start apart from enrollment, and a running
        # agent checks in (docs/onboarding.md, "First boot and the completion gates")
        "report_url": fb.report_url,
        "checkin_url": fb.checkin_url,
        "site_bundle_version": fb.bundle.version if fb.bundle is not None else "",
    }
    files = [
        _file(AGENT_CONFIG, _yaml(agent), "0600"),
        *(
            _file(f"{NODE_DIR}/{name}", f"{value}\n", "0600" if name in SECRET_VALUES else "0644")
            for name, value in agent.items()
        ),
        _file(REPORT_SCRIPT, _script("report.sh"), "0755"),
    ]
    if fb.ca_pem:
        files.append(_file(CA_FILE, fb.ca_pem.strip() + "\n"))
    if fb.roce:
        interfaces = [{"interface": i, "address": cidr} for i, cidr in fb.roce]
        files.append(_file(ROCE_FILE, _yaml({"interfaces": interfaces})))
    runcmd: list[list[str]] = []
    if fb.bundle is not None:
        files += [
            _file(f"{BUNDLE_DIR}/url", fb.bundle.url + "\n", "0600"),
            _file(f"{BUNDLE_DIR}/version", fb.bundle.version + "\n"),
            _file(f"{BUNDLE_DIR}/sha256", fb.bundle.sha256 + "\n"),
            _file(BUNDLE_SCRIPT, _script("site-bundle.sh"), "0755"),
        ]
        runcmd.append(["/bin/sh", BUNDLE_SCRIPT])
    files += [
        _file(f"{AGENT_DIR}/url", fb.agent_script_url + "\n"),
        _file(f"{AGENT_DIR}/version", fb.agent_version + "\n"),
        _file(f"{AGENT_DIR}/sha256", fb.agent_sha256 + "\n"),
        _file(AGENT_SCRIPT, _script("node-agent.sh"), "0755"),
    ]
    runcmd.append(["/bin/sh", AGENT_SCRIPT])
    return {"write_files": files, "runcmd": runcmd}


def render(fb: FirstBoot, *, node_rules: UrlRules, bundle_rules: UrlRules) -> bytes:
    """The user data for MAAS: checked values, dumped as YAML, parsed back and compared."""
    if found := problems(fb, node_rules=node_rules, bundle_rules=bundle_rules):
        field, _, reason = found[0].partition(": ")
        raise PayloadRefused(field, reason)
    intended = document(fb)
    header = (
        "#cloud-config\n"
        f"# Rendered by the MAAS control plane: onboarding {int(fb.onboarding_id)}, attempt "
        f"{int(fb.attempt)}. Values are data files; the commands never change.\n"
    )
    text = header + _yaml(intended)
    parsed = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    if not isinstance(parsed, dict) or set(parsed) != KEYS or parsed != intended:
        raise PayloadRefused("payload", "the rendered document does not match its structure")
    return text.encode("ascii")
