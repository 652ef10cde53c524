"""MAAS's forms for building interfaces on a machine: ``BondInterfaceForm``,
``VLANInterfaceForm``, ``BridgeInterfaceForm`` (and ``AcquiredBridgeInterfaceForm`` on an
Allocated machine), with what saving one does to its parents (MAAS 3.5's
``forms/interface.py``, ``models/interface.py`` and ``models/signals/interfaces.py``;
docs/simulator.md, "Networking").

Each ``create_*`` checks the request's fields against the machine's interfaces and either adds
the new interface or raises MAAS's 400 with its field errors. Parents are the machine's own
interfaces, by id: an interface of another machine is not one of the choices.
"""

from __future__ import annotations

from typing import Any

from maas_simulator.errors import ApiError, invalid
from maas_simulator.interfaces import Interface, Link, children, clear_links, ensure_link_up
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine
from maas_simulator.wire import (
    CHOICE,
    MAC,
    REQUIRED,
    null_boolean,
    whole_number,
)

BOND_MODES = (
    "balance-rr",
    "active-backup",
    "balance-xor",
    "broadcast",
    "802.3ad",
    "balance-tlb",
    "balance-alb",
)
LACP_RATES = ("fast", "slow")
XMIT_HASH_POLICIES = ("layer2", "layer2+3", "layer3+4", "encap2+3", "encap3+4")
BRIDGE_TYPES = ("standard", "ovs")
DEFAULT_BRIDGE_FD = 15


def _choice(name: str, choices: tuple[str, ...]) -> str:
    """``compose_invalid_choice_text`` for the field ``name``."""
    listed = ", ".join(f"'{c}'" for c in choices)
    return f"'{{value}}' is not a valid {name}.  It should be one of: {listed}."


class _Form:
    """The fields every interface form shares: parents, vlan, mtu, tags, accept_ra."""

    def __init__(self, sim: Simulator, m: Machine, data: dict[str, str], parents: list[str]):
        self.sim, self.m, self.data = sim, m, data
        self.errors: dict[str, list[str]] = {}
        self.parents = self._parents(parents)
        self.vlan_given = "vlan" in data
        self.vlan = self._vlan(data.get("vlan", ""))
        self.mtu = whole_number(data, "mtu", self.errors, minimum=552)
        self.tags = [t for t in (x.strip() for x in data.get("tags", "").split(",")) if t]
        self.accept_ra = null_boolean(data.get("accept_ra"))

    def _parents(self, refs: list[str]) -> list[Interface]:
        """``ModelMultipleChoiceField`` over the machine's own interfaces, by id."""
        own = {str(i.id): i for i in self.m.interfaces}
        for ref in refs:
            if not ref.strip().isdigit():
                self.errors["parents"] = [f"\u201c{ref}\u201d is not a valid value."]
                return []
        for ref in refs:
            if ref.strip() not in own:
                self.errors["parents"] = [
                    f"Select a valid choice. {ref.strip()} is not one of the available choices."
                ]
                return []
        return [own[ref] for ref in dict.fromkeys(r.strip() for r in refs)]

    def _vlan(self, ref: str) -> int | None:
        ref = ref.strip()
        if not ref:
            return None
        if ref.isdigit() and int(ref) in self.sim.net.vlans:
            return int(ref)
        self.errors["vlan"] = [CHOICE]
        return None

    def name_taken(self, name: str) -> bool:
        return any(i.name == name for i in self.m.interfaces)

    def in_use(self, parents: list[Interface], allow_vlans: bool = False) -> list[str]:
        """``get_delinquent_children``: parents that already have a child (bridges may share
        a parent with VLAN interfaces)."""
        return sorted(
            p.name
            for p in parents
            if any(not (allow_vlans and c.type == "vlan") for c in children(p, self.m.interfaces))
        )

    def params(self, fields: dict[str, Any]) -> dict[str, Any]:
        params = dict(fields)
        if self.accept_ra is not None:
            params["accept-ra"] = self.accept_ra
        return params

    def build(
        self, kind: str, name: str, mac: str, vlan: int | None, params: dict[str, Any]
    ) -> Interface:
        return Interface(
            id=self.sim.new_id(),
            name=name,
            mac_address=mac,
            type=kind,
            parents=[p.id for p in self.parents],
            params=params,
            vlan_id=vlan,
            mtu=self.mtu,
            tags=self.tags,
            interface_speed=0,
            link_speed=0,
            vendor=None,
            product=None,
            firmware_version=None,
            # a VLAN interface reports no carrier of its own (recorded against MAAS 3.5.10)
            link_connected=kind != "vlan",
        )


