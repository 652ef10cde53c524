"""The incremental listing parser (``maas_client/listing.py``): cut anywhere, the same elements
as parsing the whole body; a wrong body is a ValueError (the client's MaasServerError), never a
stray exception; memory holds a chunk and an element, not the listing."""

from __future__ import annotations

import itertools
import json
import tracemalloc
from typing import Any

import hypothesis
import orjson
import pytest
from hypothesis import strategies as st

from maas_client import client as client_module
from maas_client import listing
from maas_client.client import MaasClient
from maas_client.errors import MaasServerError
from tests.support.maas import Sim

SHAPE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=25,
)


def cut(body: bytes, points: list[int]) -> list[bytes]:
    """The body in chunks cut at the given offsets (anywhere: inside a string, a number, a
    multi-byte character)."""
    edges = sorted({0, len(body), *(p % (len(body) + 1) for p in points)})
    return [body[a:b] for a, b in itertools.pairwise(edges)]


@hypothesis.settings(max_examples=300, deadline=None, database=None)
@hypothesis.given(
    items=st.lists(JSON, max_size=6),
    points=st.lists(st.integers(min_value=0), max_size=12),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
)
def test_cut_anywhere_the_elements_are_those_of_the_whole_body(
    items: list[Any], points: list[int], ascii_only: bool, indent: int | None
) -> None:
    body = json.dumps(items, ensure_ascii=ascii_only, indent=indent).encode()
    assert list(listing.array_items(cut(body, points))) == json.loads(body)


@hypothesis.settings(max_examples=300, deadline=None, database=None)
@hypothesis.given(
    body=st.one_of(
        st.binary(max_size=60),
        st.lists(JSON, max_size=4).map(lambda v: json.dumps(v).encode()[: -1 or None]),
        st.tuples(st.lists(JSON, max_size=4), st.binary(max_size=4)).map(
            lambda t: json.dumps(t[0]).encode() + t[1]
        ),
        JSON.map(lambda v: json.dumps(v).encode()),
    ),
    points=st.lists(st.integers(min_value=0), max_size=6),
)
def test_any_body_is_its_elements_or_a_shape_error(body: bytes, points: list[int]) -> None:
    try:
        whole: Any = list(orjson.loads(body) or ()) if body.strip() else []
    except SHAPE_ERRORS:
        whole = SHAPE_ERRORS
    try:
        streamed: Any = list(listing.array_items(cut(body, points)))
    except SHAPE_ERRORS:
        streamed = SHAPE_ERRORS
    if whole is SHAPE_ERRORS or streamed is SHAPE_ERRORS:
        # where the parsers differ on the edges of JSON (orjson refuses lone surrogates and
        # reads integers over 64 bits as floats), each side still answers a value or an error
        return
    assert streamed == whole


@pytest.mark.parametrize(
    "body",
    [
        b'[{"system_id": "a"}, {"system_id": "b"',  # ends early
        b'[{"system_id": "a"} {"system_id": "b"}]',  # no comma
        b'[{"system_id": "a"},]',  # trailing comma
        b'[{"system_id": "a"}] []',  # more after the array
        b'[{"system_id": NaN}]',  # not JSON
        b'[{"system_id": "\xff"}]',  # not UTF-8
        b"[" * 100_000,  # nested beyond any parser's depth
    ],
)
def test_a_broken_listing_is_a_value_error(body: bytes) -> None:
    for size in (1, 3, 1 << 20):
        with pytest.raises(ValueError, match=r"."):
            list(listing.array_items(cut(body, list(range(0, len(body), size)))))


def test_memory_holds_a_chunk_and_a_machine_not_the_listing() -> None:
    machine = {
        "system_id": "x",
        "hostname": "h",
        "interface_set": [{"name": f"eth{i}", "links": [{"id": i}] * 3} for i in range(8)],
        "blockdevice_set": [{"name": f"sd{i}", "size": 10**12} for i in range(8)],
    }
    body = json.dumps([{**machine, "system_id": f"m{i:05d}"} for i in range(3000)]).encode()
    chunk = 64 << 10
    chunks = cut(body, list(range(0, len(body), chunk)))
    tracemalloc.start()
    try:
        seen = sum(1 for _ in listing.array_items(chunks))
        _, streamed = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        whole = len(json.loads(body))
        _, parsed_whole = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == whole == 3000
    # a chunk's bytes and text, the unparsed rest of one element, one element's objects
    assert streamed < 6 * chunk < len(body) / 5, (streamed, len(body))
    assert streamed * 20 < parsed_whole, (streamed, parsed_whole)


def test_summaries_streamed_in_tiny_chunks_match_the_typed_listing(
    sim: Sim, maas: MaasClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        sim.add(hostname=f"stream{i}", status="deployed")
    typed = {m.system_id: m for m in maas.list_machines()}
    monkeypatch.setattr(client_module, "READ_CHUNK", 7)
    summaries = maas.machine_summaries()
    assert {s.system_id for s in summaries} == set(typed)
    for s in summaries:
        m = typed[s.system_id]
        assert (s.hostname, s.status, s.status_name, s.power_state, s.owner) == (
            m.hostname,
            int(m.status),
            m.status_name,
            m.power_state,
            m.owner or "",
        )


def test_a_listing_that_breaks_midway_is_a_maas_error_naming_the_operation(
    monkeypatch: pytest.MonkeyPatch, sim: Sim, maas: MaasClient
) -> None:
    for i in range(3):
        sim.add(hostname=f"broken{i}", status="ready")
    real = client_module.MaasClient._chunks

    def truncated(self: MaasClient, *args: Any) -> Any:
        data = b"".join(real(self, *args))
        yield data[: len(data) // 2]

    monkeypatch.setattr(client_module.MaasClient, "_chunks", truncated)
    with pytest.raises(MaasServerError) as caught:
        maas.machine_summaries()
    assert caught.value.operation == "machine_summaries"
