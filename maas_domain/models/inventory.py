"""SKUs and nodes: the inventory rows the MAAS domain coordinates (Inventory.Catalog stand-in)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django_fsm import FSMField

from maas_domain.fsm import Lifecycle, move
from maas_domain.models.sites import MaasSite, Revisioned


class Sku(Revisioned):
    """A hardware class a node is bound to (e.g. 8x H100 SXM). Deleted only while nothing
    refers to it; otherwise disabled (``active = False``), so history keeps its SKU."""

    code = models.SlugField(max_length=63, unique=True)
    name = models.CharField(max_length=200)
    gpu_model = models.CharField(max_length=100, blank=True, default="")
    gpu_count = models.PositiveSmallIntegerField(default=0)
    # The rest of the hardware profile (maas_domain/hardware.py, docs/hardware.md): CPUs,
    # memory, NICs by role, disks, firmware baselines, GPU PCI ids and NUMA placement.
    hardware = models.JSONField(default=dict, blank=True)
    active = models.BooleanField(default=True)

    class Meta:
        db_table = "skus"
        ordering = ["code"]
        verbose_name = "SKU"

    def __str__(self) -> str:
        return self.code


class NodeState(models.TextChoices):
    # Labels equal the values: the API and the admin show the values as they are.
    REGISTERED = "registered", "registered"
    PROVISIONING = "provisioning", "provisioning"
    ACTIVE = "active", "active"
    DRAINING = "draining", "draining"
    QUARANTINED = "quarantined", "quarantined"
    IN_REPAIR = "in_repair", "in_repair"  # handed to repair (a repair workflow holds it)
    RETIRED = "retired", "retired"


# states a decommission may start from (draining: left by an earlier decommission)
DECOMMISSIONABLE = (NodeState.ACTIVE, NodeState.QUARANTINED, NodeState.DRAINING)


class Node(Lifecycle):
    """A GPU machine in our inventory. The FSM only guards which lifecycle moves are legal;
    services perform them (and their side effects) inside a transaction.

    Invariant: at most one non-retired node per (site, hostname), per (site, IPMI address) and
    per (site, MAAS system id); a retired node keeps its history and a later onboarding of the
    same host creates a new row.
    """

    site = models.ForeignKey(MaasSite, on_delete=models.PROTECT, related_name="nodes")
    sku = models.ForeignKey(Sku, on_delete=models.PROTECT, related_name="nodes")
    hostname = models.CharField(max_length=63)
    ipmi_ip = models.GenericIPAddressField(protocol="IPv4", null=True, blank=True)
    maas_system_id = models.CharField(max_length=32, blank=True, default="")
    state = FSMField(default=NodeState.REGISTERED, choices=NodeState.choices, protected=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "nodes"
        ordering = ["hostname"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "hostname"],
                condition=~Q(state=NodeState.RETIRED),
                name="uniq_live_node_hostname_per_site",
            ),
            models.UniqueConstraint(
                fields=["site", "ipmi_ip"],
                condition=~Q(state=NodeState.RETIRED) & Q(ipmi_ip__isnull=False),
                name="uniq_live_node_ipmi_ip_per_site",
            ),
            models.UniqueConstraint(
                fields=["site", "maas_system_id"],
                condition=~Q(state=NodeState.RETIRED) & ~Q(maas_system_id=""),
                name="uniq_live_node_system_id_per_site",
            ),
        ]
        indexes = [models.Index(fields=["state"])]

    def __str__(self) -> str:
        return self.hostname

    @move(
        state,
        [NodeState.REGISTERED, NodeState.PROVISIONING, NodeState.DRAINING],
        NodeState.PROVISIONING,
    )
    def start_provisioning(self) -> None:
        """Onboarding or reimage takes the node."""

    @move(state, NodeState.PROVISIONING, NodeState.ACTIVE)
    def activate(self) -> None:
        """All completion gates held."""

    @move(
        state, [NodeState.ACTIVE, NodeState.QUARANTINED, NodeState.PROVISIONING], NodeState.DRAINING
    )
    def drain(self) -> None:
        """The node leaves the pool before MAAS is touched (or a reimage starts over)."""

    @move(
        state, [NodeState.PROVISIONING, NodeState.ACTIVE, NodeState.DRAINING], NodeState.QUARANTINED
    )
    def quarantine(self) -> None:
        """Not returned to any pool (e.g. disks not erased)."""

    @move(state, NodeState.QUARANTINED, NodeState.PROVISIONING)
    def recheck(self) -> None:
        """The onboarding that quarantined the node for its hardware runs again (repaired)."""

    @move(state, NodeState.DRAINING, NodeState.ACTIVE)
    def return_to_pool(self) -> None:
        """Storage cleanup succeeded."""

    @move(state, [NodeState.ACTIVE, NodeState.QUARANTINED], NodeState.IN_REPAIR)
    def hand_to_repair(self) -> None:
        """Out of service with its RMA packet, the machine Broken in MAAS (docs/repair.md)."""

    @move(state, NodeState.IN_REPAIR, NodeState.PROVISIONING)
    def requalify(self) -> None:
        """Repair reported done: commissioned and judged again from fresh data."""

    @move(state, NodeState.IN_REPAIR, NodeState.QUARANTINED)
    def end_repair(self) -> None:
        """A repair cancelled or abandoned: back where it came from, still out of service."""

    @move(
        state, [NodeState.REGISTERED, NodeState.DRAINING, NodeState.QUARANTINED], NodeState.RETIRED
    )
    def retire(self) -> None:
        """Full decommission: the row stays for history."""


class AllocationState(models.TextChoices):
    ACTIVE = "active", "active"
    RELEASED = "released", "released"
    FORCE_RELEASED = "force_released", "force_released"


class Allocation(Lifecycle):
    """A tenant workload holding a node (the allocation record the scheduler keeps). A node with
    an active allocation is not decommissioned until it is drained, or force-released on an
    explicit, audited request."""

    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="allocations")
    holder = models.CharField(max_length=200, help_text="Tenant or workload holding the node.")
    state = FSMField(
        default=AllocationState.ACTIVE, choices=AllocationState.choices, protected=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.CharField(max_length=150, blank=True, default="")
    release_reason = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        db_table = "allocations"
        ordering = ["-id"]
        indexes = [models.Index(fields=["node", "state"])]

    def __str__(self) -> str:
        return f"allocation {self.pk} of {self.node_id} by {self.holder}"

    @move(state, AllocationState.ACTIVE, AllocationState.RELEASED)
    def release(self) -> None:
        """The holder drained its workload."""

    @move(state, AllocationState.ACTIVE, AllocationState.FORCE_RELEASED)
    def force_release(self) -> None:
        """An operator took the node back without waiting for the holder."""


class CordonReason(models.TextChoices):
    # Labels equal the values: the API and the admin show the values as they are.
    DRIFT = "drift", "drift"  # an open critical drift of its machine (reconciliation)
    QUARANTINE = "quarantine", "quarantine"  # hardware, acceptance or erase evidence frozen
    OPERATOR = "operator", "operator"  # an operator's cordon, with a reason
    REPAIR = "repair", "repair"  # handed to repair


class Cordon(models.Model):
    """Why a node may not take new work (docs/operations.md, "Cordons"), like a Kubernetes
    taint: a node with any active cordon is unschedulable whatever its state. A tenant's
    existing allocation is not touched (the allocation domain is told to drain it). Lifted by a
    requalification (the node passed conformance and acceptance on data newer than the cordon)
    or by an operator with a reason; a lifted row stays for history."""

    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="cordons")
    reason = models.CharField(max_length=16, choices=CordonReason.choices)
    # what raised it, e.g. "drift:12" or "evidence:3"; "" for an operator's
    source = models.CharField(max_length=64, blank=True, default="")
    detail = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, default="")
    lifted_at = models.DateTimeField(null=True, blank=True)
    lifted_by = models.CharField(max_length=150, blank=True, default="")
    lift_reason = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        db_table = "node_cordons"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "reason", "source"],
                condition=Q(lifted_at__isnull=True),
                name="uniq_active_cordon_per_cause",
            )
        ]
        indexes = [models.Index(fields=["node"], condition=Q(lifted_at__isnull=True),
                                name="active_cordons_by_node")]  # fmt: skip

    def __str__(self) -> str:
        return f"cordon {self.pk} of node {self.node_id} ({self.reason})"
