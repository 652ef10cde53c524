"""Records owned by the MAAS domain and the records it coordinates (docs/architecture.md,
"Data")."""

from maas_domain.models.audit import AuditLog
from maas_domain.models.evidence import EvidenceKind, ImmutableEvidence, QuarantineEvidence
from maas_domain.models.inventory import (
    Allocation,
    AllocationState,
    Cordon,
    CordonReason,
    Node,
    NodeState,
    Sku,
)
from maas_domain.models.outbox import OutboxEvent
from maas_domain.models.security import (
    Access,
    ApiToken,
    IdempotencyRecord,
    SecretVersion,
    TokenScope,
)
from maas_domain.models.sites import (
    CredentialKind,
    MaasSite,
    PowerCredentialOverride,
    RoceAssignment,
    SiteCredential,
    SiteProfile,
    SiteStatus,
)

__all__ = [
    "Access",
    "Allocation",
    "AllocationState",
    "ApiToken",
    "AuditLog",
    "Cordon",
    "CordonReason",
    "CredentialKind",
    "EvidenceKind",
    "IdempotencyRecord",
    "ImmutableEvidence",
    "MaasSite",
    "Node",
    "NodeState",
    "OutboxEvent",
    "PowerCredentialOverride",
    "QuarantineEvidence",
    "RoceAssignment",
    "SecretVersion",
    "SiteCredential",
    "SiteProfile",
    "SiteStatus",
    "Sku",
    "TokenScope",
]
