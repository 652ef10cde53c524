"""The first `make run` says what it installs and roughly how long (scripts/bootstrap); later
runs are silent unless uv.lock changed. Run on a copy of the script with a stand-in ``uv`` on
PATH that records how it was called (nothing is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE_UV = """#!/bin/sh
echo "$@" >> "$UV_CALLS"
mkdir -p .venv/bin
printf '#!/bin/sh\\nexit 0\\n' > .venv/bin/python
chmod +x .venv/bin/python
"""


def bootstrap(project: Path, calls: Path) -> str:
    env = {**os.environ, "PATH": f"{project / 'fakebin'}:{os.environ['PATH']}",
           "UV_CALLS": str(calls)}  # fmt: skip
    done = subprocess.run(["scripts/bootstrap"], cwd=project, env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_the_first_run_says_what_it_installs_and_how_long_later_runs_are_quiet(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "bootstrap", project / "scripts" / "bootstrap")
    shutil.copy(ROOT / "uv.lock", project / "uv.lock")
    (project / "fakebin").mkdir()
    (project / "fakebin" / "uv").write_text(FAKE_UV)
    (project / "fakebin" / "uv").chmod(0o755)
    calls = tmp_path / "calls"
    packages = (ROOT / "uv.lock").read_text().count('\nname = "')

    first = bootstrap(project, calls)
    assert f"first start: installing the project's {packages} locked packages" in first
    assert "a minute or two" in first and ".venv is ready" in first
    assert "--quiet" not in calls.read_text().splitlines()[-1]  # uv's progress is shown

    again = bootstrap(project, calls)
    assert again == ""  # nothing to say
    assert "--quiet" in calls.read_text().splitlines()[-1]

    (project / "uv.lock").write_text((project / "uv.lock").read_text() + "\n# changed\n")
    changed = bootstrap(project, calls)
    assert "uv.lock changed since .venv was synced: updating .venv" in changed
