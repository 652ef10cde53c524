"""Audit rows: append-only, redacted, written only inside the mutation's transaction."""

from __future__ import annotations

import pytest
from django.db import transaction

from maas_domain import audit
from maas_domain.models import AuditLog
from tests.factories import make_site

pytestmark = pytest.mark.django_db


def test_redact_blanks_secret_scalars_at_any_depth_but_keeps_metadata() -> None:
    data = {
        "password": "hunter2",
        "ipmi": {"username": "root", "password": "p"},
        "maas_api_key": {"version": 2, "rotated_by": "ops"},
        "rows": [{"token_secret": "abc"}],
        "token_count": None,
        "enabled": True,
    }
    assert audit.redact(data) == {
        "password": "[redacted]",
        "ipmi": {"username": "root", "password": "[redacted]"},
        "maas_api_key": {"version": 2, "rotated_by": "ops"},
        "rows": [{"token_secret": "[redacted]"}],
        "token_count": None,
        "enabled": True,
    }


@pytest.mark.django_db(transaction=True)
def test_record_refuses_to_run_outside_a_transaction() -> None:
    site = make_site()
    with pytest.raises(RuntimeError, match="inside the mutation's transaction"):
        audit.record(actor=None, action="x", target=site)


def test_rows_are_append_only() -> None:
    site = make_site()
    with transaction.atomic():
        row = audit.record(actor=None, action="test.action", target=site, after={"a": 1})
    assert row.actor_name == "system"
    row.action = "rewritten"
    with pytest.raises(RuntimeError, match="append-only"):
        row.save()
    assert AuditLog.objects.get().action == "test.action"


def test_failed_mutation_leaves_no_audit_row() -> None:
    site = make_site()

    def mutate() -> None:
        with transaction.atomic():
            audit.record(actor=None, action="test.action", target=site)
            raise ValueError("the mutation failed after auditing")

    with pytest.raises(ValueError, match="failed after auditing"):
        mutate()
    assert not AuditLog.objects.exists()
