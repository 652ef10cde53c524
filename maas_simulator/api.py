"""The MAAS REST API 2.0 served from the simulator's model: the resource table (also the source
of ``describe/``), routing and piston's dispatch rules (docs/maas-api.md §1.3, §2, §3.5, §11).

Handlers live by area in ``api_machines``, ``api_interfaces``, ``api_network``, ``api_storage``
and ``api_site``; the wire format (requests, OAuth, forms, permissions) in ``wire``; the JSON of
nodes, events and results in ``render``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from maas_simulator import api_interfaces as ifc
from maas_simulator import api_machines as mach
from maas_simulator import api_network as net
from maas_simulator import api_nodedevices as nodedev
from maas_simulator import api_scripts as scr
from maas_simulator import api_site as site
from maas_simulator import api_storage as sto
from maas_simulator.errors import ApiError
from maas_simulator.model import Simulator
from maas_simulator.network import API_PREFIX
from maas_simulator.wire import (
    A,
    Request,
    Resource,
    Response,
    authenticate,
    has_perm,
    parse_form,
)

__all__ = [
    "API_HASH",
    "API_PREFIX",
    "RESOURCES",
    "Request",
    "Response",
    "authenticate",
    "describe",
    "dispatch",
    "parse_form",
]

P = API_PREFIX
NODE = f"{P}nodes/{{system_id}}/"
RESOURCES = [
    Resource(
        "VersionHandler",
        f"{P}version/",
        [A("read", "GET", None, site.version, anon=True)],
        auth=False,
    ),
    Resource(
        "UsersHandler",
        f"{P}users/",
        [A("read", "GET", None, site.users_list), A("whoami", "GET", "whoami", site.whoami)],
    ),
    Resource(
        "AccountHandler",
        f"{P}account/",
        [
            A(
                "create_authorisation_token",
                "POST",
                "create_authorisation_token",
                site.create_token,
            ),
            A(
                "delete_authorisation_token",
                "POST",
                "delete_authorisation_token",
                site.delete_token,
            ),
            A("list_authorisation_tokens", "GET", "list_authorisation_tokens", site.list_tokens),
            A("update_token_name", "POST", "update_token_name", site.update_token_name),
        ],
    ),
    Resource(
        "SSHKeysHandler",
        f"{P}account/prefs/sshkeys/",
        [
            A("read", "GET", None, site.ssh_keys),
            A("create", "POST", None, site.ssh_key_create),
        ],
    ),
    Resource(
        "SSHKeyHandler",
        f"{P}account/prefs/sshkeys/{{id}}/",
        [
            A("read", "GET", None, site.ssh_key_read),
            A("delete", "DELETE", None, site.ssh_key_delete),
        ],
    ),
    Resource(
        "PackageRepositoriesHandler",
        f"{P}package-repositories/",
        [A("read", "GET", None, site.package_repositories)],
    ),
    Resource(
        "PackageRepositoryHandler",
        f"{P}package-repositories/{{id}}/",
        [A("read", "GET", None, site.package_repository_read)],
    ),
    Resource(
        "MaasHandler",
        f"{P}maas/",
        [
            A("get_config", "GET", "get_config", site.get_config),
            A("set_config", "POST", "set_config", site.set_config, admin=True),
        ],
    ),
    Resource(
        "BootResourcesHandler",
        f"{P}boot-resources/",
        [
            A("read", "GET", None, site.boot_resources),
            A("is_importing", "GET", "is_importing", site.boot_is_importing),
        ],
    ),
    Resource("SubnetsHandler", f"{P}subnets/", [A("read", "GET", None, net.subnets)]),
    Resource(
        "SubnetHandler",
        f"{P}subnets/{{id}}/",
        [
            A("read", "GET", None, net.subnet_read),
            A("ip_addresses", "GET", "ip_addresses", net.subnet_ip_addresses),
            A("statistics", "GET", "statistics", net.subnet_statistics),
        ],
        patterns={"id": r"[.: \w-]+(?:/\d\d\d?)?"},  # a CIDR keeps its "/NN"
    ),
    Resource("FabricsHandler", f"{P}fabrics/", [A("read", "GET", None, net.fabrics)]),
    Resource("FabricHandler", f"{P}fabrics/{{id}}/", [A("read", "GET", None, net.fabric_read)]),
    Resource(
        "VlansHandler",
        f"{P}fabrics/{{fabric_id}}/vlans/",
        [
            A("read", "GET", None, net.fabric_vlans),
            A("create", "POST", None, net.vlan_create),
        ],
    ),
    Resource(
        "VlanHandler",
        f"{P}fabrics/{{fabric_id}}/vlans/{{vid}}/",
        [
            A("read", "GET", None, net.vlan_read),
            A("update", "PUT", None, net.vlan_update),
            A("delete", "DELETE", None, net.vlan_delete),
        ],
        aliases=(f"{P}vlans/{{vlan_id}}/",),
    ),
    Resource("SpacesHandler", f"{P}spaces/", [A("read", "GET", None, net.spaces)]),
    Resource("SpaceHandler", f"{P}spaces/{{id}}/", [A("read", "GET", None, net.space_read)]),
    Resource(
        "StaticRoutesHandler",
        f"{P}static-routes/",
        [
            A("read", "GET", None, net.static_routes),
            A("create", "POST", None, net.static_route_create, admin=True),
        ],
    ),
    Resource(
        "StaticRouteHandler",
        f"{P}static-routes/{{id}}/",
        [
            A("read", "GET", None, net.static_route_read),
            A("update", "PUT", None, net.static_route_update),
            A("delete", "DELETE", None, net.static_route_delete),
        ],
    ),
    Resource(
        "IPRangesHandler",
        f"{P}ipranges/",
        [A("read", "GET", None, net.ipranges), A("create", "POST", None, net.iprange_create)],
    ),
    Resource(
        "IPRangeHandler",
        f"{P}ipranges/{{id}}/",
        [
            A("read", "GET", None, net.iprange_read),
            A("update", "PUT", None, net.iprange_update),
            A("delete", "DELETE", None, net.iprange_delete),
        ],
    ),
    Resource(
        "DNSResourcesHandler",
        f"{P}dnsresources/",
        [
            A("read", "GET", None, net.dnsresources),
            A("create", "POST", None, net.dnsresource_create, admin=True),
        ],
    ),
    Resource(
        "DNSResourceHandler",
        f"{P}dnsresources/{{id}}/",
        [
            A("read", "GET", None, net.dnsresource_read),
            A("update", "PUT", None, net.dnsresource_update, admin=True),
            A("delete", "DELETE", None, net.dnsresource_delete, admin=True),
        ],
    ),
    Resource("DomainsHandler", f"{P}domains/", [A("read", "GET", None, net.domains)]),
    Resource("DomainHandler", f"{P}domains/{{id}}/", [A("read", "GET", None, net.domain_read)]),
    Resource("ZonesHandler", f"{P}zones/", [A("read", "GET", None, net.zones)]),
    Resource("ZoneHandler", f"{P}zones/{{name}}/", [A("read", "GET", None, net.zone_read)]),
    Resource("ResourcePoolsHandler", f"{P}resourcepools/", [A("read", "GET", None, net.pools)]),
    Resource(
        "ResourcePoolHandler", f"{P}resourcepool/{{id}}/", [A("read", "GET", None, net.pool_read)]
    ),
    Resource(
        "RackControllersHandler",
        f"{P}rackcontrollers/",
        [A("read", "GET", None, net.rack_controllers)],
    ),
    Resource(
        "RackControllerHandler",
        f"{P}rackcontrollers/{{system_id}}/",
        [A("read", "GET", None, net.rack_controller_read)],
    ),
    Resource("DevicesHandler", f"{P}devices/", [A("read", "GET", None, net.devices)]),
    Resource(
        "DeviceHandler",
        f"{P}devices/{{system_id}}/",
        [A("read", "GET", None, net.device_read), A("delete", "DELETE", None, net.device_delete)],
    ),
    Resource(
        "TagsHandler",
        f"{P}tags/",
        [A("read", "GET", None, site.tags_list), A("create", "POST", None, site.tag_create)],
    ),
    Resource(
        "TagHandler",
        f"{P}tags/{{name}}/",
        [
            A("read", "GET", None, site.tag_read),
            A("delete", "DELETE", None, site.tag_delete),
            A("devices", "GET", "devices", site.tag_devices),
            A("machines", "GET", "machines", site.tag_machines),
            A("nodes", "GET", "nodes", site.tag_machines),
            A("rack_controllers", "GET", "rack_controllers", site.tag_no_nodes),
            A("region_controllers", "GET", "region_controllers", site.tag_no_nodes),
            A("update_nodes", "POST", "update_nodes", site.tag_update_nodes),
        ],
    ),
    Resource(
        "MachinesHandler",
        f"{P}machines/",
        [
            A("read", "GET", None, mach.machines_list),
            A("create", "POST", None, mach.machines_create),
            A("is_registered", "GET", "is_registered", mach.machines_is_registered),
            A("create", "POST", None, mach.machines_enlist, anon=True),
            A("is_registered", "GET", "is_registered", mach.anon_machines_is_registered, anon=True),
            A(
                "power_parameters",
                "GET",
                "power_parameters",
                mach.machines_power_parameters,
                admin=True,
            ),
            A("allocate", "POST", "allocate", mach.machines_allocate),
            A("release", "POST", "release", mach.machines_release),
            A("list_allocated", "GET", "list_allocated", mach.machines_list_allocated),
        ],
        anon_name="AnonMachinesHandler",
    ),
    Resource(
        "MachineHandler",
        f"{P}machines/{{system_id}}/",
        [
            A("read", "GET", None, mach.machine_read, perm="view"),
            A("update", "PUT", None, mach.machine_update, perm="admin"),
            A("delete", "DELETE", None, mach.machine_delete, perm="admin"),
            A("commission", "POST", "commission", mach.machine_commission, perm="admin"),
            A("test", "POST", "test", mach.machine_test, perm="admin"),
            A(
                "override_failed_testing",
                "POST",
                "override_failed_testing",
                mach.machine_override_failed_testing,
                perm="admin",
            ),
            A("deploy", "POST", "deploy", mach.machine_deploy, perm="edit"),
            A("release", "POST", "release", mach.machine_release, perm="edit"),
            A("abort", "POST", "abort", mach.machine_abort, perm="edit"),
            A("mark_broken", "POST", "mark_broken", mach.machine_mark_broken, perm="edit"),
            A("mark_fixed", "POST", "mark_fixed", mach.machine_mark_fixed, perm="admin"),
            A("lock", "POST", "lock", mach.machine_lock, perm="lock"),
            A("unlock", "POST", "unlock", mach.machine_unlock, perm="lock"),
            A("power_on", "POST", "power_on", mach.machine_power_on, perm="edit"),
            A("power_off", "POST", "power_off", mach.machine_power_off, perm="edit"),
            A(
                "query_power_state",
                "GET",
                "query_power_state",
                mach.machine_query_power,
                perm="view",
            ),
            A("details", "GET", "details", mach.machine_details, perm="view"),
            A(
                "power_parameters",
                "GET",
                "power_parameters",
                mach.machine_power_parameters,
                perm="admin_read",
            ),
            A(
                "set_storage_layout",
                "POST",
                "set_storage_layout",
                mach.machine_set_storage_layout,
                perm="admin",
            ),
            A(
                "restore_networking_configuration",
                "POST",
                "restore_networking_configuration",
                mach.machine_restore_networking,
                perm="admin",
            ),
            A(
                "restore_storage_configuration",
                "POST",
                "restore_storage_configuration",
                mach.machine_restore_storage,
                perm="admin",
            ),
            A(
                "restore_default_configuration",
                "POST",
                "restore_default_configuration",
                mach.machine_restore_default,
                perm="admin",
            ),
            A(
                "set_workload_annotations",
                "POST",
                "set_workload_annotations",
                mach.machine_set_annotations,
                perm="edit",
            ),
            A(
                "set_owner_data",
                "POST",
                "set_owner_data",
                mach.machine_set_annotations,
                perm="edit",
            ),
            A("get_token", "GET", "get_token", mach.machine_get_token, perm="admin_read"),
        ],
    ),
    Resource(
        "InterfacesHandler",
        f"{NODE}interfaces/",
        [
            A("read", "GET", None, ifc.interfaces_list),
            A("create_bond", "POST", "create_bond", ifc.interfaces_create_bond),
            A("create_bridge", "POST", "create_bridge", ifc.interfaces_create_bridge),
            A("create_vlan", "POST", "create_vlan", ifc.interfaces_create_vlan),
        ],
    ),
    Resource(
        "InterfaceHandler",
        f"{NODE}interfaces/{{id}}/",
        [
            A("read", "GET", None, ifc.interface_read),
            A("update", "PUT", None, ifc.interface_update),
            A("link_subnet", "POST", "link_subnet", ifc.interface_link_subnet),
            A("unlink_subnet", "POST", "unlink_subnet", ifc.interface_unlink_subnet),
            A("disconnect", "POST", "disconnect", ifc.interface_disconnect),
        ],
    ),
    Resource(
        "BlockDevicesHandler",
        f"{NODE}blockdevices/",
        [A("read", "GET", None, sto.blockdevices_list)],
    ),
    Resource(
        "BlockDeviceHandler",
        f"{NODE}blockdevices/{{id}}/",
        [
            A("read", "GET", None, sto.blockdevice_read),
            A("add_tag", "POST", "add_tag", sto.blockdevice_add_tag),
            A("remove_tag", "POST", "remove_tag", sto.blockdevice_remove_tag),
            A("format", "POST", "format", sto.blockdevice_format),
            A("unformat", "POST", "unformat", sto.blockdevice_unformat),
            A("mount", "POST", "mount", sto.blockdevice_mount),
            A("unmount", "POST", "unmount", sto.blockdevice_unmount),
            A("set_boot_disk", "POST", "set_boot_disk", sto.blockdevice_set_boot_disk),
        ],
    ),
    Resource(
        "PartitionsHandler",
        f"{NODE}blockdevices/{{device_id}}/partitions/",
        [
            A("read", "GET", None, sto.partitions_list),
            A("create", "POST", None, sto.partition_create),
        ],
    ),
    Resource(
        "PartitionHandler",
        f"{NODE}blockdevices/{{device_id}}/partition/{{id}}",
        [
            A("read", "GET", None, sto.partition_read),
            A("delete", "DELETE", None, sto.partition_delete),
            A("format", "POST", "format", sto.partition_format),
            A("unformat", "POST", "unformat", sto.partition_unformat),
            A("mount", "POST", "mount", sto.partition_mount),
            A("unmount", "POST", "unmount", sto.partition_unmount),
        ],
        aliases=(f"{NODE}blockdevices/{{device_id}}/partitions/{{id}}",),
    ),
    Resource(
        "VolumeGroupsHandler",
        f"{NODE}volume-groups/",
        [
            A("read", "GET", None, sto.volume_groups_list),
            A("create", "POST", None, sto.volume_group_create),
        ],
    ),
    Resource(
        "VolumeGroupHandler",
        f"{NODE}volume-group/{{id}}/",
        [
            A("read", "GET", None, sto.volume_group_read),
            A("delete", "DELETE", None, sto.volume_group_delete),
            A(
                "create_logical_volume",
                "POST",
                "create_logical_volume",
                sto.volume_group_create_lv,
            ),
            A(
                "delete_logical_volume",
                "POST",
                "delete_logical_volume",
                sto.volume_group_delete_lv,
            ),
        ],
        aliases=(f"{NODE}volume-groups/{{id}}/",),
    ),
    Resource(
        "NodeDevicesHandler",
        f"{NODE}devices/",
        [A("read", "GET", None, nodedev.nodedevices_list, perm="view")],
    ),
    Resource(
        "NodeDeviceHandler",
        f"{NODE}devices/{{id}}/",
        [
            A("read", "GET", None, nodedev.nodedevice_read, perm="view"),
            A("delete", "DELETE", None, nodedev.nodedevice_delete, admin=True, perm="view"),
        ],
    ),
    Resource("EventsHandler", f"{P}events/", [A("query", "GET", "query", site.events_query)]),
    Resource(
        "NodeScriptResultsHandler",
        f"{NODE}results/",
        [A("read", "GET", None, scr.results_list, perm="view")],
    ),
    Resource(
        "NodeScriptResultHandler",
        f"{NODE}results/{{id}}/",
        [
            A("read", "GET", None, scr.results_read, perm="view"),
            A("download", "GET", "download", scr.results_download, perm="view"),
        ],
    ),
    Resource("NodeScriptsHandler", f"{P}scripts/", [A("read", "GET", None, scr.scripts_list)]),
    Resource(
        "NodeScriptHandler",
        f"{P}scripts/{{name}}",
        [
            A("read", "GET", None, scr.script_read),
            A("download", "GET", "download", scr.script_download),
        ],
    ),
    Resource(
        "CommissioningScriptsHandler",
        f"{P}commissioning-scripts/",
        [A("read", "GET", None, scr.commissioning_scripts)],
    ),
    Resource(
        "NodeResultsHandler",
        f"{P}installation-results/",
        [A("read", "GET", None, site.node_results)],
        aliases=(f"{P}commissioning-results/",),
    ),
]

# URLs MAAS 3.5 routes (``urls_api.py``) that the simulator does not simulate. They answer as
# MAAS answers an operation it does not offer (400 "Unrecognised signature"), never with the
# 404 of an unknown URL (docs/simulator.md, "What is deliberately not simulated").
UNSIMULATED = [
    re.compile(f"^{re.escape(P)}{pattern}$")
    for pattern in (
        r"nodes/[^/]+/raids/",
        r"nodes/[^/]+/raid/[^/]+/",
        r"nodes/[^/]+/bcaches/",
        r"nodes/[^/]+/bcache/[^/]+/",
        r"nodes/[^/]+/bcache-cache-sets/",
        r"nodes/[^/]+/bcache-cache-set/[^/]+/",
        r"nodes/[^/]+/vmfs-datastores/",
        r"nodes/[^/]+/vmfs-datastore/[^/]+/",
        r"nodes/[^/]+/",
        r"nodes/",
        r"regioncontrollers/[^/]+/",
        r"regioncontrollers/",
        r"pods/[^/]+/",
        r"pods/",
        r"vm-hosts/[^/]+/",
        r"vm-hosts/",
        r"virtual-machines/[^/]+",
        r"virtual-machines/",
        r"vm-clusters/[^/]+",
        r"vm-clusters/",
        r"discovery/",
        r"discovery/[.: \w=^]+/*/",
        r"networks/[^/]+/",
        r"networks/",
        r"files/",
        r"files/.+/",
        r"account/prefs/sslkeys/[^/]+/",
        r"account/prefs/sslkeys/",
        r"users/[^/]+/",
        r"ipaddresses/",
        r"dnsresourcerecords/",
        r"dnsresourcerecords/[^/]+/",
        r"boot-resources/[^/]+/",
        r"boot-resources/[^/]+/upload/[^/]+/",
        r"dhcp-snippets/",
        r"dhcp-snippets/[^/]+/",
        r"notifications/",
        r"notifications/[^/]+/",
        r"license-keys/",
        r"license-key/[^/]+/[^/]+",
        r"boot-sources/",
        r"boot-sources/[^/]+/",
        r"boot-sources/[^/]+/selections/",
        r"boot-sources/[^/]+/selections/[^/]+/",
        r"switch-boot-order/[^/]+/",
        r"images-sync-progress/[^/]+/[^/]+/",
        r"images-sync-progress/",
    )
]


def describe(host: str) -> dict[str, Any]:
    """The describe/ document: what python-libmaas builds its client from.

    As MAAS's ``_describe_api``: resources named after their handler class, each with an
    ``anon`` and an ``auth`` handler (or null), resources and actions sorted by name.
    """

    body = description()
    for resource in body["resources"]:  # absolute URIs as the client addressed the region
        for kind in ("anon", "auth"):
            if resource[kind] is not None:
                resource[kind]["uri"] = f"http://{host}{resource[kind]['path']}"
    return body


def description() -> dict[str, Any]:
    """The description and its hash, without the URIs a request adds: the hash MAAS also sends
    as ``X-MAAS-API-Hash`` on every answer (``get_api_description``; the ``maas`` CLI compares
    the two to know its cached description is current)."""

    def handler(res: Resource, name: str, anon: bool) -> dict[str, Any]:
        acts = sorted(
            (a for a in res.actions if a.anon == anon), key=lambda a: (a.name, a.op or "")
        )
        return {
            "name": name,
            "doc": f"Simulated {name}.",
            "path": res.path,
            "params": res.params,
            "actions": [
                {
                    "name": a.name,
                    "method": a.method,
                    "op": a.op,
                    "restful": a.op is None,
                    "doc": a.doc,
                }
                for a in acts
            ],
        }

    resources: list[dict[str, Any]] = []
    handlers: list[dict[str, Any]] = []
    for res in sorted(RESOURCES, key=lambda r: r.name):
        auth: dict[str, Any] | None = handler(res, res.name, anon=False)
        anon = handler(res, res.anon_name, anon=True) if res.anon_name else None
        if not res.auth:
            anon, auth = handler(res, res.name, anon=True), None
        resources.append({"name": res.name, "anon": anon, "auth": auth})
        handlers.extend(h for h in (auth, anon) if h)
    body: dict[str, Any] = {"doc": "MAAS API", "resources": resources, "handlers": handlers}
    canonical = json.dumps(body, sort_keys=True).encode()
    body["hash"] = hashlib.sha1(canonical).hexdigest()  # noqa: S324 (MAAS's own choice)
    return body


API_HASH = description()["hash"]


def not_allowed(methods: list[str]) -> Response:
    """Django's ``HttpResponseNotAllowed``: 405, an ``Allow`` header, an empty body."""
    return Response(405, b"", "text/html; charset=utf-8", headers={"Allow": ", ".join(methods)})


