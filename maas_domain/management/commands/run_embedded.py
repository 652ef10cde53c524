"""Run the whole product on one machine: API + admin (gunicorn), a Celery worker, beat and the
bundled MAAS simulator, with a demo site registered against it and probed.

Embedded defaults: SQLite and the filesystem broker under the data folder, so nothing needs
installing. Ctrl-C (or SIGTERM) stops every process; if one process dies, all are stopped.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils import timezone

from maas_domain.auth import api_token_create
from maas_domain.models import ApiToken

EMBEDDED_TOKEN_NAME = "embedded"  # noqa: S105 (a label)


class Command(BaseCommand):
    help = "Run API, admin, worker and beat together (embedded default). Ctrl-C stops all."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--concurrency", type=int, default=2, help="worker processes")
        parser.add_argument("--admin-user", default="admin")
        parser.add_argument("--maas-port", type=int, default=5240, help="simulator port")
        parser.add_argument("--time-scale", type=float, default=30.0, help="simulator clock")
        parser.add_argument("--no-demo", action="store_true", help="skip the demo onboarding")

    def handle(self, *args: Any, **opts: Any) -> None:
        self.stdout.write(f"data folder: {settings.DATA_DIR}")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        # Every process started here shares the metrics folder; what earlier runs left goes.
        from maas_domain.observability.exposition import wipe

        wipe(Path(settings.METRICS_DIR))
        password, token = self._admin_login(opts["admin_user"])
        base = f"http://{opts['host']}:{opts['port']}"
        maas_url = f"http://127.0.0.1:{opts['maas_port']}/MAAS/"
        procs = self._start(opts)
        stopping = False

        def stop(signum: int, frame: Any) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            self._wait_http(f"{maas_url}api/2.0/version/", procs, lambda: stopping)
            probe = self._demo_site(opts["admin_user"], maas_url, base)
            self._wait_http(f"{base}/admin/login/", procs, lambda: stopping)
            if not stopping:
                self._banner(base, opts["admin_user"], password, token)
                self.stdout.write(
                    f"  Demo site   : 'demo' on the MAAS simulator at {maas_url} "
                    f"(probe: {probe['health']})\n"
                )
            if not stopping and not opts["no_demo"]:
                self._demo_onboarding(opts["admin_user"], base, procs, lambda: stopping)
            while not stopping:
                for name, proc in procs.items():
                    if proc.poll() is not None:
                        raise CommandError(f"{name} exited with code {proc.returncode}")
                time.sleep(0.5)
        finally:
            self._stop_all(procs)

    def _admin_login(self, username: str) -> tuple[str, str]:
        """Ensure a staff superuser with a password kept in the data folder; mint a token."""
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
            ApiToken.objects.filter(
                user=user, name=EMBEDDED_TOKEN_NAME, revoked_at__isnull=True
            ).update(revoked_at=timezone.now())
            _, raw = api_token_create(user=user, name=EMBEDDED_TOKEN_NAME)
        return password, raw

    def _demo_site(self, username: str, maas_url: str, base: str) -> dict[str, Any]:
        from maas_domain.services.demo import demo_site_ensure

        user = get_user_model().objects.get(username=username)
        api_key = self._sim_key_file().read_text().strip()
        return demo_site_ensure(actor=user, maas_url=maas_url, api_key=api_key, node_api_url=base)

    def _demo_onboarding(
        self, username: str, base: str, procs: dict[str, Any], stopping: Any
    ) -> None:
        """Onboard c07u31 against the simulator and print its timeline as it happens."""
        from maas_domain.services.demo import demo_onboarding_start
        from onboarding.models import Onboarding

        user = get_user_model().objects.get(username=username)
        wf = demo_onboarding_start(actor=user)
        self.stdout.write(f"Demo onboarding of c07u31: {base}/api/v1/admin/onboardings/{wf.pk}")
        seen = 0
        deadline = time.monotonic() + 300
        while not stopping() and time.monotonic() < deadline:
            events = list(wf.events.order_by("at", "id")[seen:])
            for e in events:
                self.stdout.write(f"  {e.at:%H:%M:%S} {e.stage:<13} {e.kind:<17} {e.message}")
            seen += len(events)
            self.stdout.flush()
            wf = Onboarding.objects.get(pk=wf.pk)
            if wf.state in ("succeeded", "failed"):
                self.stdout.write(
                    f"Demo onboarding {wf.state}" + (f": {wf.reason}" if wf.reason else "")
                )
                return
            for name, proc in procs.items():
                if proc.poll() is not None:
                    raise CommandError(f"{name} exited with code {proc.returncode}")
            time.sleep(0.5)

    def _sim_key_file(self) -> Path:
        return Path(settings.DATA_DIR) / "simulator-api-key"

    def _start(self, opts: dict[str, Any]) -> dict[str, subprocess.Popen[bytes]]:
        py = sys.executable
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        scenario = Path(__file__).resolve().parents[2] / "simulator" / "scenarios" / "demo.yaml"
        commands = {
            "maas-simulator": [
                py, manage, "simulate_maas", "--port", str(opts["maas_port"]),
                "--api-key-file", str(self._sim_key_file()), "--scenario", str(scenario),
                "--time-scale", str(opts["time_scale"]),
            ],
            "api": [
                py, "-m", "gunicorn", "config.wsgi",
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
        procs = {}
        for name, cmd in commands.items():
            # Own session: a terminal Ctrl-C reaches only us, and we stop the children in order.
            procs[name] = subprocess.Popen(cmd, env=env, start_new_session=True)
            self.stdout.write(f"started {name} (pid {procs[name].pid})")
        return procs

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

    def _banner(self, base: str, user: str, password: str, token: str) -> None:
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "MAAS control plane is running (embedded mode)",
                    f"  Admin pages : {base}/admin/  (login: {user} / {password})",
                    f"  Admin API   : {base}/api/v1/admin/",
                    f"  API token   : {token}",
                    f"  Metrics     : {base}/api/v1/admin/metrics  (same token; Prometheus)",
                    "  Example     :",
                    f"    curl -s -H 'Authorization: Bearer {token}' "
                    f"{base}/api/v1/admin/maas-sites",
                    "Press Ctrl-C to stop everything.",
                    "",
                ]
            )
        )
        self.stdout.flush()

    def _stop_all(self, procs: dict[str, subprocess.Popen[bytes]]) -> None:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for name, proc in procs.items():
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            self.stdout.write(f"stopped {name}")
