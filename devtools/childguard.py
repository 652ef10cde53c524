"""Run a command that is stopped when the process that started it dies: how ``make run`` starts
its children (docs/architecture.md, "Runtime").

``python -m devtools.childguard PARENT_PID -- COMMAND...`` asks Linux for SIGTERM when its
parent dies (``PR_SET_PDEATHSIG``, kept across ``exec``), then becomes COMMAND. So even a
``kill -9`` of ``run_embedded`` leaves no simulator, gunicorn, worker or beat behind; SIGHUP and
Ctrl-C are handled by ``run_embedded`` itself, which stops them in order. Elsewhere it only
runs COMMAND, and the next start names what was left behind (``devtools/stack.py``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    parent, separator, *command = argv
    if separator != "--" or not command:
        raise SystemExit("usage: python -m devtools.childguard PARENT_PID -- COMMAND...")
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != int(parent):  # the parent died before the request took effect
            raise SystemExit(0)
    os.execvp(command[0], command)  # noqa: S606 (our own commands, from run_embedded)


if __name__ == "__main__":
    main(sys.argv[1:])
