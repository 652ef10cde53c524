"""Scripts and their results: ``scripts/``, ``scripts/{name}`` (no trailing slash, as MAAS
routes it), ``nodes/{system_id}/results/`` and ``…/results/{id}/`` with ``op=download`` (MAAS
3.5's ``scripts.py`` and ``scriptresults.py``; docs/simulator.md, "Testing scripts and
results")."""

from __future__ import annotations

import io
import re
import tarfile
from typing import Any

from maas_simulator.errors import ApiError
from maas_simulator.hardware import BadChoice, translate_hardware_type
from maas_simulator.model import Simulator
from maas_simulator.nodes import Node, ScriptResult, ScriptSet
from maas_simulator.render import filter_results, script_json, script_set_json
from maas_simulator.scripts import Script, translate_script_type
from maas_simulator.wire import Request, Response, any_value, node_or_404

CURRENT = {"current-commissioning": 0, "current-testing": 2, "current-installation": 1}
BINARY = re.compile(r".+\.tar(\..+)?")


def _query(req: Request, name: str) -> str | None:
    """``get_optional_param(request.GET, …)``: the query string only."""
    values = req.query.get(name)
    return values[0] if values else None


def _hardware_type(req: Request) -> int | None:
    value = _query(req, "hardware_type")
    if value is None:
        return None
    try:
        return translate_hardware_type(value)
    except BadChoice as exc:
        raise ApiError(400, str(exc)) from exc


def _filters(req: Request) -> list[str] | None:
    value = _query(req, "filters")
    return value.split(",") if value is not None else None


# -- scripts --------------------------------------------------------------------------------------


def commissioning_scripts(sim: Simulator, req: Request) -> Any:
    """The legacy ``commissioning-scripts/``: the commissioning scripts' names, sorted."""
    return sorted(s.name for s in sim.scripts.of_type(0))


def scripts_list(sim: Simulator, req: Request) -> Any:
    """Every script, or those of a ``type``, a ``hardware_type``, or whose name or a tag is in
    ``filters``; ``include_script`` adds each revision's base64 text."""
    scripts = list(sim.scripts)
    kind = _query(req, "type")
    if kind is not None:
        try:
            wanted = translate_script_type(kind)
        except BadChoice as exc:
            raise ApiError(400, str(exc)) from exc
        scripts = [s for s in scripts if s.type == wanted]
    hardware_type = _hardware_type(req)
    if hardware_type is not None:
        scripts = [s for s in scripts if s.hardware_type == hardware_type]
    filters = _filters(req)
    if filters is not None:
        scripts = [s for s in scripts if s.name in filters or set(filters) & set(s.tags)]
    include = any_value(req.query, "include_script")
    return [script_json(s, include) for s in scripts]


def _script(sim: Simulator, req: Request) -> Script:
    script = sim.scripts.named(req.params["name"])
    if script is None:
        raise ApiError(404, "No Script matches the given query.")
    return script


def script_read(sim: Simulator, req: Request) -> Any:
    return script_json(_script(sim, req), any_value(req.query, "include_script"))


def script_download(sim: Simulator, req: Request) -> Response:
    """``op=download``: the script's text (one revision is kept: ``revision`` must be it)."""
    script = _script(sim, req)
    revision = _query(req, "revision") or _query(req, "rev")
    if revision is not None and revision != str(script.revision_id):
        raise ApiError(404, f"{script.name} not found in history")
    return Response(200, script.body().encode(), "application/binary")


# -- results --------------------------------------------------------------------------------------


def _result_type(value: str) -> int:
    """``translate_result_type``."""
    if value.isdigit():
        if int(value) in (0, 1, 2, 3):
            return int(value)
        raise ApiError(400, "Invalid result type numeric value.")
    names = {"test": 2, "testing": 2, "commission": 0, "commissioning": 0}
    names |= {"install": 1, "installation": 1, "release": 3}
    if value not in names:
        raise ApiError(400, "Invalid result type name")
    return names[value]


def results_list(sim: Simulator, req: Request) -> Any:
    """The node's script sets (of a ``type``), each with its results filtered by
    ``hardware_type`` and ``filters``; any ``include_output`` adds the base64 outputs."""
    node = node_or_404(sim, req)
    kind = _query(req, "type")
    wanted = _result_type(kind) if kind is not None else None
    include = any_value(req.query, "include_output")
    filters, hardware_type = _filters(req), _hardware_type(req)
    return [
        script_set_json(node, ss, include, filters, hardware_type)
        for ss in node.script_sets
        if wanted is None or ss.type == wanted
    ]


