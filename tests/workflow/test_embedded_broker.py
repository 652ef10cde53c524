"""The embedded default's broker (maas_domain/broker.py): a message is visible to a worker only
once it is written whole. kombu's own filesystem transport showed the file before writing it,
and a worker that read it then stopped with "Unrecoverable error" (a `make run` stack ended
mid-journey that way under load)."""

from __future__ import annotations

import threading
from pathlib import Path
from queue import Empty
from typing import Any, cast

from kombu import Connection

from maas_domain import broker

N = 400
BODY = "x" * 100_000  # big enough that writing it takes a while


def options(root: Path) -> dict[str, Any]:
    """The folders config/settings.py lays out for ``filesystem://``."""
    for sub in ("queue", "processed", "control"):
        (root / sub).mkdir()
    return {
        "data_folder_in": str(root / "queue"),
        "data_folder_out": str(root / "queue"),
        "processed_folder": str(root / "processed"),
        "control_folder": str(root / "control"),
        "store_processed": False,
    }


def test_the_filesystem_scheme_is_the_atomic_transport(tmp_path: Path) -> None:
    with Connection("filesystem://", transport_options=options(tmp_path)) as conn:
        assert isinstance(conn.default_channel, broker.Channel)


def test_a_reader_racing_a_writer_gets_every_message_whole(tmp_path: Path) -> None:
    opts = options(tmp_path)
    failed: list[BaseException] = []

    def write() -> None:
        try:
            with Connection("filesystem://", transport_options=opts) as conn:
                for i in range(N):
                    cast(broker.Channel, conn.default_channel)._put("work", {"i": i, "body": BODY})
        except BaseException as exc:
            failed.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    seen: list[int] = []
    errors: list[str] = []
    with Connection("filesystem://", transport_options=opts) as conn:
        channel = cast(broker.Channel, conn.default_channel)
        while len(seen) + len(errors) < N and (writer.is_alive() or channel._size("work")):
            try:
                message = channel._get("work")
            except Empty:
                continue
            except Exception as exc:
                errors.append(repr(exc))
                continue
            seen.append(message["i"])
            assert message["body"] == BODY
    writer.join()
    assert not failed, failed
    assert errors == [], f"{len(errors)} messages read half-written: {errors[:3]}"
    assert sorted(seen) == list(range(N))  # none lost, none twice
    assert not any((tmp_path / "queue").iterdir())  # no partial file left behind
