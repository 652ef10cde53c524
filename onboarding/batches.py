"""A batch of onboardings as one operation: start many hosts at once (all or none, each row
checked), resume a paused batch, cancel what is still open. The canary and failure budget that
pause a batch are the kind's hooks (``budget.py``).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from maas_domain import audit, context
from maas_domain.errors import Conflict, InvalidInput, NotFound
from maas_domain.models import MaasSite, Node, NodeState
from maas_domain.validators import hostname_error, ipv4_error
from maas_domain.work import OPEN_STATES, WorkflowState, open_workflows
from onboarding import budget
from onboarding.models import BatchState, Onboarding, OnboardingBatch
from onboarding.services import (
    bmc_holders,
    check_guardrails,
    resolve_target,
    take_node,
)
from onboarding.workflow import KIND
from workflows import verbs
from workflows.dispatch import admit_after_commit
from workflows.scheduling import Start, start_workflows

MAX_BATCH = 5000


def _row_errors(rows: Any) -> list[dict[str, Any]]:
    if not isinstance(rows, list) or not rows:
        raise InvalidInput("Invalid batch.", fields={"rows": ["Must be a non-empty list."]})
    if len(rows) > MAX_BATCH:
        raise InvalidInput("Invalid batch.", fields={"rows": [f"At most {MAX_BATCH} rows."]})
    errors: list[dict[str, Any]] = []
    seen_host: dict[str, int] = {}
    seen_ip: dict[str, int] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            errors.append({"index": i, "field": None, "reason": "Must be an object."})
            continue
        for key in sorted(set(row) - {"hostname", "ipmi_ip"}):
            errors.append({"index": i, "field": key, "reason": "Unknown field."})
        for key, check in (("hostname", hostname_error), ("ipmi_ip", ipv4_error)):
            if key not in row:
                errors.append({"index": i, "field": key, "reason": "This field is required."})
            elif reason := check(row[key]):
                errors.append({"index": i, "field": key, "reason": reason})
        host, ip = row.get("hostname"), row.get("ipmi_ip")
        if isinstance(host, str) and host in seen_host:
            errors.append(
                {"index": i, "field": "hostname", "reason": f"Duplicate of row {seen_host[host]}."}
            )
        elif isinstance(host, str):
            seen_host[host] = i
        if isinstance(ip, str) and ip in seen_ip:
            errors.append(
                {
                    "index": i,
                    "field": "ipmi_ip",
                    "reason": f"Same IPMI address as row {seen_ip[ip]}.",
                }
            )
        elif isinstance(ip, str):
            seen_ip[ip] = i
    return errors


def onboarding_start_batch(
    *, actor: audit.Actor, site_id: int, profile_id: int, sku_id: int, rows: Any
) -> OnboardingBatch:
    """All or nothing: any bad row, in-batch duplicate or host already onboarding rejects all."""
    errors = _row_errors(rows)
    target = resolve_target(site_id, profile_id, sku_id)
    if errors:
        raise InvalidInput(f"{len(errors)} row error(s); nothing was created.", rows=errors)
    check_guardrails(target, hostnames=[r["hostname"] for r in rows], confirm_host=None)
    site, hosts = target.site, [r["hostname"] for r in rows]
    cid = context.current_correlation_id()
    with transaction.atomic():
        MaasSite.objects.select_for_update().filter(pk=site.pk).first()
        busy = dict(
            Onboarding.objects.filter(
                Onboarding.open_filter(), site=site, hostname__in=hosts
            ).values_list("hostname", "id")
        )
        nodes = {
            n.hostname: n
            for n in Node.objects.select_for_update()
            .filter(site=site, hostname__in=hosts)
            .exclude(state=NodeState.RETIRED)
        }
        held = {
            w["hostname"]: w
            for w in open_workflows(limit=None, node_id__in=[n.pk for n in nodes.values()])
            if w["kind"] != "onboarding"
        }
        bmc = bmc_holders(site, {r["hostname"]: r["ipmi_ip"] for r in rows})
        for i, row in enumerate(rows):
            host = row["hostname"]
            if host in bmc:
                errors.append(
                    {
                        "index": i,
                        "field": "ipmi_ip",
                        "reason": f"{row['ipmi_ip']} is the BMC of live node {bmc[host]}.",
                    }
                )
            if host in held:
                w = held[host]
                errors.append(
                    {
                        "index": i,
                        "field": "hostname",
                        "reason": f"node {host} has an open {w['kind']} ({w['id']}).",
                    }
                )
            if host in busy:
                errors.append(
                    {
                        "index": i,
                        "field": "hostname",
                        "reason": f"{host} already has an open onboarding ({busy[host]}).",
                    }
                )
            node = nodes.get(host)
            if node is not None and node.state not in (
                NodeState.REGISTERED,
                NodeState.PROVISIONING,
            ):
                errors.append(
                    {"index": i, "field": "hostname", "reason": f"node {host} is {node.state}."}
                )
        if errors:
            raise InvalidInput(f"{len(errors)} row error(s); nothing was created.", rows=errors)
        new_nodes: list[Node] = []
        existing: list[Node] = []
        for row in rows:
            node = nodes.get(row["hostname"])
            taken = take_node(site, target.sku, row["hostname"], row["ipmi_ip"], node, checked=True)
            (existing if node is not None else new_nodes).append(taken)
            nodes[row["hostname"]] = taken
        Node.objects.bulk_create(new_nodes, batch_size=1000)
        Node.objects.bulk_update(existing, ["state", "sku", "ipmi_ip"], batch_size=1000)
        policy = target.profile.effective_policy()
        canary = min(policy.batch_canary_size, len(rows))
        batch = OnboardingBatch.objects.create(
            site=site,
            profile=target.profile,
            sku=target.sku,
            size=len(rows),
            created_by=audit.actor_name(actor),
            correlation_id=cid,
            canary_size=canary,
            pause_after_failures=policy.batch_pause_after_failures,
            pause_failure_percent=policy.batch_pause_failure_percent,
        )
        try:
            start_workflows(
                KIND,
                [
                    Onboarding(
                        site=site,
                        profile=target.profile,
                        sku=target.sku,
                        batch=batch,
                        node=nodes[r["hostname"]],
                        hostname=r["hostname"],
                        ipmi_ip=r["ipmi_ip"],
                        batch_canary=i < canary,  # the first rows, in request order
                    )
                    for i, r in enumerate(rows)
                ],
                Start(
                    actor=actor,
                    message=f"onboarding requested by {audit.actor_name(actor)} (batch {batch.pk})",
                    audit_action="onboarding.start_batch",
                    batch=batch,
                    event_data={"batch_id": batch.pk},
                ),
            )
        except IntegrityError as exc:
            raise Conflict(
                "A host in the batch started onboarding concurrently; retry the batch."
            ) from exc
    return batch


def _batch_for_update(batch_id: int) -> OnboardingBatch:
    batch = OnboardingBatch.objects.select_for_update().filter(pk=batch_id).first()
    if batch is None:
        raise NotFound("No such batch.")
    return batch


def batch_resume(*, actor: audit.Actor, batch_id: int, reason: str = "") -> OnboardingBatch:
    """Lift a batch's pause: its pending workflows are admitted again. The failure budget
    counts from here; a canary that did not succeed is passed by the operator's word."""
    with transaction.atomic():
        batch = _batch_for_update(batch_id)
        if batch.state != BatchState.PAUSED:
            raise Conflict(f"batch {batch.pk} is {batch.state}; only a paused batch resumes.")
        before = {"state": batch.state, "paused_reason": batch.paused_reason}
        batch.failures_before_resume = Onboarding.objects.filter(
            batch=batch, state__in=budget.FAILED
        ).count()
        batch.resume()
        if batch.canary_size and batch.canary_passed_at is None:
            batch.canary_passed_at = timezone.now()
        batch.save()
        audit.record(
            actor=actor,
            action="onboarding.batch_resume",
            target=batch,
            before=before,
            after={"state": batch.state, "failures_before_resume": batch.failures_before_resume},
            reason=reason,
        )
        admit_after_commit(batch.site_id)
    return batch


