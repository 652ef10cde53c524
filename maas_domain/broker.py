"""The embedded default's broker (``MAASCP_BROKER_URL=filesystem://``): kombu's filesystem
transport, with each message written whole before it becomes visible.

kombu's own transport creates the message file in the queue folder and then writes it; a worker
listing the folder in between moves the empty file away, fails to decode it and stops with
"Unrecoverable error" (the message is lost with it). Under load this ended ``make run`` stacks
mid-journey. Here the message is written to a hidden ``.partial-*`` file in the same folder and
renamed into place: a rename within one folder is atomic, and the reader takes only names
ending in ``.<queue>.msg``. ``install()`` (``config/celery.py``) points the ``filesystem``
scheme at this transport in every process that sends or consumes (docs/architecture.md,
"Runtime").
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

PARTIAL_PREFIX = ".partial-"


class Channel(filesystem.Channel):
    # the same signature as kombu's own (its stubs ignore the base class's as well)
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        """Put ``payload`` on ``queue``: written in full under a hidden name, then renamed to
        the name kombu's reader looks for (the same name kombu would give it)."""
        folder = self.data_folder_out
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        fd, partial = tempfile.mkstemp(dir=folder, prefix=PARTIAL_PREFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, os.path.join(folder, name))
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise ChannelError(f"Cannot add a message to {folder!r}") from exc


class Transport(filesystem.Transport):
    Channel = Channel


def install() -> None:
    """Make ``filesystem://`` mean this transport in this process."""
    TRANSPORT_ALIASES["filesystem"] = f"{__name__}:Transport"
