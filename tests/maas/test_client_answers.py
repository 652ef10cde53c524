"""Whatever a server answers, every MAAS client method returns its typed value or raises a
``MaasError`` naming the operation: never a stray KeyError or TypeError that a probe, a stage or
an API view would turn into a 500 (a MAAS URL answering HTML or odd JSON did, in the probe)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from maas_client.client import MaasClient
from maas_client.errors import MaasError

SID = "abc123"
CALLS: dict[str, Any] = {
    "version": lambda c: c.version(),
    "whoami": lambda c: c.whoami(),
    "subnets": lambda c: c.subnets(),
    "boot_resources": lambda c: c.boot_resources(),
    "get_config": lambda c: c.get_config("maas_name"),
    "list_machines": lambda c: c.list_machines(hostnames=["h1"]),
    "machine_summaries": lambda c: c.machine_summaries(),
    "get_machine": lambda c: c.get_machine(SID),
    "power_addresses": lambda c: c.power_addresses([SID]),
    "create_machine": lambda c: c.create_machine(
        hostname="h1", mac_addresses=["52:54:00:00:00:01"], power_parameters={"a": "b"}
    ),
    "update_machine": lambda c: c.update_machine(SID, hostname="h2"),
    "delete_machine": lambda c: c.delete_machine(SID),
    "commission": lambda c: c.commission(SID),
    "test": lambda c: c.test(SID, testing_scripts=["burn"]),
    "deploy": lambda c: c.deploy(SID, distro_series="jammy"),
    "release": lambda c: c.release(SID),
    "allocate": lambda c: c.allocate(SID),
    "abort": lambda c: c.abort(SID),
    "mark_broken": lambda c: c.mark_broken(SID),
    "mark_fixed": lambda c: c.mark_fixed(SID),
    "power_on": lambda c: c.power_on(SID),
    "power_off": lambda c: c.power_off(SID),
    "query_power_state": lambda c: c.query_power_state(SID),
    "set_storage_layout": lambda c: c.set_storage_layout(SID, "flat"),
    "interfaces": lambda c: c.interfaces(SID),
    "link_subnet": lambda c: c.link_subnet(SID, 1, mode="AUTO", subnet=1),
    "unlink_subnet": lambda c: c.unlink_subnet(SID, 1, 2),
    "events": lambda c: c.events(system_ids=[SID]),
    "script_results": lambda c: c.script_results(SID),
    "installation_output": lambda c: c.installation_output(SID),
    "machine_hardware": lambda c: c.machine_hardware(SID),
    "node_devices": lambda c: c.node_devices(SID),
    "testing_scripts": lambda c: c.testing_scripts(),
    "testing_run": lambda c: c.testing_run(SID),
    "release_runs": lambda c: c.release_runs(SID),
}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
# JSON of roughly MAAS's shape too, so the typed readers get past their first key
MACHINEISH = st.fixed_dictionaries(
    {"system_id": st.text(), "hostname": st.text()},
    optional={
        "status": JSON,
        "status_name": JSON,
        "interface_set": JSON,
        "boot_interface": JSON,
        "power_state": JSON,
        "links": JSON,
    },
)
BODIES = st.one_of(
    st.tuples(st.just("application/json"), JSON.map(lambda v: json.dumps(v).encode())),
    st.tuples(st.just("application/json"), MACHINEISH.map(lambda v: json.dumps(v).encode())),
    st.tuples(
        st.just("application/json"),
        st.lists(MACHINEISH, max_size=3).map(lambda v: json.dumps(v).encode()),
    ),
    st.tuples(st.sampled_from(["application/json", "text/html", "text/plain"]), st.binary()),
)


class Answer:
    content_type = "application/json"
    body = b"{}"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.send_response(200)
            self.send_header("Content-Type", Answer.content_type)
            self.send_header("Content-Length", str(len(Answer.body)))
            self.end_headers()
            self.wfile.write(Answer.body)

        do_GET = do_POST = do_PUT = do_DELETE = answer

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/MAAS/"
    httpd.shutdown()


def test_the_table_covers_every_public_method() -> None:
    public = {
        name
        for name in dir(MaasClient)  # its mixins' too (maas_client/hardware.py)
        if not name.startswith("_") and callable(getattr(MaasClient, name)) and name != "close"
    }
    assert public == set(CALLS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_any_answer_is_a_value_or_a_maas_error(server: str, name: str) -> None:
    client = MaasClient(server, "a:b:c", read_attempts=1)

    @hypothesis.settings(max_examples=60, deadline=None, database=None)
    @hypothesis.given(answer=BODIES)
    def run(answer: tuple[str, bytes]) -> None:
        Answer.content_type, Answer.body = answer
        failed: MaasError | None = None
        try:
            CALLS[name](client)
        except MaasError as exc:
            failed = exc
        assert failed is None or failed.operation  # an error names what failed

    run()
    client.close()
