"""Node interfaces and their links (MAAS 3.5's ``models/interface.py``, ``interfaces.py``;
docs/simulator.md, "Networking").

An interface is *on* a VLAN (``vlan: null`` means disconnected) and carries links (``auto``,
``dhcp``, ``static``, ``link_up``), each a StaticIPAddress row whose ``ip_address`` is present
only once an address is assigned. AUTO links get their address when a deployment starts and
give it back at release; STATIC links without an address get one when linked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from maas_simulator.network import API_PREFIX, Network

LINK_MODES = ("auto", "dhcp", "static", "link_up")


@dataclass
class Link:
    id: int
    mode: str  # auto | dhcp | static | link_up
    subnet_id: int | None
    ip_address: str | None = None


@dataclass
class Interface:
    """A NIC (``physical``) or one built on others (``bond``, ``bridge``, ``vlan``: their
    ``parents``). ``cable_*`` is where a NIC's cable really goes (what commissioning finds);
    ``vlan_id``, ``links``, ``mtu`` and ``params`` are MAAS's configuration of it."""

    id: int
    name: str
    mac_address: str
    type: str = "physical"
    parents: list[int] = field(default_factory=list)  # interface ids
    params: dict[str, Any] | None = None  # bond_* / bridge_* (a dict for built interfaces)
    cable_vlan_id: int | None = None  # the VLAN the cable reaches; None: unknown network
    cable_subnet_id: int | None = None  # the subnet it DHCPs/PXE boots on, if any
    connected: bool = True  # carrier: False = no cable
    vlan_id: int | None = None
    links: list[Link] = field(default_factory=list)
    enabled: bool = True
    mtu: int | None = None  # params.mtu; the VLAN's MTU applies when unset
    tags: list[str] = field(default_factory=list)
    link_connected: bool = True
    interface_speed: int = 25000
    link_speed: int = 25000
    numa_node: int = 0
    sriov_max_vf: int = 0
    vendor: str | None = "Intel Corporation"
    product: str | None = "Ethernet Controller E810-XXV for SFP"
    firmware_version: str | None = "4.40 0x8001c967 1.3534.0"
    commissioned: dict[str, Any] = field(default_factory=dict)  # restored by restore_*

    def snapshot(self) -> None:
        """What commissioning saw: restore_networking_configuration goes back to it."""
        self.commissioned = {
            "name": self.name,
            "mac_address": self.mac_address,
            "vlan_id": self.vlan_id,
            "enabled": True,
            "mtu": None,
            "tags": [],
            "link_connected": self.link_connected,
            "interface_speed": self.interface_speed,
            "link_speed": self.link_speed,
        }

    def restore(self) -> None:
        for key, value in self.commissioned.items():
            setattr(self, key, list(value) if isinstance(value, list) else value)


def link_json(net: Network, link: Link) -> dict[str, Any]:
    data: dict[str, Any] = {"id": link.id, "mode": link.mode}
    if link.subnet_id is not None and link.subnet_id in net.subnets:
        data["subnet"] = net.subnet_json(link.subnet_id)
    if link.ip_address:
        data["ip_address"] = link.ip_address
    return data


def children(iface: Interface, siblings: list[Interface]) -> list[Interface]:
    return [i for i in siblings if iface.id in i.parents]


def effective_mtu(net: Network, iface: Interface, siblings: list[Interface]) -> int:
    """``get_effective_mtu``: its own, else its VLAN's, else 1500; never below a child's."""
    mtu = iface.mtu or (net.vlans[iface.vlan_id].mtu if iface.vlan_id in net.vlans else 1500)
    return max([mtu, *(effective_mtu(net, c, siblings) for c in children(iface, siblings))])


def is_enabled(iface: Interface, siblings: list[Interface]) -> bool:
    """A built interface is enabled when one of its parents is."""
    parents = [i for i in siblings if i.id in iface.parents]
    return any(is_enabled(p, siblings) for p in parents) if parents else iface.enabled


def interface_json(
    net: Network, system_id: str, iface: Interface, siblings: list[Interface]
) -> dict[str, Any]:
    """``DISPLAYED_INTERFACE_FIELDS``: ``parents`` and ``children`` by name; ``params`` a dict
    (``mtu``, ``bond_*``, ``bridge_*``), ``{}`` for a NIC nothing was set on (3.5 source: the
    field's default is ``dict``; recorded against MAAS 3.5.10)."""
    vlan = net.vlan_json(iface.vlan_id) if iface.vlan_id is not None else None
    params = {**(iface.params or {}), **({"mtu": iface.mtu} if iface.mtu else {})}
    return {
        "system_id": system_id,
        "id": iface.id,
        "name": iface.name,
        "type": iface.type,
        "vlan": vlan,
        "mac_address": iface.mac_address,
        "parents": [i.name for i in siblings if i.id in iface.parents],
        "children": [c.name for c in children(iface, siblings)],
        "tags": list(iface.tags),
        "enabled": is_enabled(iface, siblings),
        "links": [link_json(net, link) for link in iface.links],
        "params": params,
        "discovered": None,
        "effective_mtu": effective_mtu(net, iface, siblings),
        "vendor": iface.vendor,
        "product": iface.product,
        "firmware_version": iface.firmware_version,
        "link_connected": iface.link_connected,
        "interface_speed": iface.interface_speed,
        "link_speed": iface.link_speed if iface.link_connected else 0,
        "numa_node": iface.numa_node,
        "sriov_max_vf": iface.sriov_max_vf,
        "resource_uri": f"{API_PREFIX}nodes/{system_id}/interfaces/{iface.id}/",
    }


def release_ip(net: Network, link: Link) -> None:
    if link.ip_address and link.subnet_id in net.subnets:
        net.subnets[link.subnet_id].release(link.ip_address)
    link.ip_address = None


def clear_links(net: Network, iface: Interface) -> None:
    for link in iface.links:
        release_ip(net, link)
    iface.links = []


def remove_interface(net: Network, siblings: list[Interface], iface: Interface) -> None:
    """Delete an interface: its addresses go back, and children left without a parent go
    with it (``delete_children_interface_handler``)."""
    clear_links(net, iface)
    siblings.remove(iface)
    for child in children(iface, siblings):
        child.parents.remove(iface.id)
        if not child.parents:
            remove_interface(net, siblings, child)


def ensure_link_up(iface: Interface, new_id: Callable[[], int]) -> None:
    """``Interface.ensure_link_up``: a connected NIC without links gets a LINK_UP link."""
    if not iface.links and iface.vlan_id is not None:
        iface.links = [Link(new_id(), "link_up", None)]


def default_gateways(
    net: Network, interfaces: list[Interface], boot_id: int | None
) -> dict[str, Any]:
    """``Node.get_default_gateways`` without an explicit gateway link: the best AUTO or
    STATIC link on a subnet with a gateway (DHCP-serving VLANs first, the boot NIC first,
    STATIC before AUTO)."""
    best: tuple[Any, ...] | None = None
    for iface in interfaces:
        for link in iface.links:
            subnet = net.subnets.get(link.subnet_id or -1)
            if link.mode not in ("auto", "static") or subnet is None or not subnet.gateway_ip:
                continue
            key = (
                not net.vlans[subnet.vlan_id].dhcp_on,
                iface.id != boot_id,
                link.mode != "static",
                link.id,
            )
            if best is None or key < best[0]:
                best = (key, subnet.gateway_ip)
    return {
        "ipv4": {"gateway_ip": best[1] if best else None, "link_id": None},
        "ipv6": {"gateway_ip": None, "link_id": None},
    }