def dispatch(sim: Simulator, req: Request) -> Response:
    """Route one authenticated-or-anonymous request under /MAAS/api/2.0/, as piston does:
    choose the handler (anonymous requests go to the resource's anonymous handler when it
    serves the method, else they are challenged), refuse a method the handler does not serve
    with 405, then look the ``(method, op)`` signature up."""
    for res in RESOURCES:
        params = res.match(req.path)
        if params is None:
            continue
        req.params = params
        # ``request.GET.get("op") or request.POST.get("op")``: an empty op is no op (CRUD)
        op = req.get("op") or None
        anonymous = req.user is None
        if anonymous and res.auth:
            anon_methods = res.allowed_methods(anonymous=True) if res.anon_name else []
            if req.method not in anon_methods:
                raise ApiError(401, "Forbidden")
        allowed = res.allowed_methods(anonymous)
        if req.method not in allowed:
            return not_allowed(allowed)
        candidates = [
            a
            for a in res.actions
            if a.method == req.method and a.op == op and (a.anon == anonymous or not res.auth)
        ]
        if not candidates:
            raise ApiError(400, f"Unrecognised signature: method={req.method} op={op}")
        action = candidates[0]
        if action.admin and req.user is not None and not req.user.is_superuser:
            raise ApiError(403, "This method is reserved for admin users.")
        if action.perm and req.user is not None:
            m = sim.machines.get(req.params.get("system_id", ""))
            if m is not None and not has_perm(req.user, action.perm, m):
                raise ApiError(403, "")  # PermissionDenied() from get_node_or_404
        result = action.fn(sim, req)
        if isinstance(result, Response):
            return result
        return Response(200, json.dumps(result).encode())
    if any(p.match(req.path) for p in UNSIMULATED):
        if req.user is None:
            raise ApiError(401, "Forbidden")
        raise ApiError(
            400, f"Unrecognised signature: method={req.method} op={req.get('op') or None}"
        )
    raise ApiError(404, f"Unknown API endpoint: {req.path}.")
