"""The node-facing report endpoint: the node reports its site bundle's outcome and its agent's
start, apart from enrollment, proving itself with the bootstrap token of the payload it runs
(docs/onboarding.md, "Completion gates" and "Tokens")."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from rest_framework.test import APIClient

from config import celery_app
from onboarding import payload
from onboarding.models import Onboarding
from tests.factories import make_onboarding, make_site

pytestmark = pytest.mark.django_db
URL = "/api/v1/node/report"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(
        celery_app, "send_task", lambda name, args=(), **kw: calls.append((name, tuple(args)))
    )
    return calls


def waiting(**fields: Any) -> tuple[Onboarding, payload.Tokens]:
    wf = make_onboarding(make_site(), hostname="rep01", **fields)
    tokens, hashes = payload.mint_tokens(wf.pk, wf.attempt)
    Onboarding.objects.filter(pk=wf.pk).update(stage="enrollment", state="waiting", **hashes)
    wf.refresh_from_db()
    return wf, tokens


def report(wf: Onboarding, token: str, phase: str, status: str, **extra: Any) -> Any:
    body = {
        "onboarding_id": wf.pk,
        "attempt": wf.attempt,
        "hostname": wf.hostname,
        "bootstrap_token": token,
        "phase": phase,
        "status": status,
        **extra,
    }
    return APIClient().post(URL, body, format="json")


def test_the_site_bundle_and_the_agent_start_are_separate_facts() -> None:
    wf, tokens = waiting()
    answer = report(wf, tokens.bootstrap, "site_bundle", "ok", version="2024.10")
    assert answer.status_code == 200, answer.json()
    wf.refresh_from_db()
    assert wf.site_bundle_done_at is not None and wf.agent_started_at is None
    assert report(wf, tokens.bootstrap, "agent", "ok").status_code == 200
    wf.refresh_from_db()
    assert wf.agent_started_at is not None and wf.enrolled_at is None
    kinds = list(wf.events.values_list("kind", flat=True))
    assert kinds.count("node.site_bundle") == 1 and kinds.count("node.agent_started") == 1


def test_enrollment_alone_does_not_claim_the_agent_started() -> None:
    wf, tokens = waiting()
    answer = APIClient().post(
        "/api/v1/node/enroll",
        {
            "onboarding_id": wf.pk,
            "attempt": 1,
            "hostname": wf.hostname,
            "enrollment_token": tokens.enrollment,
            "agent_version": "1.0",
        },
        format="json",
    )
    assert answer.status_code == 200
    wf.refresh_from_db()
    assert wf.enrolled_attempt == 1 and wf.agent_started_at is None


@pytest.mark.parametrize(
    ("phase", "failure"), [("site_bundle", "site_bundle"), ("agent", "agent_start")]
)
def test_a_failure_report_is_recorded_and_wakes_the_waiting_workflow(
    sent: list[tuple[str, Any]], django_capture_on_commit_callbacks: Any, phase: str, failure: str
) -> None:
    wf, tokens = waiting()
    with django_capture_on_commit_callbacks(execute=True):
        answer = report(wf, tokens.bootstrap, phase, "failed", detail="run.sh exited 3\n")
    assert answer.status_code == 200
    wf.refresh_from_db()
    assert (wf.node_failure, wf.node_failure_detail) == (failure, "run.sh exited 3")
    assert wf.state == "running"  # woken: the enrollment stage fails it with that class
    assert ("workflow.advance", ("onboarding", wf.pk, wf.dispatch)) in sent


@pytest.mark.parametrize(
    "which", ["enrollment token", "other attempt", "garbage", "other host", "closed"]
)
def test_a_report_without_this_payloads_bootstrap_token_is_refused(which: str) -> None:
    wf, tokens = waiting()
    token, extra = tokens.bootstrap, dict[str, Any]()
    if which == "enrollment token":
        token = tokens.enrollment
    elif which == "other attempt":
        extra = {"attempt": 2}
    elif which == "garbage":
        token = "x" * 43 + "\n"
    elif which == "other host":
        extra = {"hostname": "rep02"}
    else:
        Onboarding.objects.filter(pk=wf.pk).update(state="succeeded")
    answer = report(wf, token, "agent", "ok", **extra)
    assert answer.status_code == 403
    assert tokens.bootstrap not in answer.content.decode()
    wf.refresh_from_db()
    assert wf.agent_started_at is None
    refused = wf.events.get(kind="node.report_refused")
    assert tokens.bootstrap not in refused.message and tokens.bootstrap not in str(refused.data)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"phase": "everything"}, "phase"),
        ({"status": "maybe"}, "status"),
        ({"detail": "x" * 2001}, "detail"),
        ({"shell": "rm -rf /"}, "shell"),
    ],
)
def test_a_malformed_report_is_a_400_naming_the_field(change: dict[str, Any], field: str) -> None:
    wf, tokens = waiting()
    base = {"phase": "agent", "status": "ok", **change}
    answer = report(wf, tokens.bootstrap, base.pop("phase"), base.pop("status"), **base)
    assert answer.status_code == 400
    assert field in answer.json()["fields"]
    wf.refresh_from_db()
    assert wf.agent_started_at is None and not wf.events.exists()


# -- check-in: a deployed node of an earlier attempt takes this attempt's tokens -------------------


def checkin(wf: Onboarding, attempt: int, token: str) -> Any:
    body = {
        "onboarding_id": wf.pk,
        "attempt": attempt,
        "hostname": wf.hostname,
        "bootstrap_token": token,
    }
    return APIClient().post("/api/v1/node/checkin", body, format="json")


def rerun_of_a_deployed_node() -> tuple[Onboarding, payload.Tokens, payload.Tokens]:
    """Attempt 1 deployed and enrolled; a rerun (attempt 2) minted its tokens, no redeploy."""
    wf, first = waiting(node_token_attempt=1)
    second, hashes = payload.mint_tokens(wf.pk, 2)
    Onboarding.objects.filter(pk=wf.pk).update(attempt=2, **hashes)
    wf.refresh_from_db()
    return wf, first, second


def test_check_in_hands_an_earlier_attempts_node_this_attempts_tokens_once() -> None:
    wf, first, second = rerun_of_a_deployed_node()
    answer = checkin(wf, 1, first.bootstrap)
    assert answer.status_code == 200
    assert answer.json() == {
        "action": "reenroll",
        "onboarding_id": wf.pk,
        "attempt": 2,
        "bootstrap_token": second.bootstrap,
        "enrollment_token": second.enrollment,
    }
    wf.refresh_from_db()
    assert wf.node_token_attempt == 2
    rotated = wf.events.get(kind="node.tokens_rotated")
    assert first.bootstrap not in str(rotated.data) + rotated.message
    assert second.bootstrap not in str(rotated.data) + rotated.message
    assert checkin(wf, 1, first.bootstrap).status_code == 403  # attempt 1's tokens are retired
    assert checkin(wf, 2, second.bootstrap).json() == {"action": "none", "onboarding_id": wf.pk}
    enrolled = APIClient().post(
        "/api/v1/node/enroll",
        {
            "onboarding_id": wf.pk,
            "attempt": 2,
            "hostname": wf.hostname,
            "enrollment_token": second.enrollment,
            "agent_version": "1.0",
        },
        format="json",
    )
    assert enrolled.status_code == 200


def test_check_in_before_this_attempts_tokens_exist_changes_nothing() -> None:
    wf, first = waiting(node_token_attempt=1)
    Onboarding.objects.filter(pk=wf.pk).update(attempt=2)  # reopened; payload not reached yet
    answer = checkin(wf, 1, first.bootstrap)
    assert answer.json() == {"action": "none", "onboarding_id": wf.pk}
    wf.refresh_from_db()
    assert wf.node_token_attempt == 1


def test_a_check_in_on_a_closed_workflow_is_answered_quietly() -> None:
    wf, first = waiting(node_token_attempt=1)
    Onboarding.objects.filter(pk=wf.pk).update(state="succeeded")
    assert checkin(wf, 1, first.bootstrap).json() == {"action": "none", "onboarding_id": wf.pk}
    assert not wf.events.exists()  # an agent checking in for months does not fill the timeline


@pytest.mark.parametrize("which", ["enrollment token", "wrong attempt", "garbage"])
def test_check_in_refuses_anything_but_the_held_bootstrap_token(which: str) -> None:
    wf, first, second = rerun_of_a_deployed_node()
    attempt, token = 1, first.bootstrap
    if which == "enrollment token":
        token = first.enrollment
    elif which == "wrong attempt":
        attempt = 2  # attempt 2's number with attempt 1's token
    else:
        token = "A" * 43
    answer = checkin(wf, attempt, token)
    assert answer.status_code == 403
    assert second.bootstrap not in answer.content.decode()
    wf.refresh_from_db()
    assert wf.node_token_attempt == 1
    assert wf.events.filter(kind="node.report_refused").count() == 1


def test_a_check_in_is_recorded_at_most_once_a_minute_without_changing_the_workflow() -> None:
    wf, first = waiting(node_token_attempt=1)
    Onboarding.objects.filter(pk=wf.pk).update(state="succeeded")
    updated = Onboarding.objects.get(pk=wf.pk).updated_at
    assert checkin(wf, 1, first.bootstrap).status_code == 200
    wf.refresh_from_db()
    assert wf.agent_checkin_attempt == 1 and wf.agent_checkin_at is not None
    assert wf.updated_at == updated  # a check-in is not a change of the workflow
    seen = wf.agent_checkin_at
    checkin(wf, 1, first.bootstrap)
    wf.refresh_from_db()
    assert wf.agent_checkin_at == seen  # within the minute: not written again
    Onboarding.objects.filter(pk=wf.pk).update(agent_checkin_at=seen - timedelta(seconds=61))
    checkin(wf, 1, first.bootstrap)
    wf.refresh_from_db()
    assert wf.agent_checkin_at > seen
    assert checkin(wf, 1, "A" * 43).status_code == 403
    wf.refresh_from_db()
    assert wf.agent_checkin_at > seen and wf.agent_checkin_attempt == 1  # a refusal records none


def test_a_check_in_with_this_attempts_tokens_wakes_a_rerun_waiting_at_enrollment() -> None:
    wf, first, second = rerun_of_a_deployed_node()
    assert checkin(wf, 1, first.bootstrap).json()["action"] == "reenroll"  # handed over
    wf.refresh_from_db()
    assert (wf.agent_checkin_attempt, wf.state) == (1, "waiting")  # it held attempt 1's then
    assert checkin(wf, 2, second.bootstrap).json()["action"] == "none"
    wf.refresh_from_db()
    assert (wf.agent_checkin_attempt, wf.state) == (2, "running")  # the stage looks again
    assert wf.events.filter(kind="node.checked_in").count() == 1