def batch_cancel(*, actor: audit.Actor, batch_id: int, reason: str = "") -> dict[str, Any]:
    """Cancel a whole batch: admission stops at once (one transaction), then each open
    onboarding of it is cancelled as the cancel verb does (pending ones at once, live ones
    through their cancel stage), each audited. Workflows waiting for an operator
    (manual_intervention) are left to them and listed."""
    with transaction.atomic():
        batch = _batch_for_update(batch_id)
        if batch.state == BatchState.CANCELLED:
            raise Conflict(f"batch {batch.pk} is already cancelled.")
        if not Onboarding.objects.filter(batch=batch, state__in=OPEN_STATES).exists():
            raise Conflict(f"batch {batch.pk} has finished: every onboarding of it ended.")
        before = {"state": batch.state}
        batch.cancel()
        batch.save(update_fields=["state"])
        audit.record(
            actor=actor,
            action="onboarding.batch_cancel",
            target=batch,
            before=before,
            after={"state": batch.state},
            reason=reason,
        )
    cancelled: list[int] = []
    for pk in Onboarding.objects.filter(
        batch=batch, state__in=verbs.VERBS["cancel"].sources
    ).values_list("id", flat=True):
        try:
            verbs.apply(KIND, pk, "cancel", actor=actor, reason=reason or f"batch {batch.pk}")
        except Conflict:
            continue  # it ended meanwhile
        cancelled.append(pk)
    left = list(
        Onboarding.objects.filter(batch=batch, state=WorkflowState.MANUAL_INTERVENTION)
        .order_by("id")
        .values_list("id", flat=True)
    )
    return {"batch": batch, "cancelled": cancelled, "left_for_operator": left}
