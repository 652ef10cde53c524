"""``?dry_run=true`` on every state-changing admin route (docs/api.md, "Dry runs").

A route either plans on its own (its view lists the action in ``dry_run_plans`` and answers
``{"dry_run": true, ...}``: the preflight report of an onboarding start, a verb's plan, a probe
that stores nothing, credentials that are checked and not written) or is *rehearsed*: the whole
request runs in a transaction that is always rolled back, with MAAS mutations and secrets
writes refused (maas_domain/dryrun.py), and the answer says what it would have done: the status
and body it would have answered with, the audit rows it would have written, the workflows it
would have started with their stages and MAAS calls. A request the real call would refuse is
refused the same way (the same 4xx), so a dry run answers "would this work?" exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.http import HttpResponse, JsonResponse
from rest_framework import serializers
from rest_framework.utils.encoders import JSONEncoder

from maas_domain import audit, dryrun

MAX_CHANGES = 100  # audit rows shown in a plan (a batch of 5,000 writes one per host)
MAX_HOSTNAMES = 50


class PlannedChangeSerializer(serializers.Serializer[Any]):
    """One audit row the request would write: what would change, before and after."""

    action = serializers.CharField()
    target_type = serializers.CharField()
    target_id = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


class PlannedStageSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    timeout = serializers.IntegerField(allow_null=True, help_text="Seconds, under its policy.")
    maas_calls = serializers.ListField(child=serializers.CharField())


class PlannedWorkflowsSerializer(serializers.Serializer[Any]):
    """Workflows of one kind the request would start, with the stages they would run."""

    kind = serializers.CharField()
    count = serializers.IntegerField()
    hostnames = serializers.ListField(
        child=serializers.CharField(), help_text=f"The first {MAX_HOSTNAMES}."
    )
    stages = PlannedStageSerializer(many=True)


class DryRunPlanSerializer(serializers.Serializer[Any]):
    """What a state-changing request would do; nothing was written and nothing was sent to
    MAAS (docs/api.md, "Dry runs")."""

    dry_run = serializers.BooleanField(help_text="Always true.")
    status = serializers.IntegerField(help_text="The status the request would answer with.")
    answer = serializers.JSONField(
        allow_null=True, help_text="The body it would answer with (secret values left out)."
    )
    changes = PlannedChangeSerializer(many=True, help_text=f"The first {MAX_CHANGES}.")
    changes_count = serializers.IntegerField(help_text="Audit rows it would write.")
    workflows = PlannedWorkflowsSerializer(many=True)
    maas_calls = serializers.ListField(
        child=serializers.CharField(),
        help_text="What the started workflows may send to MAAS, as `stage: call`.",
    )


class _RolledBack(Exception):
    def __init__(self, response: HttpResponse) -> None:
        self.response = response


def rehearse(call: Callable[[], HttpResponse]) -> HttpResponse:
    """Run ``call`` (the whole view) as a dry run: in a transaction that is rolled back, with
    changes that a rollback cannot undo refused. An error answer passes through unchanged."""
    with dryrun.rehearsing() as rehearsal:
        try:
            with transaction.atomic():
                raise _RolledBack(call())
        except _RolledBack as done:
            response: HttpResponse = done.response
    if response.status_code >= 400:
        return response
    return JsonResponse(plan(rehearsal, response), encoder=JSONEncoder)


def self_planned(call: Callable[[], HttpResponse]) -> HttpResponse:
    """Run a view that answers its own plan, with changes that need no rollback refused (it
    writes nothing; it may read MAAS, which no transaction should wait on)."""
    with dryrun.rehearsing():
        return call()


def plan(rehearsal: dryrun.Rehearsal, response: Any) -> dict[str, Any]:
    answer = getattr(response, "data", None)
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for wf in rehearsal.workflows:
        key = (wf["kind"], repr(wf["stages"]))
        entry = grouped.setdefault(
            key, {"kind": wf["kind"], "count": 0, "hostnames": [], "stages": wf["stages"]}
        )
        entry["count"] += 1
        if len(entry["hostnames"]) < MAX_HOSTNAMES:
            entry["hostnames"].append(wf["hostname"])
    calls: list[str] = []
    for entry in grouped.values():
        for stage in entry["stages"]:
            for call in stage["maas_calls"]:
                if (line := f"{stage['name']}: {call}") not in calls:
                    calls.append(line)
    return {
        "dry_run": True,
        "status": response.status_code,
        "answer": audit.redact(answer) if answer is not None else None,
        "changes": rehearsal.changes[:MAX_CHANGES],
        "changes_count": len(rehearsal.changes),
        "workflows": list(grouped.values()),
        "maas_calls": calls,
    }
