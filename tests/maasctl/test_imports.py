"""maasctl is an HTTP client of the API (docs/architecture.md, "Where things live"): of the
server's code it may import only the input rules it shares, an allow-list. A new import of any
other module of the project fails here, whatever it is (a deny-list would let through every
module nobody thought to forbid)."""

from __future__ import annotations

import grimp

PROJECT = ("maasctl", "maas_domain", "maas_client", "workflows", "onboarding", "decommission",
           "reconciliation", "repair", "config", "maas_simulator", "devtools")  # fmt: skip
ALLOWED = {"maas_domain.validators"}  # the input rules the API applies too


def test_maasctl_imports_only_itself_and_the_shared_input_rules() -> None:
    graph = grimp.build_graph(*PROJECT)
    outside = {
        (importer, imported)
        for importer in graph.find_descendants("maasctl") | {"maasctl"}
        for imported in graph.find_modules_directly_imported_by(importer)
        if not imported.startswith("maasctl")
    }
    assert {imported for _, imported in outside} <= ALLOWED, sorted(outside)
    # and the shared rules themselves import nothing of the server
    rules = graph.find_modules_directly_imported_by("maas_domain.validators")
    assert not {m for m in rules if m.split(".")[0] in PROJECT}
