"""Identity and site handlers: version, users, account tokens, config, boot resources, tags,
events, script results and the legacy ``commissioning-results/`` (MAAS 3.5's ``account.py``,
``tags.py``, ``events.py``, ``results.py``, ``scriptresults.py``)."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import string
from typing import Any
from urllib.parse import urlencode

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from maas_simulator.errors import ApiError, invalid
from maas_simulator.model import Simulator
from maas_simulator.network import API_PREFIX, Tag
from maas_simulator.render import (
    device_json,
    event_json,
    legacy_result_json,
    machine_json,
    user_json,
)
from maas_simulator.users import LEVELS, SSHKey, Token
from maas_simulator.wire import (
    Request,
    Response,
    deleted,
    form_data,
    int_param,
    mandatory,
    raw,
)


def version(sim: Simulator, req: Request) -> Any:
    return {
        "capabilities": [
            "networks-management",
            "static-ipaddresses",
            "ipv6-deployment-ubuntu",
            "devices-management",
            "storage-deployment-ubuntu",
            "network-deployment-ubuntu",
            "bridging-interface-ubuntu",
            "bridging-automatic-ubuntu",
            "authenticate-api",
        ],
        "version": "3.5.10",
        "subversion": "",
    }


def whoami(sim: Simulator, req: Request) -> Any:
    assert req.user is not None
    return user_json(req.user)


# The region's own worker user (``get_worker_user``), created with the region: listed first,
# never an API user (recorded against MAAS 3.5.10)
WORKER_USER = {
    "username": "MAAS",
    "email": "maas@localhost",
    "is_local": True,
    "is_superuser": True,
    "resource_uri": "/MAAS/api/2.0/users/MAAS/",
}


def users_list(sim: Simulator, req: Request) -> Any:
    return [WORKER_USER, *(user_json(u) for u in sim.users.values())]


def list_tokens(sim: Simulator, req: Request) -> Response:
    """``list_authorisation_tokens``: every token of the caller, as ``consumer:key:secret``."""
    assert req.user is not None
    tokens = [
        {"name": t.name, "token": f"{t.consumer_key}:{t.token_key}:{t.token_secret}"}
        for t in req.user.all_tokens()
    ]
    return Response(200, json.dumps(tokens, indent=4).encode())


def _random_key(length: int) -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(length))


def create_token(sim: Simulator, req: Request) -> Response:
    """``create_authorisation_token``: a new consumer (named ``name``, default "MAAS consumer")
    and token; the answer is the only time the secret is shown."""
    assert req.user is not None
    name = req.data.get("name", [None])[0]
    token = Token(_random_key(18), _random_key(18), _random_key(32), name or "MAAS consumer")
    req.user.tokens.append(token)
    body = {
        "token_key": token.token_key,
        "token_secret": token.token_secret,
        "consumer_key": token.consumer_key,
        "name": token.name,
    }
    return Response(200, json.dumps(body).encode())


def delete_token(sim: Simulator, req: Request) -> Response:
    """``delete_authorisation_token``: 204, or 404 for a key the caller does not hold. A
    request signed with the deleted token is refused from then on."""
    user = req.user
    assert user is not None
    key = mandatory(req, "token_key")
    if key not in {t.token_key for t in user.all_tokens()}:
        raise ApiError(404, "No Token matches the given query.")
    user.deleted_keys.add(key)
    user.tokens = [t for t in user.tokens if t.token_key != key]
    return deleted()


def update_token_name(sim: Simulator, req: Request) -> Response:
    user = req.user
    assert user is not None
    given = mandatory(req, "token")
    parts = given.split(":")
    key = parts[1] if len(parts) == 3 else given
    name = mandatory(req, "name")
    token = next((t for t in user.all_tokens() if t.token_key == key), None)
    if token is None:
        raise ApiError(404, "No Token matches the given query.")
    if token.token_key == user.token_key:
        user.first_token_name = name
    else:
        token.name = name
    return Response(202, b"Accepted", "text/plain; charset=utf-8")


def _ssh_key_json(k: SSHKey) -> dict[str, Any]:
    """``DISPLAY_SSHKEY_FIELDS``; ``keysource`` is "" for a key not imported."""
    return {
        "id": k.id,
        "key": k.key,
        "keysource": "",
        "resource_uri": f"{API_PREFIX}account/prefs/sshkeys/{k.id}/",
    }


def ssh_keys(sim: Simulator, req: Request) -> Any:
    """``account/prefs/sshkeys/``: the caller's keys."""
    assert req.user is not None
    mine = req.user.username
    return [_ssh_key_json(k) for k in sim.ssh_keys.values() if k.username == mine]


