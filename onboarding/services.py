"""Onboarding write operations: start one, start a batch, record a node's enrollment.

Each is atomic and audited; work is handed to Celery only after commit (admission decides what
runs now and what stays queued behind the site's ``max_concurrent_workflows``).
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from maas_client.errors import MaasError
from maas_domain import audit, context
from maas_domain.errors import Conflict, Forbidden, GuardrailFailed, InvalidInput, NotFound
from maas_domain.models import MaasSite, Node, NodeState, SiteProfile, Sku
from maas_domain.models.sites import ProfileStatus
from maas_domain.observability import metrics
from maas_domain.secrets import SecretNotFound, SecretsError, get_backend
from maas_domain.services.guardrails import guard_problems, site_problems, target_problems
from maas_domain.site_client import client_for_site
from maas_domain.validators import hostname_error, ipv4_error
from maas_domain.work import WorkflowState, open_on_node, open_workflows
from onboarding import batches, payload
from onboarding.models import BatchState, Onboarding, OnboardingBatch
from onboarding.workflow import KIND
from workflows import verbs
from workflows.dispatch import admit_after_commit
from workflows.scheduling import Start, start_workflow, start_workflows, wake

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


def _bmc_holders(site: MaasSite, addresses: dict[str, str]) -> dict[str, str]:
    """hostname → the other live node that already has the IPMI address this hostname asks
    for (the database allows one live node per BMC on a site)."""
    held = dict(
        Node.objects.filter(site=site, ipmi_ip__in=set(addresses.values()))
        .exclude(state=NodeState.RETIRED)
        .values_list("ipmi_ip", "hostname")
    )
    return {host: held[ip] for host, ip in addresses.items() if ip in held and held[ip] != host}


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
        holders = _bmc_holders(target.site, {hostname: ipmi_ip})
        if hostname in holders:
            raise Conflict(
                f"{ipmi_ip} is the BMC of live node {holders[hostname]}; one BMC per live node",
                ipmi_ip=ipmi_ip,
            )
        node = _take_node(target.site, target.sku, hostname, ipmi_ip, live.first())
        node.save()
        try:
            wf = start_workflow(
                KIND,
                Onboarding(
                    site=target.site,
                    profile=target.profile,
                    sku=target.sku,
                    node=node,
                    hostname=hostname,
                    ipmi_ip=ipmi_ip,
                    confirmed_host=confirm_host or "",
                ),
                Start(
                    actor=actor,
                    message=f"onboarding requested by {audit.actor_name(actor)}",
                    audit_action="onboarding.start",
                ),
            )
        except IntegrityError as exc:
            raise _open_conflict(target.site, hostname) from exc
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
            for w in open_workflows(limit=None, node_id__in=[n.pk for n in nodes.values()])
            if w["kind"] != "onboarding"
        }
        bmc = _bmc_holders(site, {r["hostname"]: r["ipmi_ip"] for r in rows})
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
            taken = _take_node(
                site, target.sku, row["hostname"], row["ipmi_ip"], node, checked=True
            )
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


REFUSED = "Enrollment refused."


def _token_matches(wf: Onboarding | None, token: str) -> bool:
    """Constant-time comparison of the token's hash (a missing row compares against a dummy,
    so an unknown id costs the same as a wrong token)."""
    expected = wf.enrollment_token_hash if wf is not None else "0" * 64
    return hmac.compare_digest(payload.token_hash(token or ""), expected or "0" * 64)


def onboarding_enroll(
    *, onboarding_id: Any, attempt: Any, token: str, hostname: str, agent_version: str
) -> Onboarding:
    """A node agent enrolls with the token of its onboarding's current attempt, once.

    Every refusal is the same ``Forbidden`` (an unknown id looks like a wrong token: nothing
    tells a caller which ids exist) and is counted in ``maascp_node_refusals_total``. The check
    takes no lock; only a valid token locks the row. Refusals write at most
    ``NODE_REFUSAL_EVENTS`` timeline rows (and warnings) per onboarding, each without the token.
    """
    wf = Onboarding.objects.filter(pk=onboarding_id).first()
    valid = _token_matches(wf, token)
    refusal = ""
    if wf is None or not valid:
        refusal = f"stale or invalid enrollment token (claimed attempt {attempt})"
    else:
        with transaction.atomic():
            wf = Onboarding.objects.select_for_update().get(pk=wf.pk)
            if (
                not wf.is_open
                or wf.token_attempt != wf.attempt
                or str(attempt) != str(wf.attempt)
                or not _token_matches(wf, token)
                or hostname != wf.hostname
            ):
                refusal = f"stale or invalid enrollment token (claimed attempt {attempt})"
            elif wf.enrolled_attempt == wf.attempt:
                refusal = f"enrollment token of attempt {wf.attempt} was already used"
            else:
                # enrollment alone does not say the agent started: the node reports that
                wf.enrolled_at, wf.enrolled_attempt = timezone.now(), wf.attempt
                wf.save(update_fields=["enrolled_at", "enrolled_attempt", "updated_at"])
                KIND.add_event(
                    wf,
                    "node.enrolled",
                    f"node agent {agent_version} enrolled (attempt {wf.attempt})",
                )
                if wf.state == WorkflowState.WAITING and wf.stage == "enrollment":
                    wake(KIND, wf.pk, "node enrolled")
                return wf
    reason = "replayed" if "already used" in refusal else "invalid"
    _refuse_node(wf, "enroll", refusal, reason=reason, event="enrollment.refused")
    raise Forbidden(REFUSED)


NODE_PHASES = {"site_bundle": "site bootstrap bundle", "agent": "node agent"}
REPORT_REFUSED = "Report refused."


def _bootstrap_matches(wf: Onboarding | None, token: str) -> bool:
    """Constant-time comparison with the current payload's bootstrap token hash (a missing row
    compares against a dummy: an unknown id costs the same as a wrong token)."""
    expected = wf.bootstrap_token_hash if wf is not None else "0" * 64
    return hmac.compare_digest(payload.token_hash(token or ""), expected or "0" * 64)


def onboarding_node_report(
    *,
    onboarding_id: Any,
    attempt: Any,
    token: str,
    hostname: str,
    phase: str,
    ok: bool,
    detail: str = "",
    version: str = "",
) -> Onboarding:
    """The node reports one part of its first boot (the site bundle ran, the node agent
    started, or which failed), proving itself with the bootstrap token of the payload it runs.

    Each is its own completion gate (docs/onboarding.md, "First boot and the completion
    gates"); a failure is kept with its detail and wakes a workflow waiting for the node, which
    then fails with that part as its class. Refusals follow the enrollment endpoint's rules:
    one uniform ``Forbidden``, no lock before the token matched, counted, a bounded number of
    timeline rows, never the token.
    """
    label = NODE_PHASES[phase]
    wf = Onboarding.objects.filter(pk=onboarding_id).first()
    if wf is not None and _bootstrap_matches(wf, token):
        with transaction.atomic():
            row = Onboarding.objects.select_for_update().get(pk=wf.pk)
            if (
                row.is_open
                and row.token_attempt is not None
                and str(attempt) == str(row.token_attempt)
                and hostname == row.hostname
                and _bootstrap_matches(row, token)
            ):
                _record_report(row, phase, label, ok, detail, version)
                return row
    _refuse_node(wf, "report", f"refused a {label} report: invalid bootstrap token ({attempt})")
    raise Forbidden(REPORT_REFUSED)


def _record_report(
    wf: Onboarding, phase: str, label: str, ok: bool, detail: str, version: str
) -> None:
    now = timezone.now()
    what = f"{label} {version} " if version else f"{label} "
    if not ok:
        if not wf.node_failure:
            wf.node_failure = "site_bundle" if phase == "site_bundle" else "agent_start"
            wf.node_failure_detail = detail[:500]
        KIND.add_event(wf, f"node.{phase}_failed", f"{what}failed on the node: {detail or '-'}")
    elif phase == "site_bundle":
        wf.site_bundle_done_at = wf.site_bundle_done_at or now
        KIND.add_event(wf, "node.site_bundle", f"{what}ran on the node")
    else:
        wf.agent_started_at = wf.agent_started_at or now
        KIND.add_event(wf, "node.agent_started", f"{what}started on the node")
    wf.save(
        update_fields=[
            "node_failure",
            "node_failure_detail",
            "site_bundle_done_at",
            "agent_started_at",
            "updated_at",
        ]
    )
    if not ok and wf.state == WorkflowState.WAITING and wf.stage == "enrollment":
        wake(KIND, wf.pk, f"node reported {label} failure")


def _held_bootstrap_matches(wf: Onboarding | None, token: str) -> bool:
    """Is ``token`` the bootstrap token of the payload the node holds (``node_token_attempt``)?
    The current attempt's hash is on the row; an earlier attempt's token is read back from the
    secrets backend (a missing one matches nothing)."""
    held = wf.node_token_attempt if wf is not None else None
    if wf is None or held is None or held == wf.token_attempt:
        return _bootstrap_matches(wf if held is not None else None, token)
    try:
        stored = get_backend().read(payload.tokens_path(wf.pk, held))
    except SecretNotFound:
        return False
    return hmac.compare_digest(
        payload.token_hash(token or ""), payload.token_hash(stored.get("bootstrap_token", ""))
    )


def onboarding_checkin(
    *, onboarding_id: Any, attempt: Any, token: str, hostname: str
) -> dict[str, Any]:
    """A running node agent checks in with the bootstrap token it holds (docs/onboarding.md,
    "Tokens, attempts and reruns"). When its onboarding runs a newer attempt that deployed
    nothing (a rerun or adopt of a Deployed machine), the node is handed that attempt's tokens,
    once: its own are retired, and it reports and enrolls again with the new ones. Otherwise
    (also when the workflow is closed) nothing changes. Only a token the node cannot hold is
    refused, like a refused enrollment."""
    found = Onboarding.objects.filter(pk=onboarding_id).first()
    held = found.node_token_attempt if found is not None else None
    if (
        found is not None
        and str(attempt) == str(held)
        and hostname == found.hostname
        and _held_bootstrap_matches(found, token)
    ):
        with transaction.atomic():
            wf = Onboarding.objects.select_for_update().get(pk=found.pk)
            if wf.node_token_attempt == held:
                answer: dict[str, Any] = {"action": "none", "onboarding_id": wf.pk}
                newer = wf.is_open and wf.token_attempt == wf.attempt != held
                tokens = payload.read_tokens(wf) if newer else None
                if tokens is not None:
                    wf.node_token_attempt = wf.attempt
                    wf.save(update_fields=["node_token_attempt", "updated_at"])
                    KIND.add_event(
                        wf,
                        "node.tokens_rotated",
                        f"the node held attempt {held}'s tokens; handed attempt {wf.attempt}'s "
                        "over at its check-in (no redeploy)",
                        held_attempt=held,
                    )
                    answer = {
                        "action": "reenroll",
                        "onboarding_id": wf.pk,
                        "attempt": wf.attempt,
                        "bootstrap_token": tokens.bootstrap,
                        "enrollment_token": tokens.enrollment,
                    }
                return answer
    _refuse_node(found, "checkin", f"refused a check-in: invalid bootstrap token ({attempt})")
    raise Forbidden(REPORT_REFUSED)


def _refuse_node(
    wf: Onboarding | None,
    endpoint: str,
    refusal: str,
    *,
    reason: str = "invalid",
    event: str = "node.report_refused",
) -> None:
    """Count a refused node request; record it (its own transaction, never the token) in a
    bounded number of timeline rows and warnings per onboarding."""
    metrics.node_refused(endpoint, reason)
    if wf is None or wf.events.filter(kind=event).count() >= settings.NODE_REFUSAL_EVENTS:
        return
    log.warning(
        "refused node %s request for onboarding %s: %s",
        endpoint,
        wf.pk,
        refusal,
        extra={"onboarding_id": wf.pk, "hostname": wf.hostname},
    )
    with transaction.atomic():
        KIND.add_event(wf, event, refusal)


# -- a whole batch: resume, cancel ----------------------------------------------------------------


def _batch_for_update(batch_id: Any) -> OnboardingBatch:
    batch = OnboardingBatch.objects.select_for_update().filter(pk=batch_id).first()
    if batch is None:
        raise NotFound("No such batch.")
    return batch


def batch_resume(*, actor: audit.Actor, batch_id: Any, reason: str = "") -> OnboardingBatch:
    """Lift a batch's pause: its pending workflows are admitted again. The failure budget
    counts from here; a canary that did not succeed is passed by the operator's word."""
    with transaction.atomic():
        batch = _batch_for_update(batch_id)
        if batch.state != BatchState.PAUSED:
            raise Conflict(f"batch {batch.pk} is {batch.state}; only a paused batch resumes.")
        before = {"state": batch.state, "paused_reason": batch.paused_reason}
        batch.failures_before_resume = Onboarding.objects.filter(
            batch=batch, state__in=batches.FAILED
        ).count()
        batch.state = BatchState.RUNNING
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


def batch_cancel(*, actor: audit.Actor, batch_id: Any, reason: str = "") -> dict[str, Any]:
    """Cancel a whole batch: admission stops at once (one transaction), then each open
    onboarding of it is cancelled as the cancel verb does (pending ones at once, live ones
    through their cancel stage), each audited. Workflows waiting for an operator
    (manual_intervention) are left to them and listed."""
    with transaction.atomic():
        batch = _batch_for_update(batch_id)
        if batch.state == BatchState.CANCELLED:
            raise Conflict(f"batch {batch.pk} is already cancelled.")
        before = {"state": batch.state}
        batch.state = BatchState.CANCELLED
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


# -- the preflight report (POST /onboardings?dry_run=true) ----------------------------------------


def onboarding_preflight(
    *,
    site_id: Any,
    profile_id: Any,
    sku_id: Any,
    hostname: str,
    ipmi_ip: str,
    confirm_host: str | None = None,
) -> dict[str, Any]:
    """What starting this onboarding would meet, before anything starts (docs/onboarding.md,
    "The preflight report"): every guardrail's state, what MAAS shows for the host (read only)
    and the stages and MAAS calls the workflow would make under the effective policy. Writes
    nothing."""
    target = _target(site_id, profile_id, sku_id)
    site, profile, sku = target.site, target.profile, target.sku
    node = (
        Node.objects.filter(site=site, hostname=hostname).exclude(state=NodeState.RETIRED).first()
    )
    open_here = open_workflows(site=site, hostname=hostname)
    if node is not None:
        open_here += [w for w in open_on_node(node.pk) if w not in open_here]
    probe = site_problems(site)
    guard = guard_problems(site, [hostname], confirm_host)
    probed = site.last_probe_at.isoformat() if site.last_probe_at else "never"

    def check(name: str, problems: list[str], ok_detail: str) -> dict[str, Any]:
        return {"name": name, "ok": not problems, "detail": "; ".join(problems) or ok_detail}

    checks = [
        check(
            "site_enabled",
            [p for p in probe if "disabled" in p],
            f"site {site.name} is enabled",
        ),
        check(
            "probe_healthy_and_fresh",
            [p for p in probe if "disabled" not in p],
            f"probe {site.health}, last at {probed}",
        ),
        check(
            "profile_active",
            []
            if profile.status == ProfileStatus.ACTIVE
            else [f"profile {profile.name} is disabled"],
            f"profile {profile.name} is active",
        ),
        check(
            "sku_active",
            [] if sku.active else [f"SKU {sku.code} is not active"],
            f"SKU {sku.code} is active",
        ),
        check(
            "no_open_workflow",
            [f"open {w['kind']} {w['id']} ({w['state']})" for w in open_here],
            f"nothing is open on {hostname}",
        ),
        check(
            "node_onboardable",
            []
            if node is None or node.state in (NodeState.REGISTERED, NodeState.PROVISIONING)
            else [f"node {hostname} is {node.state} (use a reimage decommission)"],
            "no node row yet" if node is None else f"node {hostname} is {node.state}",
        ),
        check(
            "host_approved_and_confirmed",
            guard,
            "confirmed and approved" if site.guarded else "site is not guarded",
        ),
    ]
    draft = Onboarding(site=site, profile=profile, sku=sku, hostname=hostname, ipmi_ip=ipmi_ip)
    policy = profile.effective_policy()
    stages = KIND.plan(draft, policy)
    return {
        "dry_run": True,
        "allowed": all(c["ok"] for c in checks),
        "guardrails": checks,
        "maas": _maas_preview(site, hostname, ipmi_ip),
        "stages": stages,
        "maas_calls": [f"{s['name']}: {call}" for s in stages for call in s["maas_calls"]],
        "policy": policy.as_dict(),
    }


def _maas_preview(site: MaasSite, hostname: str, ipmi_ip: str) -> dict[str, Any]:
    """The machines discovery would look at first (by hostname, by BMC address): reads only."""

    def short(machines: list[Any]) -> list[dict[str, str]]:
        return [
            {"system_id": m.system_id, "hostname": m.hostname, "status": m.status_name}
            for m in machines
        ]

    try:
        client = client_for_site(site)
        try:
            by_host = client.list_machines(hostnames=[hostname])
            ids = sorted(s for s, a in client.power_addresses().items() if a == ipmi_ip)
            by_bmc = client.list_machines(system_ids=ids) if ids else []
        finally:
            client.close()
    except (MaasError, SecretsError) as exc:
        return {"error": f"MAAS could not be read: {exc}"}
    return {"by_hostname": short(by_host), "by_ipmi_address": short(by_bmc)}
