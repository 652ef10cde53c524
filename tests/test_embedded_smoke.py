"""The README's run command really starts the embedded default: SQLite, the filesystem broker,
API + admin (gunicorn), a worker, beat and the MAAS simulator with a demo site whose probe is
healthy. A site can be created through the API, a task round-trips through the worker, and
Ctrl-C stops every process. The console shows the banner and one line per timeline event, never
the processes' logs: those go to <data>/log/<process>.log. On a port that is not 8000, the demo
onboarding succeeds only if the node API address follows --port (its preflight reaches it).

A restart keeps the API token and the earlier logs; a second start from the same data folder
is refused naming the first; SIGHUP (the terminal closing) stops everything, and so does a
kill -9 of the runner on Linux; maasctl reaches the stack through the profile it wrote."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def embedded_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAASCP_", "MAASCTL_"))}
    env["MAASCP_DATA_DIR"] = str(data_dir)
    env["MAASCTL_CONFIG"] = str(data_dir / "maasctl.toml")  # never the user's own config
    return env


QUIET = 240.0  # seconds without a line from the stack before it is judged stuck


class QuietWatchdog:
    """Kills ``process`` once it has said nothing for ``quiet`` seconds (``heard`` each line)."""

    def __init__(self, process: subprocess.Popen[str], quiet: float) -> None:
        self.process, self.quiet = process, quiet
        self.last = time.monotonic()
        self.stopped = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def heard(self, line: str) -> str:
        self.last = time.monotonic()
        return line

    def _watch(self) -> None:
        while not self.stopped.wait(1.0):
            if time.monotonic() - self.last > self.quiet:
                self.process.kill()
                return

    def cancel(self) -> None:
        self.stopped.set()


def test_run_command_brings_up_the_whole_embedded_stack(tmp_path: Path) -> None:
    port = free_port()
    env = embedded_env(tmp_path)
    runner = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "run_embedded",
            "--port",
            str(port),
            "--maas-port",
            str(free_port()),
            "--lab-maas-port",
            str(free_port()),
            "--concurrency",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    # a stack that goes quiet for QUIET seconds without saying what the test waits for is
    # killed, so readline ends: a failure, not a hang (its children go with it:
    # devtools/childguard.py). Progress, not a deadline: a loaded machine is slower, not silent.
    watchdog = QuietWatchdog(runner, QUIET)
    try:
        token = None
        assert runner.stdout is not None
        demo_line = ""
        while not demo_line:
            line = watchdog.heard(runner.stdout.readline())
            if not line:
                break
            output.append(line)
            if match := re.search(r"API token\s+:\s+(\S+)", line):
                token = match.group(1)
            if "Demo site" in line:
                demo_line = line
        assert token, "".join(output)
        assert "probe: healthy" in demo_line, "".join(output)
        assert f"(profile 'default' written to {tmp_path / 'maasctl.toml'})" in "".join(output)
        assert (tmp_path / "maascp.sqlite3").exists()
        assert (tmp_path / "broker" / "queue").is_dir()

        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/admin/maas-sites",
            data=json.dumps(
                {"name": "smoke", "maas_url": "http://127.0.0.1:5299/MAAS/", "region": "east"}
            ).encode(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 201
            assert json.load(response)["name"] == "smoke"
        listing = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/admin/maas-sites?name=demo",
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(listing, timeout=10) as response:
            (demo,) = json.load(response)["results"]
            assert demo["health"] == "healthy"
            assert demo["credentials"]["maas_api_key"]["confirmed_at"]

        ping = subprocess.run(
            [sys.executable, "manage.py", "ping_worker", "--timeout", "60"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert ping.returncode == 0, ping.stderr
        assert "pong from" in ping.stdout
        # the embedded stack's one worker serves every region (the filesystem broker is a folder
        # on this machine): its heartbeat is a file in the data folder, and no region is unserved
        assert list((tmp_path / "workers").glob("*.json")), "no worker heartbeat file"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health/ready", timeout=10) as ready:
            assert json.load(ready)["regions"] == {"heartbeats": "ok", "unserved": []}

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=10) as page:
            assert b"Django" in page.read() or page.status == 200

        # the run command ends with a demo onboarding of c07u31 and prints its timeline; the
        # outcome line may come before the timeline's last lines (the console prints what the
        # follower found, then reads the state, which may have moved meanwhile): read on until
        # both are there, whatever their order
        finished = ""
        stages = ("discover", "commission", "deploy", "enrollment", "complete")

        def timeline_complete() -> bool:
            text = "".join(output)
            return all(re.search(rf"{stage}\s+stage.completed", text) for stage in stages)

        while not (finished and timeline_complete()):
            line = watchdog.heard(runner.stdout.readline())
            if not line:
                break
            output.append(line)
            if line.startswith("Demo onboarding ") and "http" not in line:
                finished = line
        text = "".join(output)
        assert "Demo onboarding succeeded" in finished, text
        for stage in stages:
            assert re.search(rf"{stage}\s+stage.completed", text), stage

        # the API's scrape endpoint shows what the worker process recorded (shared metrics dir)
        scrape = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/admin/metrics",
            headers={"Authorization": f"Bearer {token}"},
        )
        with urllib.request.urlopen(scrape, timeout=10) as response:
            metrics = response.read().decode()
        assert re.search(r'maascp_workflows\{kind="onboarding",state="succeeded"\} 1', metrics)
        ended = (
            r"maascp_workflow_stage_duration_seconds_count"
            r'\{kind="onboarding",outcome="succeeded",stage="deploy"\} 1'
        )
        assert re.search(ended, metrics), metrics
        assert re.search(r'maascp_maas_requests_total\{[^}]*operation="deploy"', metrics)
    finally:
        watchdog.cancel()
        runner.send_signal(signal.SIGINT)
        rest, _ = runner.communicate(timeout=60)
        output.append(rest)
    text = "".join(output)
    assert runner.returncode == 0, text
    for name in ("maas-simulator", "api", "worker", "beat"):
        assert f"stopped {name}" in text
    # a quiet console: no JSON log line, no process banner or library warning...
    for line in text.splitlines():
        assert not line.lstrip().startswith("{"), line
    for noise in ("superuser privileges: this is", "celery beat v", "[INFO]", "[tasks]"):
        assert noise not in text, noise
    if os.geteuid() == 0:  # Celery's warning is in worker.log; the console says what to do
        assert "run `make run` as an ordinary user" in text
    timeline = [
        line for line in text.splitlines() if re.match(r"  \d\d:\d\d:\d\d onboarding ", line)
    ]
    assert timeline and all(len(line) < 160 for line in timeline), timeline
    # ...because each process's full log is in its file
    logs = tmp_path / "log"
    assert {p.name for p in logs.iterdir()} == {
        "maas-simulator.log",
        "lab-maas.log",
        "api.log",
        "worker.log",
        "beat.log",
    }
    worker_log = [json.loads(line) for line in _json_lines(logs / "worker.log")]
    assert any(r["logger"] == "maas.client" and r.get("hostname") == "c07u31" for r in worker_log)
    beat_log = [json.loads(line) for line in _json_lines(logs / "beat.log")]
    assert any(r["logger"] == "celery.beat" for r in beat_log)


def _json_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("{")]


def test_show_logs_copies_a_process_log_to_the_console_and_its_file(tmp_path: Path) -> None:
    import io

    from devtools.management.commands.run_embedded import Command

    console = io.StringIO()
    command = Command(stdout=console)
    child = subprocess.Popen(
        [sys.executable, "-c", "print('{\"msg\": \"one\"}'); print('two')"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    log = tmp_path / "worker.log"
    command._tee("worker", child, log.open("wb"))
    child.wait()
    assert console.getvalue().splitlines() == ['[worker] {"msg": "one"}', "[worker] two"]
    assert log.read_text() == '{"msg": "one"}\ntwo\n'


def _start(data: Path, port: int, maas_port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_embedded", "--port", str(port), "--maas-port",
         str(maas_port), "--lab-maas-port", str(free_port()), "--concurrency", "1", "--no-demo"],
        cwd=ROOT, env=embedded_env(data), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,  # signals from this test reach the runner alone
    )  # fmt: skip


def _banner(runner: subprocess.Popen[str]) -> str:
    """The output up to the demo site line (the stack is up); a runner silent for 120 s is
    killed (readline then ends)."""
    assert runner.stdout is not None
    lines: list[str] = []
    watchdog = threading.Timer(120, runner.kill)
    watchdog.start()
    try:
        for line in runner.stdout:
            lines.append(line)
            if "Demo site" in line:
                return "".join(lines)
    finally:
        watchdog.cancel()
    raise AssertionError("".join(lines))


def _gone(pids: list[int], seconds: float = 30) -> list[int]:
    """The pids still alive (not zombies) after waiting up to ``seconds``."""
    from devtools.stack import command_of

    deadline = time.monotonic() + seconds
    while (alive := [p for p in pids if command_of(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def _children(data: Path) -> list[int]:
    procs = json.loads((data / "run" / "embedded.json").read_text())["processes"]
    return [entry["pid"] for name, entry in procs.items() if name != "run_embedded"]


def test_restart_keeps_the_token_and_logs_and_hangup_or_kill_stops_everything(
    tmp_path: Path,
) -> None:
    port, maas_port = free_port(), free_port()
    children: list[int] = []
    first = _start(tmp_path, port, maas_port)
    try:
        text = _banner(first)
        token = re.search(r"API token\s+:\s+(\S+)", text).group(1)
        assert "(new; kept in" in text
        # maasctl finds the stack with nothing exported: the profile make run wrote
        env = {k: v for k, v in embedded_env(tmp_path).items() if k != "MAASCP_DATA_DIR"}
        script = Path(sys.executable).with_name("maasctl")
        listed = subprocess.run([str(script), "sites", "list", "-o", "json"], env=env,
                                capture_output=True, text=True, timeout=60)  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        assert [s["name"] for s in json.loads(listed.stdout)] == ["demo"]
        # a second start from the same data folder is refused, naming the first
        second = subprocess.run(
            [sys.executable, "manage.py", "run_embedded", "--port", str(free_port()),
             "--maas-port", str(free_port()), "--lab-maas-port", str(free_port()), "--no-demo"],
            cwd=ROOT, env=embedded_env(tmp_path), capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert second.returncode != 0
        assert f"is already running (http://127.0.0.1:{port})" in second.stderr
        assert f"run_embedded (pid {first.pid}: " in second.stderr
        children = _children(tmp_path)
        # the terminal goes away: its output is closed and the runner gets SIGHUP
        assert first.stdout is not None
        first.stdout.close()
        first.send_signal(signal.SIGHUP)
        first.wait(timeout=60)
        assert _gone(children) == []
        assert not (tmp_path / "run" / "embedded.json").exists()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        for pid in _gone(children, seconds=0):  # only when an assertion above failed
            os.kill(pid, signal.SIGKILL)
    again = _start(tmp_path, port, maas_port)
    try:
        text = _banner(again)
        assert f"API token   : {token}  (the same as before" in text  # across the reset too
        # the simulators start afresh, and the database with them, saying what went
        assert "Database    : reset with the simulated MAAS" in text
        assert "the last run's 1 site(s) are gone" in text
        assert (tmp_path / "log" / "api.log.1").stat().st_size > 0  # the first run's log
        children = _children(tmp_path)
        again.kill()  # kill -9 of the runner: no SIGTERM handler runs
        again.wait()
        if sys.platform.startswith("linux"):
            assert _gone(children) == []  # they die with it (devtools/childguard.py)
    finally:
        if again.poll() is None:
            again.kill()
            again.wait()
        for pid in _gone(children, seconds=0):
            os.kill(pid, signal.SIGKILL)