OPENSSH_KEY_TYPES = (
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "ssh-dss",
    "ssh-ed25519",
    "ssh-rsa",
)


def ssh_key_problem(text: str) -> str | None:
    """``normalise_openssh_public_key``: what is wrong with a public key, in MAAS's words (its
    ``ssh-keygen`` round trip stands here as parsing the key), or None."""
    parts = text.split()
    if len(parts) < 2:
        return (
            "Key should contain 2 or more space separated parts (key type, base64-encoded "
            f"key, optional comments), not {len(parts)}: {' '.join(map(shlex.quote, parts))}"
        )
    if parts[0] not in OPENSSH_KEY_TYPES:
        return (
            f"Key type {shlex.quote(parts[0])} not recognised; it should be one of: "
            f"{' '.join(OPENSSH_KEY_TYPES)}"
        )
    try:
        serialization.load_ssh_public_key(f"{parts[0]} {parts[1]}".encode())
    except (ValueError, UnsupportedAlgorithm):
        return "Key could not be converted to RFC4716 form."
    return None


def ssh_key_create(sim: Simulator, req: Request) -> Response:
    """``POST account/prefs/sshkeys/`` (``key``; ``user`` for an admin adding someone else's):
    201 with the key; an invalid key, or one the user has, is a 400 on ``key``."""
    assert req.user is not None
    owner = req.user.username
    named = form_data(req).get("user")
    if named is not None:
        if not req.user.is_superuser:
            raise ApiError(400, "Only administrators can specify a user when creating an SSH key.")
        if named not in sim.users:
            raise ApiError(400, "Supplied username does not match any current users.")
        owner = named
    key = form_data(req).get("key", "").strip()
    if not key:
        raise invalid({"key": ["This field is required."]})
    problem = ssh_key_problem(key)
    if problem is not None:
        raise invalid({"key": [f"Invalid SSH public key: {problem}"]})
    if any(k.username == owner and k.key == key for k in sim.ssh_keys.values()):
        raise invalid({"key": ["This key has already been added for this user."]})
    new = SSHKey(max([0, *sim.ssh_keys]) + 1, owner, key)
    sim.ssh_keys[new.id] = new
    # DISPLAY_SSHKEY_FIELDS through the JSON emitter: no resource_uri, keysource null
    shown = {"key": new.key, "keysource": None, "id": new.id}
    return Response(201, json.dumps(shown).encode())


def _ssh_key(sim: Simulator, req: Request) -> SSHKey:
    ref = req.params["id"]
    key = sim.ssh_keys.get(int(ref)) if ref.isdigit() else None
    if key is None:
        raise ApiError(404, "No SSHKey matches the given query.")
    return key


def ssh_key_read(sim: Simulator, req: Request) -> Any:
    """Any user's key by id, as MAAS's handler reads it."""
    return _ssh_key_json(_ssh_key(sim, req))


def ssh_key_delete(sim: Simulator, req: Request) -> Response:
    key = _ssh_key(sim, req)
    assert req.user is not None
    if key.username != req.user.username:
        raise ApiError(403, "Can't delete a key you don't own.")
    del sim.ssh_keys[key.id]
    return deleted()


# The two archives every MAAS region starts with (``PackageRepository`` defaults).
PACKAGE_REPOSITORIES = [
    ("main_archive", "http://archive.ubuntu.com/ubuntu", ["amd64", "i386"]),
    (
        "ports_archive",
        "http://ports.ubuntu.com/ubuntu-ports",
        ["armhf", "arm64", "ppc64el", "s390x"],
    ),
]


def _repository_json(n: int) -> dict[str, Any]:
    name, url, arches = PACKAGE_REPOSITORIES[n - 1]
    return {
        "id": n,
        "name": name,
        "url": url,
        "distributions": [],
        "disabled_pockets": [],
        "disabled_components": [],
        "disable_sources": True,
        "components": [],
        "arches": arches,
        "key": "",
        "enabled": True,
        "resource_uri": f"{API_PREFIX}package-repositories/{n}/",
    }


