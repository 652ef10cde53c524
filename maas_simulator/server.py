"""HTTP server for the simulator: MAAS API under /MAAS/, control endpoint under /_sim/.

Request faults (503/409 with Retry-After, 502, slow answers, dropping the response of a POST
after applying it) are matched before dispatch; counters record every request by action,
system id and status so tests can assert exactly which MAAS mutations happened.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from maas_client.status import NodeStatus
from maas_simulator import api, lifecycle, recording, scenario
from maas_simulator.errors import ApiError
from maas_simulator.faults import MachineFaults, RequestFault, repair
from maas_simulator.model import Simulator
from maas_simulator.network import API_PREFIX
from maas_simulator.node import NodeSide


class SimState:
    """The simulator plus request faults and counters."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self.faults: list[RequestFault] = []
        self.counters: Counter[tuple[str, str, str, int]] = Counter()
        self.log: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def take_fault(self, method: str, op: str | None, path: str) -> RequestFault | None:
        with self.lock:
            for fault in self.faults:
                if fault.matches(method, op, path):
                    fault.count -= 1
                    return fault
        return None

    def count(
        self,
        method: str,
        action: str,
        system_id: str,
        status: int,
        params: dict[str, Any] | None = None,
    ) -> None:
        with self.lock:
            self.counters[(method, action, system_id, status)] += 1
            if method != "GET":
                self.log.append(
                    {
                        "method": method,
                        "action": action,
                        "system_id": system_id,
                        "status": status,
                        "params": params or {},
                    }
                )


def _action_name(path: str, op: str | None, method: str) -> tuple[str, str]:
    for res in api.RESOURCES:
        params = res.match(path)
        if params is not None:
            sid = params.get("system_id", "")
            name = res.name.removesuffix("Handler").lower()
            verb = op or {"GET": "read", "POST": "create", "PUT": "update", "DELETE": "delete"}.get(
                method, method.lower()
            )
            return f"{name}.{verb}", sid
    return "unknown", ""