def _mac(form: _Form) -> str:
    """A child's MAC: the one given (checked), else its first parent's."""
    given = form.data.get("mac_address")
    if given is None:
        return form.parents[0].mac_address if form.parents else ""
    mac = given.strip().lower().replace("-", ":")
    if not MAC.match(mac):
        form.errors["mac_address"] = [f"'{given}' is not a valid MAC address."]
    return mac


def _bond_params(form: _Form) -> dict[str, Any]:
    """The ``bond_*`` fields; a new bond takes each one's initial value when not given."""
    data, errors = form.data, form.errors
    params: dict[str, Any] = {}
    for key, choices, initial in (
        ("bond_mode", BOND_MODES, "balance-rr"),
        ("bond_lacp_rate", LACP_RATES, "fast"),
        ("bond_xmit_hash_policy", XMIT_HASH_POLICIES, "layer2"),
    ):
        value = data.get(key, "")
        if value and value not in choices:
            errors[key] = [_choice(key, choices).format(value=value)]
        params[key] = value.strip() or initial
    for key, default, maximum in (
        ("bond_miimon", 100, None),
        ("bond_downdelay", 0, None),
        ("bond_updelay", 0, None),
        ("bond_num_grat_arp", 1, 255),
    ):
        number = whole_number(data, key, errors, minimum=0, maximum=maximum)
        params[key] = default if number is None else number
    return dict(sorted(params.items()))


def adopt_parents(sim: Simulator, m: Machine, child: Interface) -> None:
    """Saving a bond or bridge (``Interface._update_parents``): its parents lose their links
    and move to its VLAN; a parent's MTU grows to the child's
    (``interface_mtu_params_update``). The new interface gets a LINK_UP link."""
    for parent in (i for i in m.interfaces if i.id in child.parents):
        if child.type in ("bond", "bridge"):
            clear_links(sim.net, parent)
            parent.vlan_id = child.vlan_id
        if child.mtu and (parent.mtu is None or parent.mtu < child.mtu):
            parent.mtu = child.mtu
    ensure_link_up(child, sim.new_id)
    m.touch(sim.now())


def create_bond(sim: Simulator, m: Machine, data: dict[str, str], refs: list[str]) -> Interface:
    """``create_bond``: ``name``, ``parents`` (physical, unused, on one VLAN), ``mac_address``
    (default: the first parent's), ``vlan`` (default: the parents'), ``bond_*``, ``mtu``."""
    form = _Form(sim, m, data, refs)
    parents = form.parents
    if "parents" not in form.errors and not parents:
        form.errors["parents"] = ["A bond interface must have one or more parents."]
    name = data.get("name", "").strip()
    if not name:
        form.errors["name"] = [REQUIRED]
    params = form.params(_bond_params(form))
    mac = _mac(form)
    vlan = form.vlan if form.vlan_given else (parents[0].vlan_id if parents else None)
    if parents and "parents" not in form.errors:
        taken = form.in_use(parents)
        if taken:
            form.errors["parents"] = [f"Interfaces already in-use: {', '.join(taken)}."]
        if {p.vlan_id for p in parents} != {vlan}:
            form.errors.setdefault("parents", []).append(
                "All parents must belong to the same VLAN."
            )
    if form.errors:
        raise invalid(form.errors)
    if any(p.type != "physical" for p in parents):
        raise invalid({"parents": ["Only physical interfaces can be bonded."]})
    if form.name_taken(name):
        raise invalid({"__all__": ["Interface with this Node config and Name already exists."]})
    bond = form.build("bond", name, mac, vlan, params)
    m.interfaces.append(bond)
    adopt_parents(sim, m, bond)
    return bond


