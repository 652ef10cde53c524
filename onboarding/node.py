"""What a node itself may do (docs/api.md, "Node-facing endpoints"): report its site bundle's
and agent's outcome, enroll with its one-time token, check in for newer tokens. Every refusal
is the same answer, recorded on the timeline a bounded number of times.
"""

from __future__ import annotations

import hmac
import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from maas_domain.errors import Forbidden
from maas_domain.observability import metrics
from maas_domain.secrets import SecretNotFound, get_backend
from maas_domain.work import WorkflowState
from onboarding import payload
from onboarding.models import Onboarding
from onboarding.workflow import KIND
from workflows.scheduling import wake

log = logging.getLogger("onboarding")
REFUSED = "Enrollment refused."
REPORT_REFUSED = "Report refused."


def _token_matches(wf: Onboarding | None, token: str) -> bool:
    """Constant-time comparison of the token's hash (a missing row compares against a dummy,
    so an unknown id costs the same as a wrong token)."""
    expected = wf.enrollment_token_hash if wf is not None else "0" * 64
    return hmac.compare_digest(payload.token_hash(token or ""), expected or "0" * 64)


def onboarding_enroll(
    *, onboarding_id: int, attempt: int, token: str, hostname: str, agent_version: str
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


def _bootstrap_matches(wf: Onboarding | None, token: str) -> bool:
    """Constant-time comparison with the current payload's bootstrap token hash (a missing row
    compares against a dummy: an unknown id costs the same as a wrong token)."""
    expected = wf.bootstrap_token_hash if wf is not None else "0" * 64
    return hmac.compare_digest(payload.token_hash(token or ""), expected or "0" * 64)


def onboarding_node_report(
    *,
    onboarding_id: int,
    attempt: int,
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
        stored = get_backend().read(payload.tokens_path(wf.site.region, wf.pk, held))
    except SecretNotFound:
        try:  # minted before regions had prefixes (this listener's identity reads both)
            stored = get_backend().read(payload.legacy_tokens_path(wf.pk, held))
        except SecretNotFound:
            return False
    return hmac.compare_digest(
        payload.token_hash(token or ""), payload.token_hash(stored.get("bootstrap_token", ""))
    )


def onboarding_checkin(
    *, onboarding_id: int, attempt: int, token: str, hostname: str
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
                if tokens is None:
                    _checked_in(wf, held)
                else:
                    wf.node_token_attempt = wf.attempt
                    wf.agent_checkin_at, wf.agent_checkin_attempt = timezone.now(), held
                    wf.save(
                        update_fields=[
                            "node_token_attempt",
                            "agent_checkin_at",
                            "agent_checkin_attempt",
                            "updated_at",
                        ]
                    )
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


# A running agent checks in every minute or so for months: its check-in is written at most once
# this often per attempt it holds (docs/onboarding.md, "Reruns and adopt" reads it).
CHECKIN_RECORD_SECONDS = 60


def _checked_in(wf: Onboarding, held: int | None) -> None:
    """Record an accepted check-in that changed nothing (without touching ``updated_at``: a
    check-in is not a change of the workflow). One with this attempt's tokens wakes a run
    waiting at enrollment for it: that run may adopt the node's enrollment now."""
    now = timezone.now()
    last = wf.agent_checkin_at
    if (
        wf.agent_checkin_attempt == held
        and last is not None
        and (now - last).total_seconds() < CHECKIN_RECORD_SECONDS
    ):
        return
    Onboarding.objects.filter(pk=wf.pk).update(agent_checkin_at=now, agent_checkin_attempt=held)
    current = wf.is_open and held == wf.attempt and wf.agent_checkin_attempt != held
    if current and wf.state == WorkflowState.WAITING and wf.stage == "enrollment":
        KIND.add_event(
            wf,
            "node.checked_in",
            f"the node's agent checked in holding attempt {held}'s tokens",
        )
        wake(KIND, wf.pk, "node agent checked in with this attempt's tokens")


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
