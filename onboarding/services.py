"""Onboarding write operations: start one, start a batch, record a node's enrollment.

Each is atomic and audited; work is handed to Celery only after commit (admission decides what
runs now and what stays queued behind the site's ``max_concurrent_workflows``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from maas_domain import audit, context, events
from maas_domain.errors import Conflict, Forbidden, GuardrailFailed, InvalidInput, NotFound
from maas_domain.models import MaasSite, Node, NodeState, SiteProfile, Sku
from maas_domain.models.sites import ProfileStatus
from maas_domain.services.guardrails import guard_problems, site_problems
from maas_domain.validators import hostname_error, ipv4_error
from maas_domain.workflow import engine
from maas_domain.workflow.models import WorkflowState
from maas_domain.workflows import open_on_node, open_workflows
from onboarding import payload
from onboarding.models import Onboarding, OnboardingBatch, OnboardingEvent

log = logging.getLogger("onboarding")
MAX_BATCH = 5000


@dataclass(frozen=True)
class Target:
    site: MaasSite
    profile: SiteProfile
    sku: Sku


def _target(site_id: Any, profile_id: Any, sku_id: Any) -> Target:
    errors: dict[str, list[str]] = {}
    site = MaasSite.objects.filter(pk=site_id).first()
    if site is None:
        errors["site_id"] = [f"Site {site_id} does not exist."]
    profile = SiteProfile.objects.filter(pk=profile_id).select_related("site").first()
    if profile is None or (site is not None and profile.site_id != site.pk):
        errors["profile_id"] = [f"Profile {profile_id} does not exist on this site."]
    sku = Sku.objects.filter(pk=sku_id).first()
    if sku is None:
        errors["sku_id"] = [f"SKU {sku_id} does not exist."]
    if errors:
        raise InvalidInput("Invalid onboarding target.", fields=errors)
    assert site is not None and profile is not None and sku is not None
    return Target(site, profile, sku)


def target_problems(site: MaasSite, profile: SiteProfile, sku: Sku) -> list[str]:
    """Seed 001 §6, checked when a request arrives and again by the preflight stage: site
    enabled, its probe healthy and recent, profile active, SKU active."""
    problems = site_problems(site)
    if profile.status != ProfileStatus.ACTIVE:
        problems.append(f"profile {profile.name} is disabled")
    if not sku.active:
        problems.append(f"SKU {sku.code} is not active")
    return problems


def check_guardrails(target: Target, *, hostnames: list[str], confirm_host: str | None) -> None:
    """The target checks, plus: a guarded site needs a confirmation naming an approved host."""
    site = target.site
    problems = target_problems(site, target.profile, target.sku)
    problems += guard_problems(site, hostnames, confirm_host)
    if problems:
        raise GuardrailFailed("; ".join(problems), problems=problems)


def _open_conflict(site: MaasSite, hostname: str) -> Conflict:
    other = Onboarding.objects.filter(
        Onboarding.open_filter(), site=site, hostname=hostname
    ).first()
    return Conflict(
        f"{hostname} already has an open onboarding"
        + (f" ({other.pk}, {other.state})" if other else ""),
        open_onboarding={"id": other.pk, "state": other.state, "stage": other.stage}
        if other
        else None,
    )


def _take_node(
    site: MaasSite,
    sku: Sku,
    hostname: str,
    ipmi_ip: str,
    existing: Node | None,
    *,
    checked: bool = False,
) -> Node:
    """The node row an onboarding provisions (``checked``: the caller already made sure no
    other kind of workflow holds it)."""
    if existing is None:
        existing = Node(site=site, sku=sku, hostname=hostname, ipmi_ip=ipmi_ip)
    elif not checked and (busy := open_on_node(existing.pk, exclude=_onboardings_of(existing))):
        raise Conflict(
            f"node {hostname} has an open {busy[0]['kind']} ({busy[0]['id']}, {busy[0]['state']})",
            open_workflows=busy,
        )
    elif existing.state not in (NodeState.REGISTERED, NodeState.PROVISIONING):
        raise Conflict(
            f"node {hostname} is {existing.state}; onboarding needs a new or provisioning node "
            "(use a reimage decommission for an active node)",
            node={"id": existing.pk, "state": existing.state},
        )
    existing.sku, existing.ipmi_ip = sku, ipmi_ip
    existing.start_provisioning()
    return existing


def _onboardings_of(node: Node) -> set[tuple[str, int]]:
    """Open onboardings of the node: the unique constraint reports those (with their id)."""
    return {
        ("onboarding", pk)
        for pk in Onboarding.objects.filter(Onboarding.open_filter(), node=node).values_list(
            "id", flat=True
        )
    }


def onboarding_start(
    *,
    actor: audit.Actor,
    site_id: Any,
    profile_id: Any,
    sku_id: Any,
    hostname: str,
    ipmi_ip: str,
    confirm_host: str | None = None,
) -> Onboarding:
    target = _target(site_id, profile_id, sku_id)
    check_guardrails(target, hostnames=[hostname], confirm_host=confirm_host)
    with transaction.atomic():
        # Starts on one site queue here briefly, so the node check below cannot race.
        MaasSite.objects.select_for_update().filter(pk=target.site.pk).first()
        live = (
            Node.objects.select_for_update()
            .filter(site=target.site, hostname=hostname)
            .exclude(state=NodeState.RETIRED)
        )
        node = _take_node(target.site, target.sku, hostname, ipmi_ip, live.first())
        node.save()
        try:
            with transaction.atomic():
                wf = Onboarding.objects.create(
                    site=target.site,
                    profile=target.profile,
                    sku=target.sku,
                    node=node,
                    hostname=hostname,
                    ipmi_ip=ipmi_ip,
                    stage="preflight",
                    confirmed_host=confirm_host or "",
                    correlation_id=context.current_correlation_id(),
                )
        except IntegrityError as exc:
            raise _open_conflict(target.site, hostname) from exc
        OnboardingEvent.objects.create(
            onboarding=wf,
            kind="workflow.created",
            stage="preflight",
            attempt=1,
            message=f"onboarding requested by {audit.actor_name(actor)}",
            actor_name=audit.actor_name(actor),
        )
        audit.record(actor=actor, action="onboarding.start", target=wf, after=audit.snapshot(wf))
        events.emit("onboarding", "started", wf)
        engine.admit_after_commit(target.site.pk)
    return wf


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
    *, actor: audit.Actor, site_id: Any, profile_id: Any, sku_id: Any, rows: Any
) -> OnboardingBatch:
    """All or nothing: any bad row, in-batch duplicate or host already onboarding rejects all."""
    errors = _row_errors(rows)
    target = _target(site_id, profile_id, sku_id)
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
            for w in open_workflows(node_id__in=[n.pk for n in nodes.values()])
            if w["kind"] != "onboarding"
        }
        for i, row in enumerate(rows):
            host = row["hostname"]
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
            taken = _take_node(
                site, target.sku, row["hostname"], row["ipmi_ip"], node, checked=True
            )
            (existing if node is not None else new_nodes).append(taken)
            nodes[row["hostname"]] = taken
        Node.objects.bulk_create(new_nodes, batch_size=1000)
        Node.objects.bulk_update(existing, ["state", "sku", "ipmi_ip"], batch_size=1000)
        batch = OnboardingBatch.objects.create(
            site=site,
            profile=target.profile,
            sku=target.sku,
            size=len(rows),
            created_by=audit.actor_name(actor),
            correlation_id=cid,
        )
        try:
            with transaction.atomic():
                flows = Onboarding.objects.bulk_create(
                    [
                        Onboarding(
                            site=site,
                            profile=target.profile,
                            sku=target.sku,
                            batch=batch,
                            node=nodes[r["hostname"]],
                            hostname=r["hostname"],
                            ipmi_ip=r["ipmi_ip"],
                            stage="preflight",
                            correlation_id=cid,
                        )
                        for r in rows
                    ],
                    batch_size=1000,
                )
        except IntegrityError as exc:
            raise Conflict(
                "A host in the batch started onboarding concurrently; retry the batch."
            ) from exc
        OnboardingEvent.objects.bulk_create(
            [
                OnboardingEvent(
                    onboarding=wf,
                    kind="workflow.created",
                    stage="preflight",
                    attempt=1,
                    message=f"onboarding requested by {audit.actor_name(actor)} (batch {batch.pk})",
                    actor_name=audit.actor_name(actor),
                )
                for wf in flows
            ],
            batch_size=1000,
        )
        events.emit_many("onboarding", "started", flows, batch_id=batch.pk)
        audit.record(
            actor=actor,
            action="onboarding.start_batch",
            target=batch,
            after={
                "size": len(rows),
                "hostnames": hosts,
                "onboarding_ids": [wf.pk for wf in flows],
            },
        )
        engine.admit_after_commit(site.pk)
    return batch


def onboarding_enroll(
    *, onboarding_id: Any, attempt: Any, token: str, hostname: str, agent_version: str
) -> Onboarding:
    """A node agent enrolls with the token of its onboarding's current attempt, once.

    A refusal is recorded in the timeline (committed on its own: the refusing request changes
    nothing else) and logged without the token.
    """
    refusal = ""
    with transaction.atomic():
        wf = Onboarding.objects.select_for_update().filter(pk=onboarding_id).first()
        if wf is None:
            raise NotFound("No such onboarding.")
        if (
            not wf.is_open
            or wf.token_attempt != wf.attempt
            or str(attempt) != str(wf.attempt)
            or payload.token_hash(token or "") != wf.enrollment_token_hash
            or hostname != wf.hostname
        ):
            refusal = f"stale or invalid enrollment token (claimed attempt {attempt})"
        elif wf.enrolled_attempt == wf.attempt:
            refusal = f"enrollment token of attempt {wf.attempt} was already used"
        else:
            now = timezone.now()
            wf.agent_started_at = wf.agent_started_at or now
            wf.enrolled_at, wf.enrolled_attempt = now, wf.attempt
            wf.save(
                update_fields=["agent_started_at", "enrolled_at", "enrolled_attempt", "updated_at"]
            )
            engine_add_event(
                wf, "node.enrolled", f"node agent {agent_version} enrolled (attempt {wf.attempt})"
            )
            if wf.state == WorkflowState.WAITING and wf.stage == "enrollment":
                engine.wake(engine.KINDS["onboarding"], wf.pk, "node enrolled")
            return wf
    log.warning(
        "refused enrollment for onboarding %s: %s",
        wf.pk,
        refusal,
        extra={"onboarding_id": wf.pk, "hostname": wf.hostname},
    )
    with transaction.atomic():
        engine_add_event(wf, "enrollment.refused", refusal)
    raise Forbidden("This enrollment token is not valid for the current attempt, or was used.")


def engine_add_event(wf: Onboarding, kind: str, message: str) -> None:
    engine.KINDS["onboarding"].add_event(wf, kind, message, stage=wf.stage)
