"""README's "Try the API", as written, against the embedded stack (``make run``): the curl
journey creates a site the documented way on the spare MAAS (no CA, no node URL: the stack's
own apply), writes the simulator's key, adds a profile and a SKU, probes, onboards r12u01 and
ends with a succeeded onboarding and an active node; the maasctl journey onboards a CSV batch
on the demo site, lists the active nodes, shows a node's timeline and reimages it, both named by
hostname. A second site on the demo's MAAS is refused, as README says.

The only changes made to the text are the ones a reader makes: the banner's token, the ports
this test runs on, and "y" at the reimage's confirmation prompt. Each substitution must find its
target, so a README that drifts breaks this test rather than passing it silently. Run from a
folder where ``var/`` is the stack's data folder and ``.venv`` the project's, as from the
repository's root."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.test_embedded_smoke import embedded_env, free_port

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def journeys() -> tuple[str, str]:
    """The two shell blocks of README's "Try the API": curl, then maasctl."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Try the API") : text.index("\n## ", text.index("## Try"))]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) == 2, blocks
    return blocks[0], blocks[1]


def replaced(text: str, old: str, new: str) -> str:
    """``old`` replaced where it is not followed by a digit: an address's port must not match
    the start of another (an API on port 52405 once became 518915 when 5240 was replaced)."""
    assert old in text, f"README no longer has {old!r}: update this test with it"
    return re.sub(re.escape(old) + r"(?!\d)", lambda _: new, text)


def run(script: str, cwd: Path, env: dict[str, str], stdin: str = "") -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert done.returncode == 0, f"{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done.stdout


def test_readme_journeys_as_written_end_with_succeeded_onboardings(tmp_path: Path) -> None:
    port, maas_port, lab_port = free_port(), free_port(), free_port()
    data = tmp_path / "var"
    env = embedded_env(data)
    runner = subprocess.Popen(
        [sys.executable, "manage.py", "run_embedded", "--port", str(port), "--maas-port",
         str(maas_port), "--lab-maas-port", str(lab_port), "--concurrency", "2", "--no-demo",
         "--time-scale", "120"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    watchdog = threading.Timer(900, runner.kill)  # a hung stack ends readline: a failure
    watchdog.start()
    output: list[str] = []
    try:
        assert runner.stdout is not None
        for line in runner.stdout:
            output.append(line)
            if "MAAS key" in line:  # the banner's last line
                break
        banner = "".join(output)
        token = re.search(r"API token\s+:\s+(\S+)", banner)
        assert token and "probe: healthy" in banner, banner
        assert f"{data / 'simulator-api-key'}" in banner  # where README says the key is
        assert f"http://127.0.0.1:{port}/health/ready" in banner  # the health endpoints
        threading.Thread(target=lambda: output.extend(runner.stdout or ()), daemon=True).start()

        # the reader's folder: the repository's .venv and the stack's var/
        (tmp_path / ".venv").symlink_to(ROOT / ".venv")
        shell_env = {**env, "COLUMNS": "200"}
        curl, maasctl = journeys()
        curl = replaced(curl, "TOKEN=mcp_...", f"TOKEN={token.group(1)}")
        curl = replaced(curl, "127.0.0.1:8000", f"127.0.0.1:{port}")
        curl = replaced(curl, "127.0.0.1:5241", f"127.0.0.1:{lab_port}")
        printed = run(curl, tmp_path, shell_env).split("\n")
        assert printed[:2] == ["200", "healthy"], printed  # credentials stored, probe healthy
        assert printed[2] == "succeeded", printed  # the onboarding of r12u01
        [node] = json.loads(printed[3])["results"]
        assert (node["hostname"], node["state"], node["site_name"]) == (
            "r12u01",
            "active",
            "lab-east",
        )
        # what README says of a second site on the demo's MAAS
        shared = curl[: curl.index("curl -s -X POST $API/maas-sites/$SITE/credentials")]
        shared = replaced(shared, '"name": "lab-east"', '"name": "lab-west"')
        shared = replaced(shared, f"127.0.0.1:{lab_port}", f"127.0.0.1:{maas_port}")
        shared = shared.replace("| field id)", ")") + 'echo "$SITE"\n'
        refused = json.loads(run(shared, tmp_path, shell_env))
        assert refused["error"] == "maas_in_use" and "'demo'" in refused["detail"], refused

        said = run(maasctl, tmp_path, shell_env, stdin="y\n")  # "y" at the reimage's prompt
        assert "batch 1: 2 succeeded" in said, said
        assert "reimage (erase, then deploy again) node" in said and "gpu-a01 on demo?" in said
        assert "entries, oldest first" in said, said
        reimages = run(".venv/bin/maasctl decommissions list -o json", tmp_path, shell_env)
        assert [(d["hostname"], d["mode"], d["state"]) for d in json.loads(reimages)] == [
            ("gpu-a01", "reimage", "succeeded")
        ]
    finally:
        watchdog.cancel()
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGINT)
            try:
                runner.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(runner.pid, signal.SIGKILL)
                runner.wait()
    assert "Traceback" not in "".join(output)
