"""The node page's cordons (docs/admin.md, "Nodes"): the cordons and their history, cordon and
uncordon with a reason through the same services as the API, each offered only to whom may do
it; and the workflow kinds started from a node, offered by state as each kind declares."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from maas_domain.models import AuditLog, Cordon
from tests.factories import make_node, make_site

pytestmark = pytest.mark.django_db
PAGE = "/admin/maas_domain/node/{}/change/"


@pytest.fixture
def ops(client: Any, admin_user: Any) -> Any:
    client.force_login(admin_user)
    return client


def test_cordon_and_uncordon_from_the_node_page(ops: Any) -> None:
    node = make_node(make_site(), hostname="ap01", state="active")
    page = ops.get(PAGE.format(node.pk)).content.decode()
    assert 'id="node-cordon-form"' in page and 'id="node-uncordon-form"' not in page
    assert "Never cordoned" in page
    assert ops.get(f"/admin/maas_domain/node/{node.pk}/cordon/").status_code == 405
    ops.post(f"/admin/maas_domain/node/{node.pk}/cordon/", {"reason": "fans loud"})
    [cordon] = Cordon.objects.filter(node=node)
    assert (cordon.reason, cordon.detail, cordon.lifted_at) == ("operator", "fans loud", None)
    page = ops.get(PAGE.format(node.pk)).content.decode()
    assert "fans loud" in page and 'id="node-uncordon-form"' in page
    blank = ops.post(f"/admin/maas_domain/node/{node.pk}/uncordon/", {"reason": " "}, follow=True)
    assert "reason is required" in blank.content.decode()
    assert Cordon.objects.get().lifted_at is None
    ops.post(f"/admin/maas_domain/node/{node.pk}/uncordon/", {"reason": "fans replaced"})
    assert Cordon.objects.get().lift_reason == "fans replaced"
    assert AuditLog.objects.filter(action="node.uncordon", target_id=str(node.pk)).exists()
    listed = ops.get("/admin/maas_domain/node/").content.decode()
    assert "ap01" in listed


def test_an_operator_cordons_but_does_not_uncordon(client: Any) -> None:
    user = get_user_model().objects.create_user("op-page", is_staff=True)
    user.groups.add(Group.objects.get(name="maascp-operate"))
    client.force_login(user)
    node = make_node(make_site(), hostname="ap02", state="active")
    client.post(f"/admin/maas_domain/node/{node.pk}/cordon/", {"reason": "suspect"})
    assert Cordon.objects.filter(node=node, lifted_at=None).exists()
    assert 'id="node-uncordon-form"' not in client.get(PAGE.format(node.pk)).content.decode()
    refused = client.post(f"/admin/maas_domain/node/{node.pk}/uncordon/", {"reason": "x"})
    assert refused.status_code == 403
    assert Cordon.objects.filter(node=node, lifted_at=None).exists()


@pytest.mark.parametrize(
    ("state", "offered"),
    [("quarantined", {"decommission…", "repair…"}), ("active", {"decommission…", "repair…"}),
     ("provisioning", set()), ("retired", set())],
)  # fmt: skip
def test_the_kinds_started_on_a_node_are_offered_by_its_state(
    ops: Any, state: str, offered: set[str]
) -> None:
    node = make_node(make_site(), hostname=f"ap-{state}", state=state)
    page = ops.get(PAGE.format(node.pk)).content.decode()
    shown = {label for label in ("decommission…", "repair…") if f">{label}</a>" in page}
    assert shown == offered
    if "repair…" in offered:
        assert f"/admin/repair/repair/add/?node={node.pk}" in page