def package_repositories(sim: Simulator, req: Request) -> Any:
    return [_repository_json(n) for n in range(1, len(PACKAGE_REPOSITORIES) + 1)]


def package_repository_read(sim: Simulator, req: Request) -> Any:
    ref = req.params["id"]
    if not ref.isdigit() or not 1 <= int(ref) <= len(PACKAGE_REPOSITORIES):
        raise ApiError(404, "No PackageRepository matches the given query.")
    return _repository_json(int(ref))


def get_config(sim: Simulator, req: Request) -> Any:
    name = req.get("name")
    if not name:
        raise ApiError(400, "No provided name!")
    if name not in sim.config:
        valid = ", ".join(sorted(sim.config))
        raise ApiError(
            400,
            {name: [f"{name} is not a valid config setting (valid settings are: {valid})."]},
            json_body=True,
            content_type="application/json",
        )
    # the handler answers HttpResponse(json.dumps(value), content_type="application/json")
    return Response(200, json.dumps(sim.config[name]).encode(), "application/json")


UBUNTU_TITLES = {
    "jammy": "Ubuntu 22.04 LTS",
    "noble": "Ubuntu 24.04 LTS",
    "focal": "Ubuntu 20.04 LTS",
}


def set_config(sim: Simulator, req: Request) -> Response:
    """``op=set_config`` (admin): ``name`` and ``value`` of a setting the simulator knows; the
    value is kept as sent (a string), except the booleans and numbers its default has."""
    name = mandatory(req, "name")
    value = req.data.get("value", [""])[0]
    if name not in sim.config:
        valid = ", ".join(sorted(sim.config))
        raise invalid(
            {name: [f"{name} is not a valid config setting (valid settings are: {valid})."]}
        )
    current = sim.config[name]
    if isinstance(current, bool):
        sim.config[name] = value.strip().lower() in ("true", "1", "yes", "on")
    elif isinstance(current, int) and value.strip().lstrip("-").isdigit():
        sim.config[name] = int(value)
    else:
        sim.config[name] = value
    return Response(200, b"OK", "text/plain; charset=utf-8")


def boot_resources(sim: Simulator, req: Request) -> Any:
    return [
        {
            "id": b.id,
            "type": b.type,
            "name": b.name,
            "architecture": b.architecture,
            "resource_uri": f"{API_PREFIX}boot-resources/{b.id}/",
            "last_deployed": None,
            "title": UBUNTU_TITLES.get(b.name.split("/")[-1], b.name),
            "platform": "generic",
            "subarches": f"generic,{b.architecture.split('/')[-1]}",
            "supported_platforms": "generic",
        }
        for b in sim.boot_resources
    ]


def boot_is_importing(sim: Simulator, req: Request) -> Any:
    return False


EVENT_URI_PARAMS = frozenset(
    (
        "agent_name",
        "domain",
        "hostname",
        "id",
        "level",
        "limit",
        "mac_address",
        "op",
        "zone",
        "owner",
    )
)


EVENT_MAC = re.compile(r"^([0-9a-fA-F]{1,2}[:-]){5}[0-9a-fA-F]{1,2}$")


def event_nodes(sim: Simulator, req: Request) -> set[str] | None:
    """``filtered_nodes_list_from_request``: the machines whose events are asked for, None for
    all. Repeated ``id``, ``hostname``, ``mac_address``, ``domain`` values are OR-ed; every
    filter given narrows the rest (AND), ``zone``, ``pool`` and ``agent_name`` too; a malformed
    MAC is a 400 before anything is read; MACs are matched as written (query string only)."""
    query = req.query
    macs = query.get("mac_address")
    if macs is not None:
        bad = [m for m in macs if not EVENT_MAC.match(m)]
        if bad:
            raise ApiError(400, f"Invalid MAC address(es): {', '.join(bad)}")
    names = ("id", "mac_address", "hostname", "domain", "zone", "pool", "agent_name")
    if not any(name in query for name in names):
        return None
    single = {k: query[k][0] for k in ("zone", "pool", "agent_name") if k in query}
    kept = set()
    for m in sim.machines.values():
        if "id" in query and m.system_id not in query["id"]:
            continue
        if macs is not None and not set(macs) & {i.mac_address for i in m.interfaces}:
            continue
        if "hostname" in query and m.hostname not in query["hostname"]:
            continue
        if "domain" in query and "maas" not in query["domain"]:
            continue  # every simulated machine is in the default domain
        if "zone" in single and m.zone != single["zone"]:
            continue
        if "pool" in single and m.pool != single["pool"]:
            continue
        if "agent_name" in single and m.agent_name != single["agent_name"]:
            continue
        kept.add(m.system_id)
    return kept