def _script_set(sim: Simulator, req: Request) -> tuple[Node, ScriptSet]:
    """``current-commissioning``, ``current-testing``, ``current-installation`` or a set id; a
    ``current-…`` the node has none of is MAAS's 400 too (there is no ``current-release``)."""
    node = node_or_404(sim, req)
    ref = req.params["id"]
    if ref in CURRENT:
        sets = [s for s in node.script_sets if s.type == CURRENT[ref]]
        if ref == "current-installation":  # only while the deployment holds it
            current = getattr(node, "current_installation", None)
            sets = [s for s in sets if s.id == current]
        if sets:
            return node, sets[-1]
    if not ref.isdigit():
        raise ApiError(
            400,
            f'Unknown id "{ref}" must be current-commissioning, current-testing, '
            "current-installation, or the id number of a specific result.",
        )
    found = [s for s in node.script_sets if s.id == int(ref)]
    if not found:
        raise ApiError(404, "No ScriptSet matches the given query.")
    return node, found[0]


def results_read(sim: Simulator, req: Request) -> Any:
    node, ss = _script_set(sim, req)
    include = any_value(req.query, "include_output")
    return script_set_json(node, ss, include, _filters(req), _hardware_type(req))


def _title(r: ScriptResult, filetype: str, extension: str | None = None) -> str:
    title = f"{r.name}.{extension}" if extension else r.name
    if r.disk:
        title = f"{title} - /dev/{r.disk[1]}" if filetype == "txt" else f"{title}-{r.disk[1]}"
    if r.interface:
        title = f"{title} - {r.interface[1]}" if filetype == "txt" else f"{title}-{r.interface[1]}"
    return title


def results_download(sim: Simulator, req: Request) -> Response:
    """``op=download``: ``output`` (``combined``, ``stdout``, ``stderr``, ``result``, ``all``)
    of the filtered results as one raw file, several with dashed headers, or a ``tar.xz``."""
    node, ss = _script_set(sim, req)
    output = _query(req, "output") or "combined"
    filetype = _query(req, "filetype") or "txt"
    files: dict[str, bytes] = {}
    times: dict[str, float] = {}
    for r in filter_results(ss, _filters(req), _hardware_type(req)):
        stdout = r.out() if r.stdout is None else r.stdout
        choices: dict[str, list[tuple[str | None, bytes]]] = {
            "combined": [(None, r.out())],
            "stdout": [("out", stdout)],
            "stderr": [("err", r.stderr)],
            "result": [("yaml", r.result)],
            "all": [(None, r.out()), ("out", stdout), ("err", r.stderr), ("yaml", r.result)],
        }
        parts = choices.get(output, [])
        if BINARY.search(r.name):
            parts = [(None, r.out())]
        for extension, content in parts:
            title = r.name if BINARY.search(r.name) else _title(r, filetype, extension)
            files[title] = content
            times[title] = r.updated or r.ended or ss.started
    if filetype == "txt" and len(files) == 1:
        return Response(200, next(iter(files.values())), "application/binary")
    if filetype == "txt":
        body = io.BytesIO()
        for name, content in files.items():
            dashes = "-" * int((80.0 - (2 + len(name))) / 2)
            body.write(f"{dashes} {name} {dashes}\n".encode())
            body.write(b"Binary file" if BINARY.search(name) else content)
            body.write(b"\n")
        return Response(200, body.getvalue(), "application/binary")
    if filetype == "tar.xz":
        body = io.BytesIO()
        kind = {0: "commissioning", 1: "installation", 2: "testing", 3: "release"}[ss.type]
        root = f"{node.hostname}-{kind}-{ss.id}"
        with tarfile.open(mode="w:xz", fileobj=body) as tar:
            for name, content in files.items():
                info = tarfile.TarInfo(name=f"{root}/{name.split('/')[-1]}")
                info.size, info.mode, info.mtime = len(content), 0o644, int(times[name])
                tar.addfile(info, io.BytesIO(content))
        return Response(200, body.getvalue(), "application/x-tar")
    raise ApiError(400, f'Unknown filetype "{filetype}" must be txt or tar.xz')
