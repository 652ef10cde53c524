"""What make run knows about the processes around it (devtools/stack.py, childguard.py): a busy
port and a stack still running are named; logs of earlier runs are kept; a child dies with its
parent."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools import stack

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def _sleeper(started: list[subprocess.Popen[bytes]], *marker: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *marker])
    started.append(proc)
    return proc


def test_a_busy_port_is_refused_naming_the_process_that_holds_it() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        refusal = stack.refusal_if_busy([("API", "127.0.0.1", port)])
        assert refusal is not None
        assert f"the API port 127.0.0.1:{port} is busy: held by" in refusal
        if sys.platform.startswith("linux"):
            # named by its command line as the kernel has it (under xdist, not "pytest"; xdist's
            # title names the running test, so a long one is cut with "…": its start is there)
            argv0 = Path("/proc/self/cmdline").read_bytes().split(b"\0")[0].decode()
            assert f"(pid {os.getpid()}: {argv0[:20]}" in refusal
    assert stack.refusal_if_busy([("API", "127.0.0.1", port)]) is None  # closed: free again


def _run_file(data: Path, **procs: tuple[int, str]) -> None:
    path = stack.run_file(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = {name: {"pid": pid, "marker": marker} for name, (pid, marker) in procs.items()}
    path.write_text(json.dumps({"url": "http://127.0.0.1:18000", "processes": entries}))


def test_a_stack_still_running_or_its_leftovers_are_named(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    runner = _sleeper(sleepers, "run_embedded")
    api = _sleeper(sleepers, "gunicorn")
    _run_file(tmp_path, run_embedded=(runner.pid, "run_embedded"), api=(api.pid, "gunicorn"))
    refusal = stack.refusal_if_running(tmp_path)
    assert refusal is not None
    assert f"a stack from {tmp_path} is already running (http://127.0.0.1:18000)" in refusal
    assert f"run_embedded (pid {runner.pid}: " in refusal and f"api (pid {api.pid}: " in refusal
    assert f"kill {runner.pid}" in refusal
    runner.kill()
    runner.wait()
    orphans = stack.refusal_if_running(tmp_path)
    assert orphans is not None and "left behind are still running" in orphans
    assert f"api (pid {api.pid}: " in orphans and f"kill {api.pid}" in orphans
    stranger = _sleeper(sleepers, "something-else")  # a pid the system gave to another program
    _run_file(tmp_path, run_embedded=(runner.pid, "run_embedded"),
              api=(stranger.pid, "gunicorn"))  # fmt: skip
    assert stack.refusal_if_running(tmp_path) is None
    stack.forget(tmp_path)
    assert stack.refusal_if_running(tmp_path) is None


def test_logs_of_earlier_runs_are_kept_not_emptied(tmp_path: Path) -> None:
    log = tmp_path / "api.log"
    for run in range(1, 8):
        stack.rotate(log)
        log.write_text(f"run {run}\n")
    assert log.read_text() == "run 7\n"
    assert [(tmp_path / f"api.log.{n}").read_text() for n in range(1, 6)] == [
        f"run {run}\n" for run in (6, 5, 4, 3, 2)
    ]
    assert not (tmp_path / "api.log.6").exists()
    empty = tmp_path / "beat.log"
    empty.write_text("")
    stack.rotate(empty)
    assert not (tmp_path / "beat.log.1").exists()  # nothing worth keeping


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_guarded_child_dies_with_its_parent_even_on_kill_9() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", (
            "import os, subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-m', 'devtools.childguard',"
            " str(os.getpid()), '--', sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(120)\n")],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 10
        while "childguard" in (stack.command_of(child) or "childguard"):
            assert time.monotonic() < deadline, "the guard never became the command (exec)"
            time.sleep(0.05)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        while stack.command_of(child) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stack.command_of(child) is None
    finally:
        parent.kill()
        parent.wait()
        if stack.command_of(child) is not None:
            os.kill(child, signal.SIGKILL)