def events_query(sim: Simulator, req: Request) -> Any:
    after = int_param(req, "after", None)
    before = int_param(req, "before", None)
    level = req.get("level") or "INFO"
    limit = int_param(req, "limit", 100)
    if limit is None:  # ``limit=``: formencode's None meets MAAS's ``limit > 1000``
        raise ApiError(500, "'>' not supported between instances of 'NoneType' and 'int'")
    if limit > 1000:
        raise ApiError(400, f"Requested number of events {limit} is greater than limit: 1000")
    limit = max(limit, 1)
    if level not in LEVELS:
        raise ApiError(400, f"Unrecognised log level: {level}")
    if before is not None and after is not None:
        raise ApiError(
            400, "There is undetermined behaviour when both `after` and `before` are specified."
        )
    sids = event_nodes(sim, req)
    if sids is not None:
        pool = sorted(
            (e for sid in sids for e in sim.events_by_node.get(sid, [])), key=lambda e: e.id
        )
    else:
        pool = sim.events
    minimum = LEVELS[level]
    if level == "AUDIT":
        selected = [e for e in pool if e.level == "AUDIT"]
    else:
        selected = [e for e in pool if LEVELS[e.level] >= minimum and e.level != "AUDIT"]
    owner = req.get("owner")
    if owner is not None:
        selected = [e for e in selected if e.username == owner]
    if after is not None:
        chosen = [e for e in selected if e.id > after][:limit]
    else:
        if before is not None:
            selected = [e for e in selected if e.id < before]
        chosen = selected[-limit:]
    chosen.reverse()  # always newest first
    # MAAS rebuilds the page links from the request's own filters only (``all_params``:
    # ``before``/``after`` are dropped, then the one that matters is set again).
    base = [(k, x) for k, vs in req.query.items() if k in EVENT_URI_PARAMS for x in vs]

    def uri(**extra: Any) -> str:
        return f"{API_PREFIX}events/?{urlencode(base + list(extra.items()))}"

    if chosen:
        next_uri = uri(after=chosen[0].id)
        prev_uri: str | None = uri(before=chosen[-1].id)
    else:
        # No newer events now (there may be later), or none older than ``before``.
        next_uri = uri(after=before - 1) if before is not None else uri()
        prev_uri = uri(before=after + 1) if after is not None else None
    return {
        "count": len(chosen),
        "events": [event_json(e, sim.clock.wall) for e in chosen],
        "next_uri": next_uri,
        "prev_uri": prev_uri,
    }


# -- tags -----------------------------------------------------------------------------------------

TAG_NAME = re.compile(r"[\w-]+")


def tag_json(tag: Tag) -> dict[str, Any]:
    return {
        "name": tag.name,
        "definition": tag.definition,
        "comment": tag.comment,
        "kernel_opts": tag.kernel_opts,
        "resource_uri": f"{API_PREFIX}tags/{tag.name}/",
    }


def _tag(sim: Simulator, req: Request, edit: bool = False) -> Tag:
    """``get_tag_or_404``: editing needs an admin (403, empty body), then the tag must exist."""
    assert req.user is not None
    if edit and not req.user.is_superuser:
        raise ApiError(403, "")
    tag = sim.net.tags.get(req.params["name"])
    if tag is None:
        raise ApiError(404, "No Tag matches the given query.")
    return tag


def tags_list(sim: Simulator, req: Request) -> Any:
    return [tag_json(t) for t in sorted(sim.net.tags.values(), key=lambda t: t.name)]


