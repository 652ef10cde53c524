"""Large listings read incrementally: the elements of a JSON array parsed one at a time from the
body's chunks, so memory holds one chunk and one element, never the whole answer.

MAAS 3.5's ``GET machines/`` has no paging (docs/maas-api.md §3.2): a site of 5,000 machines
answers ~60 MB in one body, and parsing it whole (the bytes, their join and the objects of every
machine at once) took ~440 MB per process; 10,000 machines ~880 MB. Parsed here element by
element with the standard library's C scanner (``json.JSONDecoder.scan_once`` from an index
into a decoded buffer: no copy per element), the same listing costs ~10 MB and no more time
than orjson on the whole body (the whole parse pays for the page faults of its 880 MB).
ijson's C backend was 4-5x slower on the same answer (docs/reconciliation.md, "Performance").

Anything but a JSON array (or an answer that ends early, or is not UTF-8) raises ``ValueError``,
which the client turns into a ``MaasServerError`` naming the operation.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from maas_client.types import MachineSummary


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: orjson refuses them too


_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder(
    parse_constant=_no_constant
).scan_once  # type: ignore[attr-defined]
_SPACE = " \t\n\r"
# An error this close to the end of the buffer may only mean the element goes on in the next
# chunk (a literal, a number or an escape cut in two); further back it is the answer's fault.
_TAIL = 16


class _Buffer:
    """Decoded text of the body from the current element on; grows by chunks."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.text = ""
        self.pos = 0
        self.eof = False

    def more(self) -> None:
        """Drop what was consumed, append the next chunk (at least doubling what is held when
        an element spans many chunks, so re-parsing it stays linear overall)."""
        if self.eof:
            raise ValueError("the JSON answer ends early")
        pending = len(self.text) - self.pos
        parts = [self.text[self.pos :]]
        added = 0
        while not added or added < pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                parts.append(self._decoder.decode(b"", final=True))
                self.eof = True
                break
            text = self._decoder.decode(chunk)
            parts.append(text)
            added += len(text)
        self.text = "".join(parts)
        self.pos = 0

    def rest(self) -> str:
        """Everything from the current position to the end of the body."""
        while not self.eof:
            self.more()
        return self.text[self.pos :]

    def skip_space(self) -> str:
        """The next character that is not whitespace ("" at the end of the body)."""
        while True:
            text, pos = self.text, self.pos
            while pos < len(text) and text[pos] in _SPACE:
                pos += 1
            self.pos = pos
            if pos < len(text):
                return text[pos]
            if self.eof:
                return ""
            self.more()

    def value(self) -> Any:
        """Parse one JSON value at the current position, reading more while it may go on."""
        while True:
            try:
                value, end = _SCAN(self.text, self.pos)
            except StopIteration as stop:  # no value starts where one is due (at any depth)
                if self.eof or stop.value < len(self.text) - _TAIL:
                    raise ValueError(f"expected a JSON value at {stop.value}") from None
            except json.JSONDecodeError as exc:
                cut = exc.pos >= len(self.text) - _TAIL or exc.msg.startswith("Unterminated")
                if self.eof or not cut:
                    raise ValueError(str(exc)) from None
            except RecursionError:
                raise ValueError("the JSON answer is nested too deeply") from None
            else:
                if end < len(self.text) - _TAIL or self.eof:  # a number may go on (1.5|e-3)
                    self.pos = end
                    return value
            self.more()


def array_items(chunks: Iterable[bytes]) -> Iterator[Any]:
    """The elements of the JSON array the chunks spell, one at a time. An empty body is an
    empty array; a body that is another JSON value yields that value's items as ``for`` would
    (``null`` nothing, an object its keys) so callers judge odd shapes as before."""
    buf = _Buffer(chunks)
    first = buf.skip_space()
    if first == "":
        return
    if first != "[":  # not a listing: small or wrong, parsed whole
        yield from orjson.loads(buf.rest()) or ()
        return
    buf.pos += 1
    if buf.skip_space() == "]":
        buf.pos += 1
    else:
        while True:
            yield buf.value()
            sep = buf.skip_space()
            buf.pos += 1
            if sep == "]":
                break
            if sep != ",":
                raise ValueError(f"expected ',' or ']' in the JSON array, not {sep!r}")
            buf.skip_space()
    if buf.skip_space() != "":
        raise ValueError("content after the JSON array")


def not_json(chunks: Iterable[bytes]) -> Any:
    """A body that is not JSON where JSON was due: nothing if it is empty, else ValueError."""
    if any(chunks):
        raise ValueError("the answer is not JSON")
    return None


def machine_summaries(chunks: Iterable[bytes]) -> list[MachineSummary]:
    """``machines/`` reduced to what reconciliation compares, one machine at a time."""
    return [
        MachineSummary(
            m["system_id"],
            m.get("hostname") or "",
            int(m.get("status", -1)),
            m.get("status_name") or "",
            m.get("power_state") or "unknown",
            m.get("owner") or "",
            bool(m.get("enable_hw_sync")),
            m.get("last_sync") or "",
            _int_or_none(m.get("sync_interval")),
        )
        for m in array_items(chunks)
    ]


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)
