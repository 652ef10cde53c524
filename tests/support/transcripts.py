"""The recorded MAAS 3.5.10 exchanges (tests/data/maas-transcripts/, its README says how they were
made) replayed against a fresh simulator, and the answers compared once normalised
(docs/simulator.md, "Known differences from MAAS 3.5").

One scenario at a time, in order: each recorded request is sent to the simulator with the
recorded region's ids replaced by the simulator's (``Ids``: the one place that maps values that
vary between runs), each answer is compared with the recorded one (status, content type, the
headers that matter, the text of a text answer, the JSON's shape, the values that carry
meaning, and the machine's state after each mutation), and each node-side note (the recorded
machine commissioning, testing, deploying, erasing) is played by the simulator's own controls:
the recorded box's hardware, its faults, and the clock moved on.

A difference is ``Difference(scenario, step, key, recorded, simulated)``; its ``key`` names the
category and where (``status 503/200``, ``text``, ``shape $.interface_set[].params type
dict/str``, ``value $.status_name``, ``state $.owner``), which is what the known-differences
table matches.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import oauthlib.oauth1
import requests

from maas_simulator import scenario as sim_scenario
from maas_simulator.model import Simulator
from maas_simulator.server import SimulatorServer
from tests.support.maas import API_KEY, Sim, b64_multipart

CORPUS = Path(__file__).resolve().parents[1] / "data" / "maas-transcripts"
SCENARIOS = ("onboarding-sequence", "errors", "listings", "site-reads")
KNOWN = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"
API = "/MAAS/api/2.0/"

OPERATOR_KEY = "OperatorConsumer12:OperatorTokenKey12:OperatorTokenSecret0123456789ab"

# The recorded region as its seed left it (the corpus README, "What answered"): one fabric, its
# untagged VLAN without DHCP, the PXE subnet step 1 of every scenario creates (no gateway), the
# jammy and noble amd64 images, and the non-admin user errors.jsonl creates at its step 137.
REGION: dict[str, Any] = {
    "users": [
        {
            "username": "admin",
            "is_superuser": True,
            "email": "admin@example.com",
            "api_key": API_KEY,
        },
        {
            "username": "operator",
            "is_superuser": False,
            "email": "op@example.com",
            "api_key": OPERATOR_KEY,
        },
    ],
    "fabrics": [{"id": 0, "name": "fabric-0"}],
    "vlans": [{"id": 1, "fabric_id": 0, "vid": 0, "dhcp_on": False, "primary_rack": None}],
    "subnets": [{"id": 1, "name": "pxe", "cidr": "10.20.0.0/16", "vlan_id": 1, "gateway_ip": None}],
    "boot_resources": [
        {"name": "ubuntu/jammy", "architecture": "amd64/ga-22.04"},
        {"name": "ubuntu/jammy", "architecture": "amd64/hwe-22.04"},
        {"name": "ubuntu/noble", "architecture": "amd64/ga-24.04"},
        {"name": "ubuntu/noble", "architecture": "amd64/hwe-24.04"},
    ],
    "rack_controller": False,  # the recorded region had none: manual power only
    "config": {  # what the recorder's seed set (the corpus README)
        "maas_name": "vm",
        "default_distro_series": "jammy",
        "commissioning_distro_series": "jammy",
        "boot_images_auto_import": False,
        "network_discovery": "disabled",
        "completed_intro": True,
        "enable_analytics": False,
    },
}

# The synthetic box the recorder's fake node reported (the corpus README, "The machine's side"):
# a Dell PowerEdge XE9680, 8 threads, 512 GiB, two 3.84 TB Samsung NVMe drives, one Mellanox
# port named enp1s0, eight H100 SXM5 on NUMA node 0.
BOX: dict[str, Any] = {
    "bios_boot_method": None,  # the fake node reported none: no EFI partition in the layouts
    "cpu_count": 8,
    "memory": 512 * 1024,
    "numa_nodes": 1,
    "gpus": {"count": 8, "numa_nodes": [0] * 8},
    "bmc_vga": False,
    "nvswitches": 0,
    "hardware_info": {
        "system_vendor": "Dell Inc.",
        "system_product": "PowerEdge XE9680",
        "system_family": "PowerEdge",
        "system_sku": "SKU=0ABC",
        "system_serial": "ABC1234",
        "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
        "mainboard_vendor": "Dell Inc.",
        "mainboard_product": "0ABCDE",
        "mainboard_serial": "CN1234",
        "mainboard_version": "A00",
        "mainboard_firmware_vendor": "Dell Inc.",
        "mainboard_firmware_date": "01/01/2024",
        "mainboard_firmware_version": "1.2.3",
        "chassis_vendor": "Dell Inc.",
        "chassis_type": "Rack Mount Chassis",
        "chassis_serial": "ABC1234",
    },
    "disks": [
        {
            "name": f"nvme{n}n1",
            "size": 3840000000000,
            "model": "SAMSUNG MZQL23T8HCLS-00A07",
            "serial": f"S64HNE0T00000{n}",
            "firmware_version": "GDC5602Q",
            "tags": ["ssd"],
        }
        for n in range(2)
    ],
}
NIC = {
    "name": "enp1s0",
    "vendor": "Mellanox Technologies",
    "product": "MT2894 Family [ConnectX-6 Lx]",
    "firmware_version": "1.63, 0x800009fa",
    "speed": 10000,
}
NODE_SIDE_SECONDS = 600.0  # MAAS seconds a node-side action is given (the slowest is an erase)


def load(name: str) -> list[dict[str, Any]]:
    with gzip.open(CORPUS / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@dataclass(frozen=True)
class Difference:
    scenario: str
    step: int
    key: str
    recorded: str = ""
    simulated: str = ""

    def __str__(self) -> str:
        where = f"{self.scenario}:{self.step} {self.key}"
        return f"{where}  (MAAS: {self.recorded}; simulator: {self.simulated})"


# -- values that vary between runs --------------------------------------------------------------

SYSTEM_ID = re.compile(r"^[a-z0-9]{6}$")
URI_ID = re.compile(r"/([a-z-]+)/(\d+)/?$")
PATH_KINDS = {  # a numeric path segment after these names is an id of that kind
    "interfaces": "interfaces",
    "blockdevices": "blockdevices",
    "partition": "partition",
    "partitions": "partition",
    "results": "results",
    "volume-group": "volume-group",
    "volume-groups": "volume-group",
    "subnets": "subnets",
    "sshkeys": "sshkeys",
    "dnsresources": "dnsresources",
    "ipranges": "ipranges",
    "static-routes": "static-routes",
}
FIELD_KINDS = {  # a form or query field whose value is an id of that kind
    "subnet": "subnets",
    "vlan": "vlans",
    "parent": "interfaces",
    "parents": "interfaces",
    "root_device": "blockdevices",
    "before": "events",
    "after": "events",
}


class Ids:
    """Recorded value → the simulator's, for everything that varies between runs: system ids,
    numeric ids by kind (learned by walking a recorded answer beside the simulator's), token
    keys, event ids (matched by node, type and description)."""

    def __init__(self) -> None:
        self.system_ids: dict[str, str] = {}
        self.numbers: dict[tuple[str, int], int] = {}
        self.tokens: dict[str, dict[str, str]] = {}  # recorded token key → the simulator's

    def learn(self, kind: str, recorded: Any, simulated: Any) -> None:
        if isinstance(recorded, int) and isinstance(simulated, int):
            self.numbers[(kind, recorded)] = simulated

    def sid(self, value: str) -> str:
        return self.system_ids.get(value, value)

    def number(self, kind: str, value: str) -> str:
        if not value.lstrip("-").isdigit():
            return self.sid(value)
        return str(self.numbers.get((kind, int(value)), value))

    def path(self, path: str) -> str:
        parts = path.split("/")
        out = []
        for i, part in enumerate(parts):
            before = parts[i - 1] if i else ""
            if part in self.system_ids:
                out.append(self.system_ids[part])
            elif part.isdigit() and before in PATH_KINDS:
                out.append(self.number(PATH_KINDS[before], part))
            elif part.isdigit() and before == "devices" and "/nodes/" in path:
                out.append(self.number("devices", part))
            elif part.isdigit() and before == "vlans" and i >= 2 and parts[i - 2] == "2.0":
                out.append(self.number("vlans", part))
            else:
                out.append(part)
        return "/".join(out)

    def value(self, name: str, value: str, op: str | None) -> str:
        if name == "id" and op == "unlink_subnet":
            return self.number("links", value)
        if name == "token_key" and value in self.tokens:
            return self.tokens[value]["token_key"]
        if name in FIELD_KINDS:
            return self.number(FIELD_KINDS[name], value)
        return self.sid(value)

    def text(self, recorded: str) -> str:
        """A recorded text with the recorded ids written as the simulator's."""
        for rec, sim in self.system_ids.items():
            recorded = recorded.replace(f"%2F{rec}%2F", f"%2F{sim}%2F")  # inside a base string
            recorded = re.sub(rf"\b{re.escape(rec)}\b", sim, recorded)
        for rec, tok in self.tokens.items():
            recorded = recorded.replace(rec, tok["token_key"])
        return recorded


def kind_of(obj: dict[str, Any], parent: str) -> str:
    """An object's id space: from its ``resource_uri`` (``…/interfaces/3/`` → interfaces), else
    the key that holds it (a link in ``links``, a result in ``results``)."""
    uri = obj.get("resource_uri")
    if isinstance(uri, str):
        found = URI_ID.search(uri)
        if found:
            return found[1]
    return {"links": "links", "results": "scriptresults", "events": "events"}.get(parent, parent)


def learn(ids: Ids, rec: Any, sim: Any, parent: str = "$") -> None:
    """Walk a recorded answer beside the simulator's and learn the ids they give one thing."""
    if isinstance(rec, dict) and isinstance(sim, dict):
        if isinstance(rec.get("system_id"), str) and isinstance(sim.get("system_id"), str):
            ids.system_ids.setdefault(rec["system_id"], sim["system_id"])
        if "id" in rec and "id" in sim and parent != "events":
            ids.learn(kind_of(rec, parent), rec["id"], sim["id"])
        for key in rec.keys() & sim.keys():
            learn(ids, rec[key], sim[key], key)
    elif isinstance(rec, list) and isinstance(sim, list):
        for r, s in zip(rec, sim, strict=False):
            learn(ids, r, s, parent)


def learn_events(ids: Ids, rec: list[dict[str, Any]], sim: list[dict[str, Any]]) -> None:
    """Event ids: a recorded event is the simulator's of the same node, type and description."""
    free = list(sim)
    for event in rec:
        key = (ids.sid(event["node"]), event["type"], event["description"])
        match = next((e for e in free if (e["node"], e["type"], e["description"]) == key), None)
        if match is not None:
            free.remove(match)
            ids.learn("events", event["id"], match["id"])


# -- comparing answers ---------------------------------------------------------------------------

VOLATILE_TEXT = [
    (re.compile(r"127\.0\.0\.1(%3A|:)\d+"), "HOST"),
    (re.compile(r"oauth_(nonce|timestamp|consumer_key|token)%3D[^%&]+"), r"oauth_\1%3DX"),
    (re.compile(r"\b\d{9,}(\.\d+)?\b"), "N"),
    (re.compile(r"-nonce[\w.-]*"), "-NONCE"),
]


def normal_text(text: str) -> str:
    for pattern, replacement in VOLATILE_TEXT:
        text = pattern.sub(replacement, text)
    return text.strip()


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    return {int: "int", float: "float", str: "str", list: "list", dict: "dict"}[type(value)]


def schema(value: Any, path: str, out: dict[str, set[str]], sids: set[str]) -> None:
    """Every path of a JSON value with the types found there (``[]`` for any list element, a
    system id key as ``{sid}``, a numeric key as ``{n}``)."""
    out.setdefault(path, set()).add(json_type(value))
    if isinstance(value, dict):
        for key, item in value.items():
            name = "{sid}" if key in sids else ("{n}" if key.isdigit() else key)
            schema(item, f"{path}.{name}", out, sids)
    elif isinstance(value, list):
        for item in value:
            schema(item, f"{path}[]", out, sids)


def parent_of(path: str) -> str:
    if path.endswith("[]"):
        return path[:-2]
    return path.rsplit(".", 1)[0]


def shape_differences(rec: Any, sim: Any, ids: Ids) -> list[tuple[str, str, str]]:
    recorded: dict[str, set[str]] = {}
    simulated: dict[str, set[str]] = {}
    schema(rec, "$", recorded, set(ids.system_ids))
    schema(sim, "$", simulated, set(ids.system_ids.values()))
    found: list[tuple[str, str, str]] = []
    reported: set[str] = set()

    def under_reported(path: str) -> bool:
        return any(path.startswith(r) and path[len(r)] in ".[" for r in reported if r != path)

    for path in sorted(recorded.keys() | simulated.keys()):
        if under_reported(path):
            continue
        r, s = recorded.get(path), simulated.get(path)
        if r is None or s is None:
            # only where that side had the object that lacks it (an empty list, or null where
            # the other side has an object, is a value, not a shape)
            lacking = recorded if r is None else simulated
            if path.endswith("[]") or "dict" not in lacking.get(parent_of(path), set()):
                continue
            found.append((f"shape {path} {'extra' if r is None else 'missing'}", "", ""))
            reported.add(path)
            continue
        rn, sn = r - {"null"}, s - {"null"}
        if rn and sn and rn != sn:
            types = f"{'+'.join(sorted(rn))}/{'+'.join(sorted(sn))}"
            found.append((f"shape {path} type {types}", "", ""))
            reported.add(path)
    return found


# What carries meaning in each kind of object (the rest is compared by shape only).
MACHINE_FIELDS = (
    "hostname",
    "status",
    "status_name",
    "power_state",
    "power_type",
    "owner",
    "osystem",
    "distro_series",
    "hwe_kernel",
    "locked",
    "netboot",
    "enable_hw_sync",
    "cpu_count",
    "memory",
    "architecture",
    "commissioning_status_name",
    "testing_status_name",
    "storage_test_status_name",
    "error_description",
    "tag_names",
    "workload_annotations",
)


def machine_meaning(m: dict[str, Any]) -> dict[str, Any]:
    out = {k: m.get(k) for k in MACHINE_FIELDS}
    out["zone"] = (m.get("zone") or {}).get("name")
    out["pool"] = (m.get("pool") or {}).get("name")
    out["disks"] = len(m.get("physicalblockdevice_set") or [])
    out["interfaces"] = len(m.get("interface_set") or [])
    boot = m.get("boot_interface")
    out["boot_interface"] = interface_meaning(boot) if isinstance(boot, dict) else None
    out["layout"] = [layout_meaning(d) for d in m.get("blockdevice_set") or []]
    out["volume_groups"] = len(m.get("volume_groups") or [])
    out["hardware"] = {
        k: (m.get("hardware_info") or {}).get(k) for k in ("system_vendor", "system_product")
    }
    out["numa_nodes"] = len(m.get("numanode_set") or [])
    for name in ("current_installation_result_id", "current_testing_result_id"):
        out[name.replace("_id", "")] = m.get(name) is not None
    return out


def layout_meaning(d: dict[str, Any]) -> dict[str, Any]:
    fs = d.get("filesystem") or {}
    return {
        "name": d.get("name"),
        "type": d.get("type"),
        "partitions": [
            (
                (p.get("filesystem") or {}).get("fstype"),
                (p.get("filesystem") or {}).get("mount_point"),
            )
            for p in d.get("partitions") or []
        ],
        "filesystem": (fs.get("fstype"), fs.get("mount_point")) if fs else None,
    }


def interface_meaning(i: dict[str, Any]) -> dict[str, Any]:
    vlan = i.get("vlan") or {}
    return {
        "name": i.get("name"),
        "type": i.get("type"),
        "mac_address": i.get("mac_address"),
        "vlan": vlan.get("vid") if vlan else None,
        "links": sorted(
            (lk.get("mode"), (lk.get("subnet") or {}).get("cidr"), "ip_address" in lk)
            for lk in i.get("links") or []
        ),
        "enabled": i.get("enabled"),
        "link_connected": i.get("link_connected"),
        "vendor": i.get("vendor"),
        "product": i.get("product"),
        "parents": i.get("parents"),
        "children": i.get("children"),
    }


def blockdevice_meaning(d: dict[str, Any]) -> dict[str, Any]:
    return {
        **layout_meaning(d),
        **{k: d.get(k) for k in ("size", "model", "serial", "tags", "id_path", "used_for")},
    }


def node_device_meaning(d: dict[str, Any]) -> dict[str, Any]:
    return {
        **{
            k: d.get(k)
            for k in (
                "hardware_type_name",
                "vendor_id",
                "product_id",
                "vendor_name",
                "product_name",
                "bus_name",
                "numa_node",
                "commissioning_driver",
                "pci_address",
            )
        },
        "physical_interface": (d.get("physical_interface") or {}).get("name")
        if isinstance(d.get("physical_interface"), dict)
        else d.get("physical_interface") is not None,
        "physical_blockdevice": d.get("physical_blockdevice") is not None,
    }


def script_set_meaning(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "type_name": s.get("type_name"),
        "status_name": s.get("status_name"),
        "results": sorted(
            (
                r.get("name"),
                r.get("status_name"),
                r.get("exit_status"),
                bool(r.get("output")) if "output" in r else None,
            )
            for r in s.get("results") or []
        ),
    }


def script_meaning(s: dict[str, Any]) -> dict[str, Any]:
    return {
        **{
            k: s.get(k)
            for k in (
                "name",
                "type_name",
                "hardware_type_name",
                "destructive",
                "parallel_name",
                "timeout",
            )
        },
        "tags": sorted(s.get("tags") or []),
        "parameters": sorted((k, v.get("type")) for k, v in (s.get("parameters") or {}).items()),
    }


def events_meaning(page: dict[str, Any], ids: Ids, query: dict[str, str]) -> dict[str, Any]:
    events = page.get("events") or []
    limit = int(query["limit"]) if query.get("limit", "").lstrip("-").isdigit() else 100
    count = page.get("count", 0)
    return {
        "nodes": sorted({ids.sid(e["node"]) for e in events}),
        "levels": sorted({e["level"] for e in events}),
        "count": "limit"
        if count == max(min(limit, 1000), 1)
        else ("none" if count == 0 else "some"),
        "prev_uri": page.get("prev_uri") is None,
    }


def is_script_set(value: Any) -> bool:
    return isinstance(value, dict) and bool(
        re.search(r"/results/\d+/$", str(value.get("resource_uri", "")))
    )


def meaning(value: Any, path: str, ids: Ids, query: dict[str, str]) -> Any:
    """The values that carry meaning, by the kind of object (an unknown kind: none)."""
    if isinstance(value, list):
        if value and all(is_script_set(v) for v in value):
            # MAAS lists a machine's runs without an ORDER BY (ScriptSet has no ordering): the
            # database's order, which changes once rows are deleted. Compared oldest first.
            value = sorted(value, key=lambda v: int(v.get("id") or 0))
        return [meaning(v, path, ids, query) for v in value]
    if not isinstance(value, dict):
        return value
    uri = str(value.get("resource_uri", ""))
    if value.get("node_type_name") == "Machine" or "/machines/" in uri:
        return machine_meaning(value)
    if "events" in value and "next_uri" in value:
        return events_meaning(value, ids, query)
    if re.search(r"/interfaces/\d+/$", uri):
        return interface_meaning(value)
    if re.search(r"/blockdevices/\d+/$", uri):
        return blockdevice_meaning(value)
    if re.search(r"/nodes/[^/]+/devices/\d+/$", uri):
        return node_device_meaning(value)
    if is_script_set(value):
        return script_set_meaning(value)
    if re.search(r"/scripts/[^/]+$", uri):
        return script_meaning(value)
    if "/subnets/" in uri:
        return {
            **{k: value.get(k) for k in ("name", "cidr", "gateway_ip", "managed", "dns_servers")},
            "vlan": (value.get("vlan") or {}).get("vid"),
        }
    if "/vlans/" in uri:
        return {
            k: value.get(k)
            for k in ("vid", "name", "mtu", "dhcp_on", "fabric", "primary_rack", "space")
        }
    if "/users/" in uri:
        return {k: value.get(k) for k in ("username", "is_superuser", "email")}
    return {
        k: v
        for k, v in value.items()
        if not isinstance(v, dict | list) and k not in VOLATILE_KEYS and json_type(v) != "float"
    }


VOLATILE_KEYS = {
    "id",
    "resource_uri",
    "created",
    "updated",
    "last_sync",
    "next_sync",
    "started",
    "ended",
    "last_ping",
    "runtime",
    "starttime",
    "endtime",
    "system_id",
    "token_key",
    "token_secret",
    "consumer_key",
    "uuid",
    "hash",
    "key",
    "fingerprint",
    "doc",
    "uri",
    "token",
}


def value_differences(
    rec: Any, sim: Any, path: str, category: str, out: list[tuple[str, str, str]]
) -> None:
    if isinstance(rec, dict) and isinstance(sim, dict):
        for key in rec.keys() & sim.keys():
            value_differences(rec[key], sim[key], f"{path}.{key}", category, out)
        return
    if isinstance(rec, list) and isinstance(sim, list) and category != "list":
        if len(rec) != len(sim) and all(isinstance(x, dict) for x in rec + sim):
            out.append((f"{category} {path} count", str(len(rec)), str(len(sim))))
            return
        if all(isinstance(x, dict) for x in rec + sim):
            for r, s in zip(rec, sim, strict=False):
                value_differences(r, s, f"{path}[]", category, out)
            return
    if rec != sim:
        out.append((f"{category} {path}", short(rec), short(sim)))


def short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


def describe_meaning(doc: dict[str, Any]) -> dict[str, list[tuple[str, str | None]]]:
    return {
        h["name"]: sorted((a["method"], a["op"] or "") for a in h.get("actions") or [])
        for h in doc.get("handlers") or []
    }


# -- driving the simulator -----------------------------------------------------------------------


def oauth_header(
    key: str,
    *,
    method: str = "GET",
    url: str = "",
    hmac: bool = False,
    body: list[tuple[str, str]] | None = None,
    timestamp: int | None = None,
    nonce: str | None = None,
) -> str:
    ck, tk, ts = key.split(":")
    client = oauthlib.oauth1.Client(
        ck,
        client_secret="",
        resource_owner_key=tk,
        resource_owner_secret=ts,
        signature_method=oauthlib.oauth1.SIGNATURE_HMAC
        if hmac
        else oauthlib.oauth1.SIGNATURE_PLAINTEXT,
        realm="OAuth",
        timestamp=str(timestamp) if timestamp is not None else None,
        nonce=nonce,
    )
    headers = {"Content-Type": "application/x-www-form-urlencoded"} if body else {}
    _, signed, _ = client.sign(url, method, urlencode(body) if body else None, headers)
    return str(signed["Authorization"])


@dataclass
class Replay:
    """One scenario replayed on a fresh simulator; ``differences`` once ``run`` returns."""

    name: str
    scale: float = 0.001  # the clock moves only when told: node-side actions take no real time
    ids: Ids = field(default_factory=Ids)
    differences: list[Difference] = field(default_factory=list)
    minted: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        model = Simulator(scale=self.scale)
        region = dict(REGION)
        if self.name != "errors":  # errors.jsonl's setup step 137 creates the operator
            region["users"] = [u for u in REGION["users"] if u["username"] != "operator"]
        sim_scenario.load(model, region)
        self.sim = Sim(SimulatorServer(model).start())
        self.base = self.sim.url.rstrip("/").removesuffix("/MAAS")
        self.session = requests.Session()

    def close(self) -> None:
        self.session.close()
        self.sim.server.stop()

    def run(self) -> list[Difference]:
        lines = load(self.name)
        try:
            for n, line in enumerate(lines):
                if line["kind"] == "note" and "node_side" in line:
                    self.node_side(line["node_side"])
                elif line["kind"] == "exchange":
                    self.prepare_faults(line, lines[n + 1 :])
                    self.exchange(line)
        finally:
            self.close()
        return self.differences

    def prepare_faults(self, line: dict[str, Any], rest: list[dict[str, Any]]) -> None:
        """A node-side action that fails (a script exiting 1, a failed erase) is the machine's
        fault in the simulator, set before the request that starts it."""
        op = next((v for k, v in line["request"]["query"] if k == "op"), None)
        if line["request"]["method"] != "POST" or op not in ("test", "release"):
            return
        note = next(
            (x["node_side"] for x in rest if x["kind"] == "note" and "node_side" in x),
            None,
        )
        if note is None or note["system_id"] not in line["request"]["path"]:
            return
        args, sid = note.get("args") or {}, self.ids.sid(note["system_id"])
        if note["action"] == "test":
            faults = {"script_fails": list(args.get("fail") or ())}
            self.sim.post(
                f"machines/{sid}/faults", {**faults, "script_outputs": args.get("outputs") or {}}
            )
        if note["action"] == "erase" and args.get("fail"):
            state = requests.get(f"{self.sim.control}machines/{sid}", timeout=10).json()
            ordinal = state["counts"].get("release", 0) + 1
            self.sim.post(f"machines/{sid}/faults", {"erase_failure": [ordinal]})

    # -- the node side, as the simulator's controls play it -------------------------------------
    def node_side(self, note: dict[str, Any]) -> None:
        sid = self.ids.sid(note["system_id"])
        args = note.get("args") or {}
        if note["action"] == "commission":
            nic = {**NIC, "mac_address": args["mac"]}
            self.sim.post(f"machines/{sid}/hardware", {**BOX, "interfaces": [nic]})
        self.sim.advance(NODE_SIDE_SECONDS)

    # -- one exchange ------------------------------------------------------------------------------
    def exchange(self, line: dict[str, Any]) -> None:
        if line["role"] == "setup":
            return self.setup(line)
        response = self.send(line)
        self.compare(line, response)

    def setup(self, line: dict[str, Any]) -> None:
        """Preparation steps, played by the simulator's scenario controls (the PXE subnet and
        the operator are in ``REGION`` from the start)."""
        request, body = line["request"], line["response"]["body"]
        if request["path"] == API + "scripts/":
            self.sim.post(
                "scripts",
                {
                    "scripts": [
                        {
                            "name": body["name"],
                            "title": body["title"],
                            "description": body["description"],
                            "tags": body["tags"],
                            "hardware_type": body["hardware_type"],
                            "timeout": body["timeout"],
                            "parameters": body["parameters"],
                            "destructive": body["destructive"],
                            "parallel": body["parallel"],
                            **({"type": body["type"]} if body["type"] != 2 else {}),
                        }
                    ]
                },
            )

    def send(self, line: dict[str, Any]) -> requests.Response:
        request = line["request"]
        op = next((v for k, v in request["query"] if k == "op"), None)
        path = self.ids.path(request["path"])
        query = [(k, self.ids.value(k, v, op)) for k, v in request["query"]]
        form = [(k, self.ids.value(k, v, op)) for k, v in request["form"]]
        url = self.base + path
        headers: dict[str, str] = {}
        data: bytes | None = None
        encoding = request["encoding"] or ""
        if encoding.startswith("multipart"):
            data, headers["Content-Type"] = b64_multipart([(k, v.encode()) for k, v in form])
        elif encoding.startswith("application/x-www-form-urlencoded"):
            data = urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        full = url + (f"?{urlencode(query)}" if query else "")
        auth = self.authorization(line, request["method"], full, form, encoding)
        if auth is not None:
            headers["Authorization"] = auth
        return self.session.request(request["method"], full, data=data, headers=headers, timeout=30)

    def authorization(
        self,
        line: dict[str, Any],
        method: str,
        url: str,
        form: list[tuple[str, str]],
        encoding: str,
    ) -> str | None:
        auth = line["request"]["auth"] or {}
        label = line["label"]
        kind, who = auth.get("kind"), auth.get("key")
        if kind is None:
            return None
        if kind == "custom header":
            if "missing OAuth parameters" in label:
                return f'OAuth realm="OAuth", oauth_consumer_key="{API_KEY.split(":")[0]}"'
            return "Basic " + base64.b64encode(b"admin:not-a-real-password").decode()
        key = {"admin": API_KEY, "operator (non-admin)": OPERATOR_KEY}.get(who or "", API_KEY)
        ck, tk, ts = key.split(":")
        if who == "minted token":
            key = self.minted["key"]
        elif who == "admin (unknown consumer key)":
            key = f"XXXXXXXXXXXXXXXXXX:{tk}:{ts}"
        elif who == "admin (unknown token key)":
            key = f"{ck}:YYYYYYYYYYYYYYYYYY:{ts}"
        elif who == "admin (wrong secret)":
            key = f"{ck}:{tk}:WrongSecretWrongSecretWrongSecre"
        now = int(time.time())
        timestamp = {
            "expired timestamp (an hour old)": now - 3600,
            "timestamp an hour ahead": now + 3600,
        }.get(label)
        nonce = "replay-fixed-nonce" if "nonce" in label else None
        if kind == "HMAC-SHA1":
            if "wrong secret" in label:
                key = f"{ck}:{tk}:WrongSecretWrongSecretWrongSecre"
            in_base = (
                encoding.startswith("application/x-www-form") or "put in the base string" in label
            )
            return oauth_header(
                key, method=method, url=url, hmac=True, body=form if in_base and form else None
            )
        return oauth_header(key, timestamp=timestamp, nonce=nonce)

    # -- comparing ---------------------------------------------------------------------------------
    def differ(
        self, line: dict[str, Any], key: str, recorded: str = "", simulated: str = ""
    ) -> None:
        self.differences.append(Difference(self.name, line["step"], key, recorded, simulated))

    def compare(self, line: dict[str, Any], response: requests.Response) -> None:
        rec = line["response"]
        if rec["status"] != response.status_code:  # another answer altogether: nothing more
            self.differ(
                line,
                f"status {rec['status']}/{response.status_code}",
                "",
                short(response.text[:200]),
            )
            return
        content_type = response.headers.get("Content-Type", "")
        if rec["content_type"] != content_type:
            self.differ(line, "content-type", rec["content_type"], content_type)
        for header in ("Retry-After", "WWW-Authenticate", "Location"):
            r, s = rec["headers"].get(header), response.headers.get(header)
            if (r is None) != (s is None) or (header == "WWW-Authenticate" and r != s):
                self.differ(line, f"header {header}", str(r), str(s))
        if "Allow" in rec["headers"] or "Allow" in response.headers:
            r_allow = sorted(x.strip() for x in rec["headers"].get("Allow", "").split(","))
            s_allow = sorted(x.strip() for x in response.headers.get("Allow", "").split(","))
            if r_allow != s_allow:
                self.differ(line, "header Allow", str(r_allow), str(s_allow))
        if ("X-MAAS-API-Hash" in rec["headers"]) != ("X-MAAS-API-Hash" in response.headers):
            self.differ(line, "header X-MAAS-API-Hash", "", "")
        kind = rec["body_kind"]
        if kind == "json":
            try:
                body = response.json()
            except ValueError:
                self.differ(line, "body json/text", "", short(response.text[:200]))
                return
            self.compare_json(line, rec["body"], body)
        elif kind == "text":
            recorded = normal_text(self.ids.text(str(rec["body"])))
            simulated = normal_text(response.text)
            if recorded != simulated:
                self.differ(line, "text", short(recorded), short(simulated))
        elif kind == "empty" and response.content:
            self.differ(line, "body empty/content", "", short(response.text[:200]))

    def compare_json(self, line: dict[str, Any], rec: Any, sim: Any) -> None:
        request = line["request"]
        query = {k: v for k, v in request["query"]}
        if isinstance(rec, dict) and "events" in rec and isinstance(sim, dict) and "events" in sim:
            learn_events(self.ids, rec["events"], sim["events"])
        elif (
            isinstance(rec, dict)
            and "token_key" in rec
            and isinstance(sim, dict)
            and "token_key" in sim
        ):
            self.ids.tokens[rec["token_key"]] = sim
            self.minted = {"key": f"{sim['consumer_key']}:{sim['token_key']}:{sim['token_secret']}"}
        else:
            learn(self.ids, rec, sim)
        for key, r, s in shape_differences(rec, sim, self.ids):
            self.differ(line, key, r, s)
        if line["response"].get("body_reduced") or request["path"].endswith("/describe/"):
            self.compare_describe(line, rec, sim)
            return
        category = "state" if line["role"] in ("snapshot", "settled") else "value"
        found: list[tuple[str, str, str]] = []
        value_differences(
            meaning(rec, "$", self.ids, query),
            meaning(sim, "$", self.ids, query),
            "$",
            category,
            found,
        )
        for key, r, s in found:
            self.differ(line, key, r, s)

    def compare_describe(
        self, line: dict[str, Any], rec: dict[str, Any], sim: dict[str, Any]
    ) -> None:
        maas, ours = describe_meaning(rec), describe_meaning(sim)
        for name, actions in sorted(ours.items()):
            if name not in maas:
                self.differ(line, f"value describe {name} unknown to MAAS")
            elif not set(actions) <= set(maas[name]):
                extra = sorted(set(actions) - set(maas[name]), key=str)
                self.differ(line, f"value describe {name} actions", "", short(extra))
        missing = sorted(set(maas) - set(ours))
        if missing:
            self.differ(line, "value describe handlers not simulated", short(missing), "")


# -- the known differences (docs/simulator.md) -----------------------------------------------------


@dataclass(frozen=True)
class Known:
    scenario: str
    steps: str
    pattern: str
    why: str

    def matches(self, d: Difference) -> bool:
        return (
            glob(self.scenario, d.scenario)
            and in_steps(d.step, self.steps)
            and glob(self.pattern, d.key)
        )


def glob(pattern: str, text: str) -> bool:
    """``*`` matches any run of characters; everything else is literal (keys hold ``[]``)."""
    return re.fullmatch(".*".join(re.escape(p) for p in pattern.split("*")), text) is not None


def in_steps(step: int, steps: str) -> bool:
    if steps == "*":
        return True
    for part in steps.split(","):
        low, _, high = part.strip().partition("-")
        if low.isdigit() and int(low) <= step <= int(high or low):
            return True
    return False


def known_differences(doc: Path = KNOWN) -> list[Known]:
    """The table under docs/simulator.md's "Known differences from MAAS 3.5": scenario (a glob),
    steps (``*``, ``N``, ``N-M``, comma-separated), the difference (a glob over the key, in
    backquotes), why."""
    text = doc.read_text(encoding="utf-8")
    start = text.index("## Known differences from MAAS 3.5")
    end = text.find("\n## ", start + 1)
    rows = []
    for row in text[start : end if end > 0 else None].splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 4 or not row.startswith("|") or cells[0] in ("scenario", "---"):
            continue
        if set(cells[0]) <= {"-"}:
            continue
        rows.append(Known(cells[0].strip("`"), cells[1].strip("`"), cells[2].strip("`"), cells[3]))
    return rows


def replay_all() -> Iterator[Difference]:
    for name in SCENARIOS:
        yield from Replay(name).run()