def tag_create(sim: Simulator, req: Request) -> Any:
    """``POST tags/`` (admin): ``name``, ``comment``, ``definition``, ``kernel_opts``. A
    definition is stored but never evaluated: tags are given to machines with ``update_nodes``
    or in the scenario."""
    assert req.user is not None
    if not req.user.is_superuser:
        raise ApiError(403, "")
    name = req.data.get("name", [""])[0].strip()  # Django's CharField strips
    errors: dict[str, list[str]] = {}
    if not name:
        errors["name"] = ["This field is required."]
    elif not TAG_NAME.fullmatch(name):
        errors["name"] = ["Invalid character in the tag name."]
    elif name in sim.net.tags:
        errors["name"] = ["Tag with this Name already exists."]
    if errors:
        raise invalid(errors)
    tag = Tag(
        name,
        comment=req.data.get("comment", [""])[0],
        definition=req.data.get("definition", [""])[0],
        kernel_opts=req.data.get("kernel_opts", [""])[0],
    )
    sim.net.tags[name] = tag
    return tag_json(tag)


def tag_read(sim: Simulator, req: Request) -> Any:
    return tag_json(_tag(sim, req))


def tag_delete(sim: Simulator, req: Request) -> Response:
    tag = _tag(sim, req, edit=True)
    del sim.net.tags[tag.name]
    for node in sim.all_nodes():
        if tag.name in node.tags:
            node.tags.discard(tag.name)
            node.touch(sim.now())
    return deleted()


def tag_machines(sim: Simulator, req: Request) -> Response:
    """``op=machines`` (and ``op=nodes``): the tagged machines, full objects, by id."""
    tag = _tag(sim, req)
    chunks = [
        machine_json(sim, sim.machines[sid])
        for sid in sim.order
        if sid in sim.machines and tag.name in sim.machines[sid].tags
    ]
    return raw(b"[" + b",".join(chunks) + b"]")


def tag_devices(sim: Simulator, req: Request) -> Any:
    tag = _tag(sim, req)
    return [device_json(sim, d) for d in sim.devices.values() if tag.name in d.tags]


def tag_no_nodes(sim: Simulator, req: Request) -> Any:
    """``op=rack_controllers`` / ``op=region_controllers``: controllers are never tagged here."""
    _tag(sim, req)
    return []


def tag_update_nodes(sim: Simulator, req: Request) -> Any:
    """``op=update_nodes`` (admin): ``add=`` / ``remove=`` system ids; unknown ids are skipped
    and not counted, as MAAS filters them out."""
    assert req.user is not None
    if not req.user.is_superuser:
        raise ApiError(403, "")
    tag = _tag(sim, req)
    definition = req.data.get("definition", [None])[0]
    if definition is not None and definition != tag.definition:
        return Response(
            409,
            f"Definition supplied '{definition}' doesn't match current definition "
            f"'{tag.definition}'".encode(),
            "text/plain; charset=utf-8",
        )
    counts = {}
    for param, add in (("add", True), ("remove", False)):
        ids = set(req.data.get(param, []))
        nodes = [n for sid in ids if (n := sim.machines.get(sid) or sim.devices.get(sid))]
        for node in nodes:
            if add:
                node.tags.add(tag.name)
            else:
                node.tags.discard(tag.name)
            node.touch(sim.now())
        counts["added" if add else "removed"] = len(nodes)
    return counts


# -- legacy results -------------------------------------------------------------------------------


def node_results(sim: Simulator, req: Request) -> Any:
    """``commissioning-results/`` (= ``installation-results/``): one flat entry per finished
    script of each node's current commissioning, installation and testing runs, filtered by
    ``system_id``, ``name`` and ``result_type`` (query string only: a body on GET is ignored)."""
    ids = req.query.get("system_id")
    names = set(req.query["name"]) if req.query.get("name") else None
    result_type = int_param(req, "result_type", None)
    results = []
    for sid in sim.order:
        m = sim.machines.get(sid)
        if m is None or (ids is not None and sid not in ids):
            continue
        for type_ in (0, 1, 2):
            sets = [ss for ss in m.script_sets if ss.type == type_]
            if not sets or (result_type is not None and type_ != result_type):
                continue
            for r in sets[-1].results:
                if r.status not in (2, 3, 4, 5) or (names is not None and r.name not in names):
                    continue
                results.append(legacy_result_json(sid, type_, sets[-1], r))
    return results