def create_vlan(sim: Simulator, m: Machine, data: dict[str, str], refs: list[str]) -> Interface:
    """``create_vlan``: ``parent`` (one), a tagged ``vlan`` on the parent's fabric; named
    ``<parent>.<vid>`` unless ``name`` is given; the parent's MAC."""
    form = _Form(sim, m, data, refs)
    errors, parents = form.errors, form.parents
    if "parents" not in errors:
        if len(parents) != 1:
            errors["parents"] = ["A VLAN interface must have exactly one parent."]
        elif parents[0].type == "vlan":
            errors["parents"] = ["A VLAN interface can't have another VLAN interface as parent."]
        elif any(c.type == "bond" for c in children(parents[0], m.interfaces)):
            errors["parents"] = ["A VLAN interface can't have a parent that is already in a bond."]
    net = sim.net
    if "vlan" not in errors:
        if form.vlan is None:
            errors["vlan"] = ["A VLAN interface must be connected to a tagged VLAN."]
        elif net.vlans[form.vlan].vid == 0:
            errors["vlan"] = ["A VLAN interface can only belong to a tagged VLAN."]
    name = data.get("name", "").strip()
    if "vlan" not in errors and "parents" not in errors and form.vlan is not None:
        parent = parents[0]
        if parent.vlan_id is None:  # MAAS's form reads the parent VLAN's fabric: a 500
            raise ApiError(500, "'NoneType' object has no attribute 'fabric_id'")
        if net.vlans[parent.vlan_id].fabric_id != net.vlans[form.vlan].fabric_id:
            errors["vlan"] = [
                "A VLAN interface can only belong to a tagged VLAN on the same fabric as its "
                "parent interface."
            ]
        name = name or f"{parent.name}.{net.vlans[form.vlan].vid}"
        if form.name_taken(name):
            errors["name"] = [
                f"Node {m.system_id} ({m.hostname}) already has an interface named '{name}'."
            ]
    if "parents" in errors:  # the API names the field as it was sent
        errors["parent"] = errors.pop("parents")
    if errors:
        raise invalid(errors)
    iface = form.build("vlan", name, parents[0].mac_address, form.vlan, form.params({}))
    m.interfaces.append(iface)
    adopt_parents(sim, m, iface)
    return iface


def create_bridge(
    sim: Simulator, m: Machine, data: dict[str, str], refs: list[str], *, acquired: bool
) -> Interface:
    """``create_bridge``: one ``parent`` (not a bridge, not in a bond or bridge), ``name``,
    ``bridge_type``, ``bridge_stp``, ``bridge_fd``. On an Allocated machine the VLAN is the
    parent's and the parent's links move to the bridge (``AcquiredBridgeInterfaceForm``)."""
    if acquired:
        data = {k: v for k, v in data.items() if k != "vlan"}
    form = _Form(sim, m, data, refs)
    errors, parents = form.errors, form.parents
    if "parents" not in errors:
        if len(parents) != 1:
            errors["parents"] = ["A bridge interface must have exactly one parent."]
        elif parents[0].type == "bridge":
            errors["parents"] = [
                "A bridge interface can't have another bridge interface as parent."
            ]
        elif any(c.type in ("bond", "bridge") for c in children(parents[0], m.interfaces)):
            errors["parents"] = [
                "A bridge interface can't have a parent that is already in a bond or a bridge."
            ]
        elif taken := form.in_use(parents, allow_vlans=True):
            errors["parents"] = [f"Interfaces already in-use: {', '.join(taken)}."]
    name = data.get("name", "").strip()
    if not name:
        errors["name"] = [REQUIRED]
    kind = data.get("bridge_type", "")
    if kind and kind not in BRIDGE_TYPES:
        errors["bridge_type"] = [_choice("bridge_type", BRIDGE_TYPES).format(value=kind)]
    fd = whole_number(data, "bridge_fd", errors, minimum=0)
    stp = null_boolean(data.get("bridge_stp"))
    mac = _mac(form)
    if "parents" in errors:
        errors["parent"] = errors.pop("parents")
    if errors:
        raise invalid(errors)
    if form.name_taken(name):
        raise invalid({"__all__": ["Interface with this Node config and Name already exists."]})
    parent = parents[0]
    vlan = form.vlan if form.vlan_given else parent.vlan_id
    params = form.params(
        {
            "bridge_fd": DEFAULT_BRIDGE_FD if fd is None else fd,
            "bridge_stp": bool(stp),
            "bridge_type": kind or "standard",
        }
    )
    bridge = form.build("bridge", name, mac, vlan, params)
    moved: list[Link] = list(parent.links) if acquired else []
    parent.links = [] if acquired else parent.links
    m.interfaces.append(bridge)
    bridge.links = moved
    adopt_parents(sim, m, bridge)
    return bridge