class Handler(BaseHTTPRequestHandler):
    state: SimState
    protocol_version = "HTTP/1.1"
    server_version = "maas-simulator"
    # One buffered write per answer and no Nagle: otherwise headers and body leave in two
    # segments and the client's delayed ACK adds ~40 ms to every keep-alive request.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def date_time_string(self, timestamp: float | None = None) -> str:
        """The ``Date`` header: the simulated region's clock, the one ``last_sync`` and script
        results are stamped with (a client judging a stale sync compares against it)."""
        return super().date_time_string(
            self.state.sim.clock.now() if timestamp is None else timestamp
        )

    def do_GET(self) -> None:
        self.handle_any("GET")

    def do_POST(self) -> None:
        self.handle_any("POST")

    def do_PUT(self) -> None:
        self.handle_any("PUT")

    def do_DELETE(self) -> None:
        self.handle_any("DELETE")

    def do_PATCH(self) -> None:  # no MAAS handler serves it: 405
        self.handle_any("PATCH")

    def send(
        self,
        status: int,
        body: bytes | list[bytes],
        content_type: str,
        headers: dict[str, str] | None = None,
        *,
        api_hash: bool = True,
    ) -> None:
        """One answer; a body given as a list of chunks (a machine listing) is written chunk
        by chunk through the write buffer rather than joined into one large buffer first.

        ``X-MAAS-API-Hash`` is on what piston's resource answers (a handler's result, its 404
        for an object not found, its 405), not on MAAS's own refusals (400, 401, 403, 409,
        503), nor on ``describe/`` and the version strings (recorded against MAAS 3.5.10)."""
        chunks = [body] if isinstance(body, bytes) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(sum(map(len, chunks))))
        if api_hash and (status < 400 or status == 405 or content_type == "text/plain"):
            self.send_header("X-MAAS-API-Hash", api.API_HASH)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.writelines(chunks)

    def text(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.send(status, message.encode(), "text/plain; charset=utf-8", headers)

    def handle_any(self, method: str) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if url.path.startswith("/_sim/"):
            return self.control(method, url.path, body)
        if url.path == "/MAAS/api/version/":
            return self.send(200, b"2.0", "text/plain", api_hash=False)
        if url.path.startswith("/MAAS/api/1.0/"):
            return self.send(
                410,
                b"The 1.0 API is no longer available. Please use API version 2.0.",
                "text/plain",
                api_hash=False,
            )
        if url.path == API_PREFIX + "describe/":
            host = self.headers.get("Host") or "127.0.0.1"
            body = json.dumps(api.describe(host), sort_keys=True).encode()
            return self.send(200, body, "application/json", api_hash=False)
        if not url.path.startswith(API_PREFIX):
            return self.text(404, f"Unknown API endpoint: {url.path}.")
        query = parse_qs(url.query, keep_blank_values=True)
        op = query["op"][0] if query.get("op") else None
        action, sid = _action_name(url.path, op, method)
        params = (
            recording.mutation_params(query, self.headers.get("Content-Type", ""), body)
            if method != "GET"
            else None
        )
        fault = self.state.take_fault(method, op, url.path)
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.delay)
            fault = None
        if fault is not None and fault.kind in ("503", "409", "502"):
            self.state.count(method, action, sid, int(fault.kind), params)
            if fault.kind == "503":  # NoConnectionsAvailable: nothing applied
                wait = fault.retry_after if fault.retry_after is not None else 10
                return self.text(
                    503, "Unable to connect to any rack controller.", {"Retry-After": str(wait)}
                )
            if fault.kind == "409":  # a DB conflict past MAAS's retries: rolled back
                wait = fault.retry_after if fault.retry_after is not None else 5
                return self.send(
                    409,
                    b"<html><body><h1>Conflict</h1></body></html>",
                    "text/html; charset=utf-8",
                    {"Retry-After": str(wait)},
                )
            return self.send(
                502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"
            )
        response = self.maas(method, url.path, query, body)
        if fault is not None and fault.kind == "503_after_apply" and response.status < 300:
            # a PowerProblem raised after the commit: applied, answered 503 without Retry-After
            response = api.Response(
                503,
                b"No rack controllers can access the BMC of this node",
                "text/plain; charset=utf-8",
            )
        self.state.count(method, action, sid, response.status, params)
        if fault is not None and fault.kind == "drop_after_apply":
            self.close_connection = True  # applied, but the client never hears back
            return None
        return self.send(response.status, response.body, response.content_type, response.headers)

    def maas(
        self, method: str, path: str, query: dict[str, list[str]], body: bytes
    ) -> api.Response:
        sim = self.state.sim
        with sim.lock:
            try:
                # Django fills request.POST for POST only (piston coerces PUT); a body sent with
                # GET or DELETE (Drydock does that) is ignored.
                form = (
                    api.parse_form(self.headers.get("Content-Type", ""), body)
                    if method in ("POST", "PUT")
                    else {}
                )
                host = self.headers.get("Host", "")
                # version/ is an OperationsResource without authentication: credentials,
                # good or bad, are not even looked at.
                signed = (
                    None
                    if path == API_PREFIX + "version/"
                    else api.authenticate(
                        sim,
                        self.headers.get("Authorization"),
                        method=method,
                        url=f"http://{host}{path}",
                        request_params=[
                            (k, v)
                            for source in (query, form)
                            for k, vs in source.items()
                            for v in vs
                        ],
                    )
                )
                user, token = signed if signed else (None, None)
                request = api.Request(method, path, query, form, host, user, token=token)
                sim.tick()
                return api.dispatch(sim, request)
            except ApiError as exc:
                text = json.dumps(exc.body) if exc.json_body else str(exc.body)
                return api.Response(exc.status, text.encode(), exc.content_type, exc.headers)
            except Exception as exc:  # MAAS answers any other exception with a 500 and its text
                return api.Response(500, str(exc).encode(), "text/plain; charset=utf-8")

    # -- control endpoint ---------------------------------------------------------------------
    def control(self, method: str, path: str, body: bytes) -> None:
        try:
            data = json.loads(body or b"{}")
            return self._control(method, path, data)
        except (ValueError, KeyError, TypeError) as exc:  # a malformed control request
            return self.json({"error": f"{type(exc).__name__}: {exc}"}, 400)

    def _control(self, method: str, path: str, data: dict[str, Any]) -> None:
        sim, state = self.state.sim, self.state
        parts = path.strip("/").split("/")[1:]
        with sim.lock:
            sim.tick()
            if parts == ["state"]:
                by_status = Counter(m.status.label for m in sim.machines.values())
                return self.json(
                    {
                        "machines": len(sim.machines),
                        "by_status": by_status,
                        "now": sim.now(),
                        "scale": sim.clock.scale,
                    }
                )
            if parts == ["clock", "advance"] and method == "POST":
                sim.clock.advance(float(data["seconds"]))
                sim.tick()
                return self.json({"now": sim.now()})
            if parts == ["machines"] and method == "POST":
                return self.json({"system_ids": scenario.add_machines(sim, data["machines"])})
            if len(parts) >= 2 and parts[0] == "machines":
                m = sim.machines.get(parts[1])
                if m is None:
                    return self.json({"error": "no such machine"}, 404)
                if len(parts) == 3 and parts[2] == "faults" and method == "POST":
                    merged = {**m.faults.as_dict(), **data}
                    m.faults = MachineFaults.from_dict(merged)
                    if not m.faults.release_stuck:
                        lifecycle.resume_release(sim, m)
                    if data.get("gpu_lost_after_deploy") == 0:
                        m.hardware.gpus_lost = 0  # the lost GPUs reseated
                if len(parts) == 3 and parts[2] == "repair" and method == "POST":
                    repair(m)
                if len(parts) == 3 and parts[2] == "hardware" and method == "POST":
                    scenario.set_hardware(sim, m, data)
                if len(parts) == 3 and parts[2] == "status" and method == "POST":
                    sim.start_op(m, "forced")
                    sim.set_status(m, NodeStatus[data["status"].upper()])
                    if m.storage.allocated and not any(h.acquired for h in m.storage.holders()):
                        m.storage.acquire()  # as if the machine had been allocated
                    if "power_state" in data:
                        m.power_state = data["power_state"]
                if len(parts) == 3 and parts[2] == "user-data":
                    return self.send(200, m.user_data or b"", "application/octet-stream")
                return self.json(
                    {
                        "system_id": m.system_id,
                        "hostname": m.hostname,
                        "status": m.status.label,
                        "power_state": m.power_state,
                        "faults": m.faults.as_dict(),
                        "counts": m.counts,
                    }
                )
            if parts == ["scripts"] and method == "POST":
                added = sim.scripts_from_scenario(data["scripts"])
                return self.json({"scripts": [s.name for s in added]})
            if parts == ["faults"]:
                if method == "POST":
                    with state.lock:
                        state.faults.extend(RequestFault.from_dict(f) for f in data["faults"])
                elif method == "DELETE":
                    with state.lock:
                        state.faults.clear()
                with state.lock:
                    return self.json({"faults": [asdict(f) for f in state.faults]})
            if parts == ["counters"]:
                with state.lock:
                    if method == "DELETE":
                        state.counters.clear()
                        state.log.clear()
                    rows = [
                        {
                            "method": k[0],
                            "action": k[1],
                            "system_id": k[2],
                            "status": k[3],
                            "count": n,
                        }
                        for k, n in sorted(state.counters.items())
                    ]
                    return self.json({"counters": rows, "mutations": list(state.log)})
            if parts == ["node-side"]:
                side = sim.node_side
                if not isinstance(side, NodeSide):
                    return self.json({"error": "no node side attached"}, 404)
                if method == "POST":
                    body = dict(data)
                    host = body.pop("hostname", None)
                    if not host:
                        return self.json({"error": "hostname is required"}, 400)
                    try:
                        side.set(host, **body)
                    except TypeError as exc:
                        return self.json({"error": str(exc)}, 400)
                return self.json({"calls": list(side.calls)})
            if parts == ["config"]:
                if method == "POST":
                    data = dict(data)
                    if "allow_duplicate_hostnames" in data:
                        sim.allow_duplicate_hostnames = bool(data.pop("allow_duplicate_hostnames"))
                    unknown = set(data) - set(sim.config)
                    if unknown:
                        raise ValueError(f"unknown config settings: {sorted(unknown)}")
                    sim.config.update(data)
                return self.json(
                    {"allow_duplicate_hostnames": sim.allow_duplicate_hostnames, **sim.config}
                )
        return self.json({"error": f"unknown control path {path}"}, 404)

    def json(self, data: Any, status: int = 200) -> None:
        self.send(status, json.dumps(data, default=str).encode(), "application/json")


class SimulatorServer:
    """Run a simulator on ``host:port`` (port 0 picks a free one) in a background thread."""

    def __init__(
        self,
        sim: Simulator,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: list[RequestFault] | None = None,
    ) -> None:
        self.state = SimState(sim)
        self.state.faults.extend(faults or [])
        handler = type("BoundHandler", (Handler,), {"state": self.state})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def sim(self) -> Simulator:
        return self.state.sim

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/MAAS/"

    def start(self) -> SimulatorServer:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
