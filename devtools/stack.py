"""What ``make run`` knows about the processes around it (docs/architecture.md, "Runtime"):

* the run file, ``<data>/run/embedded.json``: the runner's pid and its children's, so a second
  start from the same data folder is refused naming them, whether the first is still running
  or left orphans behind;
* who holds a port: a busy port is refused at start with the process named (Linux: from
  ``/proc``; elsewhere ``lsof`` when it is installed);
* each process's log of the previous runs, kept (``<name>.log.1`` … ``.5``) instead of
  emptied.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

KEEP_LOGS = 5


@dataclass(frozen=True)
class Proc:
    name: str
    pid: int
    command: str

    def __str__(self) -> str:
        return f"{self.name} (pid {self.pid}: {self.command})"


def command_of(pid: int) -> str | None:
    """The command line of a live process, or None when there is none (or it is a zombie)."""
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():
        try:
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return None
            raw = (proc / "cmdline").read_bytes()
        except (OSError, IndexError):
            return None
        return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    if not shutil.which("ps"):
        return None
    ps = ["ps", "-o", "stat=,args=", "-p", str(pid)]
    found = subprocess.run(ps, capture_output=True, text=True, check=False)  # noqa: S603
    line = found.stdout.strip()
    if found.returncode != 0 or not line or line.startswith("Z"):
        return None
    return line.split(None, 1)[1] if " " in line else ""


def _short(command: str, width: int = 100) -> str:
    return command if len(command) <= width else command[: width - 1] + "…"


# -- the run file ---------------------------------------------------------------------------------


def run_file(data_dir: Path) -> Path:
    return data_dir / "run" / "embedded.json"


def record(data_dir: Path, *, url: str, children: dict[str, tuple[int, str]]) -> None:
    """Write down this runner and its children: (pid, a word of its command line, to tell a
    pid the system reused since from ours)."""
    procs = {"run_embedded": (os.getpid(), "run_embedded"), **children}
    entries = {name: {"pid": pid, "marker": marker} for name, (pid, marker) in procs.items()}
    path = run_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"url": url, "started_at": datetime.now(UTC).isoformat(),
                                "processes": entries}, indent=2))  # fmt: skip


def forget(data_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        run_file(data_dir).unlink()


def still_running(data_dir: Path) -> tuple[str, list[Proc]]:
    """(the URL the earlier run served, its processes still alive), from the run file."""
    path = run_file(data_dir)
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return "", []
    except (OSError, ValueError):
        return "", []  # unreadable: nothing to go by
    alive = []
    for name, entry in (data.get("processes") or {}).items():
        pid, marker = int(entry.get("pid", 0)), str(entry.get("marker", ""))
        now = command_of(pid) if pid > 0 else None
        if now is not None and marker in now:  # ours, not a pid reused since
            alive.append(Proc(name, pid, _short(now)))
    return str(data.get("url", "")), alive


def refusal_if_running(data_dir: Path) -> str | None:
    """Why this data folder cannot start another stack now, or None."""
    url, alive = still_running(data_dir)
    if not alive:
        return None
    listed = "\n".join(f"  {proc}" for proc in alive)
    pids = " ".join(str(proc.pid) for proc in alive)
    if alive[0].name == "run_embedded":
        return (f"a stack from {data_dir} is already running ({url}):\n{listed}\n"
                f"stop it first: Ctrl-C in its terminal, or kill {alive[0].pid}")  # fmt: skip
    return (f"processes an earlier run from {data_dir} left behind are still running:\n"
            f"{listed}\nstop them first: kill {pids}")  # fmt: skip


# -- ports ----------------------------------------------------------------------------------------


def busy(host: str, port: int) -> bool:
    """Something listens on (host, port): binding it the way a server does fails."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is not busy
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(inode)
    return inodes


def owners(port: int) -> list[Proc]:
    """The processes listening on ``port`` that this user may see."""
    found: dict[int, Proc] = {}
    if Path("/proc/net/tcp").exists():
        sockets = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or not sockets:
                continue
            with contextlib.suppress(OSError):
                for fd in (proc / "fd").iterdir():
                    if os.readlink(fd) in sockets:
                        pid = int(proc.name)
                        found[pid] = Proc(_name(pid), pid, _short(command_of(pid) or "?"))
                        break
        # a server's workers share its socket: name the one that opened it
        found = {pid: p for pid, p in found.items() if _parent(pid) not in found}
    elif shutil.which("lsof"):
        lsof = ["lsof", "-nP", f"-iTCP:{port}", "-sTCP:LISTEN", "-Fp"]
        listed = subprocess.run(lsof, capture_output=True, text=True, check=False)  # noqa: S603
        for pid in re.findall(r"^p(\d+)$", listed.stdout, flags=re.M):
            found[int(pid)] = Proc(_name(int(pid)), int(pid), _short(command_of(int(pid)) or "?"))
    return list(found.values())


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "process"


def refusal_if_busy(ports: list[tuple[str, str, int]]) -> str | None:
    """Why these (what, host, port) cannot be served, naming who holds each busy one."""
    problems = []
    for what, host, port in ports:
        if not busy(host, port):
            continue
        held = owners(port)
        who = ("held by " + ", ".join(map(str, held))) if held else (
            "held by a process this user cannot see (`ss -ltnp` or `lsof -i :PORT` as root "
            "names it)")  # fmt: skip
        problems.append(f"the {what} port {host}:{port} is busy: {who}")
    if not problems:
        return None
    return "\n".join(problems) + "\nchoose others with --port / --maas-port, or stop that process"


# -- logs -----------------------------------------------------------------------------------------


def rotate(log: Path, keep: int = KEEP_LOGS) -> None:
    """Keep the previous runs' logs: ``x.log`` → ``x.log.1`` → … → ``x.log.<keep>``."""
    if not log.exists() or log.stat().st_size == 0:
        return
    for n in range(keep - 1, 0, -1):
        older = log.with_name(f"{log.name}.{n}")
        if older.exists():
            older.replace(log.with_name(f"{log.name}.{n + 1}"))
    log.replace(log.with_name(f"{log.name}.1"))
