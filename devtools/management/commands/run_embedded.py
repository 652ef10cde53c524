"""Run the whole product on one machine: API + admin (gunicorn), a Celery worker, beat and the
bundled MAAS simulator, with a demo site registered against it and probed, plus a spare
simulated MAAS no site uses (for a site of your own: one MAAS is one site, docs/api.md).

The simulators keep their state in memory only, so each start resets the embedded database with
them and says so (``devtools/freshstart.py``; ``--keep-database`` keeps it, and they are told
the system ids our nodes hold so none is reused).

Embedded defaults: SQLite and the filesystem broker under the data folder, so nothing needs
installing. Every URL follows ``--port`` (the banner, the demo site, and the node API address
every site without its own uses: ``MAASCP_NODE_API_URL`` for the processes started here).

A start is refused, with the processes named, while a stack from the same data folder runs (or
left processes behind) or while a port it needs is busy (``devtools/stack.py``). Ctrl-C,
SIGTERM and SIGHUP (closing the terminal) stop every process; if one process dies, all are
stopped; on Linux the children also die with this process, even on ``kill -9``
(``devtools/childguard.py``).

The console stays readable: the banner, then one short line per workflow timeline event (the demo
onboarding first). Each process's full output (JSON log lines) goes to
``<data folder>/log/<process>.log``, the previous runs' to ``<process>.log.1`` … ``.5``;
``--show-logs`` also copies it to the console. The admin API token is kept across restarts and
written, with the URL, as a maasctl profile (``devtools/localprofile.py``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

import maas_simulator
from devtools import freshstart, localprofile, stack
from devtools.console import TimelineFollower
from devtools.demo import demo_onboarding_start, demo_site_ensure
from maas_domain.observability.exposition import wipe
from maas_domain.work import WorkflowState
from maas_simulator.management.commands.simulate_maas import new_api_key
from onboarding.models import Onboarding

# the word of each child's command line that tells it from a process that reused its pid
MARKERS = {"maas-simulator": "simulate_maas", "lab-maas": "simulate_maas", "api": "gunicorn",
           "worker": "celery", "beat": "celery"}  # fmt: skip


class Command(BaseCommand):
    help = "Run API, admin, worker and beat together (embedded default). Ctrl-C stops all."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--concurrency", type=int, default=2, help="worker processes")
        parser.add_argument("--admin-user", default="admin")
        parser.add_argument("--maas-port", type=int, default=5240, help="simulator port")
        parser.add_argument(
            "--lab-maas-port",
            type=int,
            default=None,
            help="the spare simulated MAAS's port (default: --maas-port + 1)",
        )
        parser.add_argument(
            "--keep-database",
            action="store_true",
            help="keep the embedded database of earlier runs although the simulated MAAS "
            "starts afresh (their nodes then show as drift)",
        )
        parser.add_argument("--time-scale", type=float, default=30.0, help="simulator clock")
        parser.add_argument("--no-demo", action="store_true", help="skip the demo onboarding")
        parser.add_argument(
            "--show-logs",
            action="store_true",
            help="also print every process's JSON log lines here (always in <data>/log/)",
        )
        parser.add_argument(
            "--no-profile",
            action="store_true",
            help="do not write the stack's profile into maasctl's config (docs/cli.md)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        data_dir = Path(settings.DATA_DIR)
        base = f"http://{opts['host']}:{opts['port']}"
        maas_url = f"http://127.0.0.1:{opts['maas_port']}/MAAS/"
        opts["lab_maas_port"] = opts["lab_maas_port"] or opts["maas_port"] + 1
        lab_url = f"http://127.0.0.1:{opts['lab_maas_port']}/MAAS/"
        self._refuse_if_running_or_busy(data_dir, opts)
        self._say(f"data folder: {data_dir}")
        database = self._prepare_database(data_dir, base, keep=opts["keep_database"])
        password, token, minted = self._admin_login(opts["admin_user"])
        profile = None if opts["no_profile"] else self._write_profile(data_dir, base)
        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, stop)
        self._ensure_sim_key()
        procs = self._start(opts)
        stack.record(data_dir, url=base, children={
            name: (proc.pid, MARKERS[name]) for name, proc in procs.items()})  # fmt: skip
        try:
            self._wait_http(f"{maas_url}api/2.0/version/", procs, lambda: stopping)
            self._wait_http(f"{lab_url}api/2.0/version/", procs, lambda: stopping)
            probe = self._demo_site(opts["admin_user"], maas_url)
            self._wait_http(f"{base}/admin/login/", procs, lambda: stopping)
            if stopping:
                return
            self._banner(base, opts["admin_user"], password, token, minted, profile,
                         database.banner())  # fmt: skip
            self._say(
                f"  Demo site   : 'demo' on the MAAS simulator at {maas_url} "
                f"(probe: {probe['health']})\n"
                f"  Spare MAAS  : {lab_url} (no site uses it: one MAAS is one site, so a site "
                'of your own goes there; README, "Try the API")\n'
                f"  MAAS key    : both simulators' admin API key is in {self._sim_key_file()}\n"
            )
            follower = TimelineFollower()  # before the demo starts: its first events are shown
            demo = None if opts["no_demo"] else self._demo_onboarding(opts["admin_user"], base)
            self._follow(follower, procs, demo, lambda: stopping)
        finally:
            self._stop_all(procs)
            stack.forget(data_dir)

    def _refuse_if_running_or_busy(self, data_dir: Path, opts: dict[str, Any]) -> None:
        """Refused, naming the processes, while a stack of this data folder runs (or left
        processes behind) or while a port the stack needs is busy (``devtools/stack.py``)."""
        refusal = stack.refusal_if_running(data_dir) or stack.refusal_if_busy(
            [
                ("API", opts["host"], opts["port"]),
                ("MAAS simulator", "127.0.0.1", opts["maas_port"]),
                ("spare MAAS simulator", "127.0.0.1", opts["lab_maas_port"]),
            ]
        )
        if refusal:
            raise CommandError(refusal)

    def _prepare_database(self, data_dir: Path, base: str, *, keep: bool) -> freshstart.Outcome:
        """The embedded database reset with the simulators (or kept), migrated, the static files
        collected, the system ids our nodes hold reserved, the metrics of earlier runs wiped."""
        database = freshstart.prepare(keep=keep)
        # The node API address of every site without its own follows --port (unless set).
        if "MAASCP_NODE_API_URL" not in os.environ:
            os.environ["MAASCP_NODE_API_URL"] = settings.NODE_API_URL = base
        if not (data_dir / "maascp.sqlite3").exists() and freshstart.embedded_database():
            self._say("preparing a new database (about 10 s)")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        freshstart.reserve_system_ids(self._reserved_file())
        # Every process started here shares the metrics folder; what earlier runs left goes.
        wipe(Path(settings.METRICS_DIR))
        return database

    def _write_profile(self, data_dir: Path, base: str) -> tuple[str, Path] | None:
        """The stack's maasctl profile (docs/cli.md), or None, said why, when it cannot be."""
        try:
            return localprofile.write_profile(
                url=base, token_path=localprofile.token_file(data_dir)
            )
        except localprofile.ProfileError as exc:
            self._say(f"note: no maasctl profile written ({exc})")
            return None

    def _ensure_sim_key(self) -> None:
        if not self._sim_key_file().exists():  # one key for both simulators, made once
            fd = os.open(self._sim_key_file(), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(new_api_key())

    def _follow(
        self,
        follower: TimelineFollower,
        procs: dict[str, subprocess.Popen[bytes]],
        demo: Onboarding | None,
        stopped: Callable[[], bool],
    ) -> None:
        """Until stopped: the timeline's new lines, the demo onboarding's end, and a
        CommandError when a process exits."""
        while not stopped():
            for line in follower.new_lines():
                self._say(line)
            if demo is not None:
                demo.refresh_from_db(fields=["state", "reason"])
                if demo.state in (WorkflowState.SUCCEEDED, WorkflowState.FAILED):
                    reason = f": {demo.reason}" if demo.reason else ""
                    self._say(f"Demo onboarding {demo.state}{reason}")
                    demo = None
            for name, proc in procs.items():
                if proc.poll() is not None:
                    raise CommandError(
                        f"{name} exited with code {proc.returncode} "
                        f"(see {self._log_dir() / (name + '.log')})"
                    )
            time.sleep(0.5)

    def _say(self, line: str) -> None:
        """A console line; a console that went away (the terminal closed: SIGHUP) is no reason
        to stop anything but the stack."""
        try:
            self.stdout.write(line)
            self.stdout.flush()
        except OSError:  # EIO from a hung-up terminal, EPIPE from a closed pipe
            self.stdout = type(self.stdout)(open(os.devnull, "w"))  # noqa: SIM115 (to the end)

    def _admin_login(self, username: str) -> tuple[str, str, bool]:
        """Ensure a staff superuser with a password kept in the data folder; the admin API token
        kept across restarts (a new one only when it is revoked or about to expire)."""
        pw_file = Path(settings.DATA_DIR) / "admin-password"
        if not pw_file.exists():
            pw_file.write_text(secrets.token_urlsafe(12))
            pw_file.chmod(0o600)
        password = pw_file.read_text().strip()
        user_model = get_user_model()
        with transaction.atomic():
            user, _ = user_model.objects.get_or_create(username=username)
            user.is_staff = user.is_superuser = user.is_active = True
            user.set_password(password)
            user.save()
            raw, minted = localprofile.embedded_token(user=user, data_dir=Path(settings.DATA_DIR))
        return password, raw, minted

    def _demo_site(self, username: str, maas_url: str) -> dict[str, Any]:
        user = get_user_model().objects.get(username=username)
        api_key = self._sim_key_file().read_text().strip()
        return demo_site_ensure(actor=user, maas_url=maas_url, api_key=api_key)

    def _demo_onboarding(self, username: str, base: str) -> Onboarding | None:
        """Onboard c07u31 against the simulator; the follower prints its timeline."""
        user = get_user_model().objects.get(username=username)
        wf = demo_onboarding_start(actor=user)
        url = f"{base}/api/v1/admin/onboardings/{wf.pk}"
        if wf.state == WorkflowState.SUCCEEDED:
            self._say(f"Demo onboarding of c07u31 already succeeded: {url}")
            return None
        self._say(f"Demo onboarding of c07u31: {url}")
        if wf.events.exists() and wf.state != WorkflowState.PENDING:
            self._say("  (resumed from an earlier run; its timeline is at the URL above)")
        return wf

    def _log_dir(self) -> Path:
        return Path(settings.DATA_DIR) / "log"

    def _sim_key_file(self) -> Path:
        return Path(settings.DATA_DIR) / "simulator-api-key"

    def _reserved_file(self) -> Path:
        return Path(settings.DATA_DIR) / "run" / "reserved-system-ids"

    def _start(self, opts: dict[str, Any]) -> dict[str, subprocess.Popen[bytes]]:
        py = sys.executable
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        scenarios = Path(maas_simulator.__file__).resolve().parent / "scenarios"
        simulator = [py, manage, "simulate_maas", "--api-key-file", str(self._sim_key_file()),
                     "--time-scale", str(opts["time_scale"]),
                     "--reserve-system-ids", str(self._reserved_file())]  # fmt: skip
        commands = {
            "maas-simulator": [
                *simulator, "--port", str(opts["maas_port"]),
                "--scenario", str(scenarios / "demo.yaml"),
            ],
            "lab-maas": [
                *simulator, "--port", str(opts["lab_maas_port"]),
                "--scenario", str(scenarios / "lab.yaml"), "--seed", "1",
            ],
            "api": [
                py, "-m", "gunicorn", "config.wsgi", "-c", "python:config.gunicorn",
                "--bind", f"{opts['host']}:{opts['port']}",
                "--workers", "2", "--threads", "4", "--timeout", "60",
            ],
            "worker": [
                py, "-m", "celery", "-A", "config", "worker",
                "--loglevel", "INFO", "--concurrency", str(opts["concurrency"]),
                "--hostname", "embedded@%h",
            ],
            "beat": [
                py, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
                "--schedule", str(Path(settings.DATA_DIR) / "celerybeat-schedule"),
            ],
        }  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        # The demo wants quick hand-offs; production keeps the 10 s default.
        env.setdefault("MAASCP_WORKFLOW_SWEEP_SECONDS", "2")
        log_dir = self._log_dir()
        log_dir.mkdir(parents=True, exist_ok=True)
        procs = {}
        logs = {}
        guard = [py, "-m", "devtools.childguard", str(os.getpid()), "--"]
        for name, cmd in commands.items():
            stack.rotate(log_dir / f"{name}.log")  # the last runs' logs are kept (.1 … .5)
            logs[name] = log = (log_dir / f"{name}.log").open("wb")
            # Own session: a terminal Ctrl-C reaches only us, and we stop the children in order.
            procs[name] = subprocess.Popen(
                [*guard, *cmd],
                env=env,
                cwd=settings.BASE_DIR,
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if opts["show_logs"] else log,
                stderr=subprocess.STDOUT,
            )
            if not opts["show_logs"]:
                log.close()  # the child holds its own copy
        if opts["show_logs"]:  # threads only once every child is started
            for name, proc in procs.items():
                threading.Thread(
                    target=self._tee, args=(name, proc, logs[name]), daemon=True
                ).start()
        self._say(
            f"started {', '.join(procs)}; their logs: {log_dir}/<name>.log (earlier runs: "
            "<name>.log.1 …)" + ("" if opts["show_logs"] else " (--show-logs to see them here)")
        )
        if os.geteuid() == 0:
            self._say(
                "note: running as root, so Celery logs a SecurityWarning about superuser "
                "privileges in worker.log; run `make run` as an ordinary user to avoid it"
            )
        return procs

    def _tee(self, name: str, proc: subprocess.Popen[bytes], log: Any) -> None:
        """--show-logs: each line to the process's log file and, prefixed, to the console."""
        assert proc.stdout is not None
        with log:
            for raw in proc.stdout:
                log.write(raw)
                log.flush()
                self._say(f"[{name}] {raw.decode(errors='replace').rstrip()}")

    def _wait_http(self, url: str, procs: dict[str, Any], stopping: Any) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not stopping():
            for name, proc in procs.items():
                if proc.poll() is not None:
                    raise CommandError(f"{name} exited with code {proc.returncode} at start-up")
            try:
                with urllib.request.urlopen(url, timeout=2):  # noqa: S310 (our own loopback)
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        if not stopping():
            raise CommandError(f"the API did not answer at {url} within 60s")

    def _banner(
        self,
        base: str,
        user: str,
        password: str,
        token: str,
        minted: bool,
        profile: tuple[str, Path] | None,
        database: str,
    ) -> None:
        maasctl = Path(sys.executable).with_name("maasctl")
        with contextlib.suppress(ValueError):
            maasctl = maasctl.relative_to(Path.cwd())
        kept = localprofile.token_file(Path(settings.DATA_DIR))
        if profile is None:
            how = [f"  maasctl     : MAASCTL_URL={base} MAASCTL_TOKEN_FILE={kept} {maasctl} "
                   "sites list"]  # fmt: skip
        else:
            name, config = profile
            flag = "" if name == "default" else f"--profile {name} "
            how = [f"  maasctl     : {maasctl} {flag}sites list",
                   f"                (profile '{name}' written to {config})"]  # fmt: skip
        self._say(
            "\n".join(
                [
                    "",
                    "MAAS control plane is running (embedded mode)",
                    f"  Admin pages : {base}/admin/  (login: {user} / {password})",
                    f"  Admin API   : {base}/api/v1/admin/",
                    f"  API token   : {token}  ({'new' if minted else 'the same as before'}; "
                    f"kept in {kept} across restarts)",
                    f"  Database    : {database}",
                    f"  Metrics     : {base}/api/v1/admin/metrics  (same token; Prometheus)",
                    f"  Health      : {base}/health/live  and  {base}/health/ready  (no token; "
                    "ready checks the database, broker and secrets)",
                    f"  API docs    : {base}/api/v1/docs/  (OpenAPI: {base}/api/v1/schema/)",
                    *how,
                    "  Example     :",
                    f"    curl -s -H 'Authorization: Bearer {token}' "
                    f"{base}/api/v1/admin/maas-sites",
                    "Press Ctrl-C to stop everything (closing the terminal does too).",
                    "",
                ]
            )
        )

    def _stop_all(self, procs: dict[str, subprocess.Popen[bytes]]) -> None:
        """SIGTERM to every process group, then wait (SIGKILL after 15 s); never stopped by a
        console that went away."""
        for proc in procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for name, proc in procs.items():
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            self._say(f"stopped {name}")
