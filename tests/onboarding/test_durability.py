"""The database, not the broker, says where a workflow stands. Real worker *processes* are
killed with SIGKILL mid-stage, messages are duplicated or lost, a stage keeps killing its worker,
on Redis and on the embedded default's filesystem broker: every workflow still ends succeeded
(or failed with a reason), MAAS applied each mutation to each machine exactly once (counted by
operation and machine from the simulator's own log), and every execution that died says so on
its workflow's timeline (``stage.lost``: the stage and the calls it had sent).

Waits are bounded by progress, not a deadline (``wait_progressing``): a run that stops moving
fails after ``STALL_SECONDS`` naming where it stood; a slow machine that keeps moving passes.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
import requests
from django.conf import settings
from django.db import connection

from maas_domain import regions
from onboarding.models import Onboarding
from tests.support.flows import (
    ONBOARDING_MUTATIONS,
    Flow,
    assert_mutations_once,
    footprint,
    settle,
    start,
    wait_progressing,
    wait_until,
)
from tests.support.workers import Workers
from workflows import step
from workflows.dispatch import ADVANCE
from workflows.scheduling import admit

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("stage", ["commission", "deploy"])
@pytest.mark.parametrize("when", ["before its MAAS call", "after its MAAS call"])
def test_kill_9_mid_stage(flow_site: Flow, workers: Workers, stage: str, when: str) -> None:
    flow = flow_site
    status = "new" if stage == "commission" else "ready"
    sid = flow.sim.add(hostname="k01", status=status, power_address="10.12.0.1")
    if when.startswith("before"):
        # every read of the machine takes a second, so the kill lands inside the stage's read
        slow = {"kind": "slow", "count": 100, "method": "GET", "system_id": sid, "delay": 1.0}
    else:
        # the mutation itself is slow: the kill lands after MAAS got it, before the answer
        slow = {"kind": "slow", "count": 1, "op": stage, "delay": 2.0}
    flow.sim.faults(slow)
    # Chained right after discover, commission decides on discover's listing and sends at once
    # (docs/architecture.md, "Waiting without blocking"): to land the kill inside its own look
    # at MAAS, the first worker runs each stage in an execution of its own, as after any wake.
    own_look = stage == "commission" and when.startswith("before")
    first = workers.start(env={"MAASCP_WORKFLOW_CHAIN_SECONDS": "0"} if own_look else None)
    wf = start(flow, "k01", "10.12.0.1")

    def inside() -> bool:
        row = Onboarding.objects.get(pk=wf.pk)
        sent = stage in row.stage_data.get("sent", {})
        return bool(row.stage == stage and row.lease_owner and sent == when.startswith("after"))

    wait_progressing(inside, lambda: footprint(Onboarding, pk=wf.pk), what=f"{stage} {when}")
    workers.kill(first)
    requests.delete(flow.sim.control + "faults", timeout=5)
    workers.start()
    wf = settle(wf.pk)
    assert wf.state == "succeeded", (wf.failure_class, wf.reason)
    # each mutation applied once, whatever the timing of the kill
    assert_mutations_once(flow.sim, {sid: ONBOARDING_MUTATIONS[status]})
    assert wf.lost_leases >= 1  # the killed execution was detected, not silently redone
    lost = wf.events.filter(kind="stage.lost", stage=stage).first()
    assert lost is not None, [e.kind for e in wf.events.all()]
    # the timeline names the call the dead execution had sent, or that it had sent none
    assert (stage in lost.data["sent"]) == when.startswith("after"), lost.data
    assert (f"{stage} once" in lost.message) == when.startswith("after"), lost.message


def test_kill_9_while_waiting(flow_site: Flow, workers: Workers) -> None:
    flow = flow_site
    sid = flow.sim.add(hostname="k02", status="new", power_address="10.12.0.2")
    first = workers.start()
    wf = start(flow, "k02", "10.12.0.2")
    wait_progressing(
        lambda: Onboarding.objects.get(pk=wf.pk).state == "waiting",
        lambda: footprint(Onboarding, pk=wf.pk),
        what="a wait",
    )
    workers.kill(first)
    workers.start()
    wf = settle(wf.pk)
    assert wf.state == "succeeded", wf.reason
    assert_mutations_once(flow.sim, {sid: ONBOARDING_MUTATIONS["new"]})


def test_same_step_delivered_five_times_to_two_workers(flow_site: Flow, workers: Workers) -> None:
    flow = flow_site
    sid = flow.sim.add(hostname="k03", status="new", power_address="10.12.0.3")
    wf = start(flow, "k03", "10.12.0.3")
    # drive preflight and discover in this process, so the commission step is the one duplicated
    admit(flow.site.pk)
    for _ in range(2):
        row = Onboarding.objects.get(pk=wf.pk)
        step.run("onboarding", row.pk, row.dispatch)
    row = Onboarding.objects.get(pk=wf.pk)
    assert row.stage == "commission"
    redis.Redis.from_url(str(settings.CELERY_BROKER_URL)).flushdb()
    for _ in range(5):
        regions.send(ADVANCE, ("onboarding", row.pk, row.dispatch), region=flow.site.region)
    workers.start(concurrency=3)
    workers.start(concurrency=3)
    wf = settle(wf.pk)
    assert wf.state == "succeeded", wf.reason
    assert_mutations_once(flow.sim, {sid: ONBOARDING_MUTATIONS["new"]})
    assert wf.events.filter(kind="stage.started", stage="commission").count() == 1
    assert wf.events.filter(kind="stage.completed", stage="commission").count() == 1


def test_lost_message_is_redriven_by_the_sweep(flow_site: Flow, workers: Workers) -> None:
    flow = flow_site
    sid = flow.sim.add(hostname="k04", status="ready", power_address="10.12.0.4")
    wf = start(flow, "k04", "10.12.0.4")
    admit(flow.site.pk)  # dispatched...
    redis.Redis.from_url(str(settings.CELERY_BROKER_URL)).flushdb()  # ...and the message is lost
    dispatched = Onboarding.objects.get(pk=wf.pk).dispatch
    workers.start()
    wf = settle(wf.pk)
    assert wf.state == "succeeded", wf.reason
    assert wf.dispatch > dispatched
    assert_mutations_once(flow.sim, {sid: ONBOARDING_MUTATIONS["ready"]})


def test_poison_stage_ends_failed_worker_lost(
    flow_site: Flow, workers: Workers, settings: Any
) -> None:
    """A stage whose every execution dies with its worker is failed after a bounded number of
    attempts instead of looping forever (the bound set to 1 here: each death is a worker start
    and a lease expiry; the default, 3, only repeats the same)."""
    settings.WORKFLOW_MAX_LOST_LEASES = 1
    workers.env["MAASCP_WORKFLOW_MAX_LOST_LEASES"] = "1"
    flow = flow_site
    flow.sim.add(hostname="k05", status="new", power_address="10.12.0.5")
    # the simulator applies a slow call after its delay even when the caller is gone: an hour,
    # so that no commission of a killed worker lands later and lets a next execution succeed
    flow.sim.faults({"kind": "slow", "count": 50, "op": "commission", "delay": 3600.0})
    wf = start(flow, "k05", "10.12.0.5")
    deaths = 0
    while deaths < 8:
        proc = workers.start()
        wait_progressing(
            lambda: (
                (row := Onboarding.objects.get(pk=wf.pk)).state == "failed"
                or (row.lease_owner and "commission" in row.stage_data.get("sent", {}))
            ),
            lambda: footprint(Onboarding, pk=wf.pk),
            what="the commission stage to be running",
        )
        if Onboarding.objects.get(pk=wf.pk).state == "failed":
            workers.kill(proc)
            break
        workers.kill(proc)
        deaths += 1
        Onboarding.objects.filter(pk=wf.pk).update(stage_data={})
    wf = settle(wf.pk)
    assert (wf.state, wf.failure_class) == ("failed", "worker_lost")
    assert "worker_lost" in wf.reason
    assert deaths <= settings.WORKFLOW_MAX_LOST_LEASES + 1
    # every death is on the timeline, in the stage it killed
    lost = list(wf.events.filter(kind="stage.lost").values_list("stage", "data"))
    assert len(lost) == wf.lost_leases >= deaths - 1
    assert {stage for stage, _ in lost} == {"commission"}


def test_drill_on_the_embedded_broker(
    embedded_broker: Path, flow_site: Flow, workers: Workers
) -> None:
    """The embedded default's broker keeps messages in files and deletes each when a worker
    fetches it: a worker killed mid-deploy takes its message with it, and only the database's
    lease and the sweep carry the work on. (If this process still sent to Redis, the workers,
    which read the folder, would see nothing and the waits would fail for want of progress.)"""
    flow = flow_site
    machines = {}
    for i, status in enumerate(("new", "ready", "new", "ready")):
        sid = flow.sim.add(hostname=f"e{i:02d}", status=status, power_address=f"10.14.0.{i + 1}")
        machines[sid] = ONBOARDING_MUTATIONS[status]
    flow.sim.faults({"kind": "slow", "count": 1, "op": "deploy", "delay": 2.0})
    first = workers.start()
    rows = [start(flow, f"e{i:02d}", f"10.14.0.{i + 1}") for i in range(4)]
    ours = Onboarding.objects.filter(pk__in=[wf.pk for wf in rows])

    def deploying() -> bool:
        # ours.all(): a fresh read each time (iterating ``ours`` again would reuse its cache)
        return any(
            wf.lease_owner and "deploy" in wf.stage_data.get("sent", {}) for wf in ours.all()
        )

    wait_progressing(deploying, lambda: footprint(Onboarding, pk__in=[wf.pk for wf in rows]),
                     what="a deploy sent and not yet answered")  # fmt: skip
    workers.kill(first)
    requests.delete(flow.sim.control + "faults", timeout=5)
    workers.start()
    for wf in rows:
        done = settle(wf.pk)
        assert done.state == "succeeded", (done.hostname, done.failure_class, done.reason)
    assert_mutations_once(flow.sim, machines)
    lost = [e for wf in ours for e in wf.events.filter(kind="stage.lost")]
    assert any("deploy" in e.data["sent"] for e in lost), [(e.stage, e.data) for e in lost]


def _restart_redis() -> None:
    """Restart the Redis server the broker URL names, as it was started (its port, folder and
    log file), losing everything it held: ``make check`` gives this drill a server of its own
    (scripts/check), a bare ``pytest -m serial`` restarts the machine's."""
    port = str(urlsplit(str(settings.CELERY_BROKER_URL)).port or 6379)
    server = redis.Redis(host="127.0.0.1", port=int(port))
    kept = {key: str(server.config_get(key)[key]) for key in ("dir", "logfile")}
    before = server.info("server")["run_id"]
    subprocess.run(["redis-cli", "-p", port, "shutdown", "nosave"], capture_output=True, timeout=10)
    subprocess.run(
        ["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", port,
         "--save", "", "--appendonly", "no", "--dir", kept["dir"], "--logfile", kept["logfile"]],
        check=True, timeout=10,
    )  # fmt: skip
    wait_until(
        lambda: (
            subprocess.run(["redis-cli", "-p", port, "ping"], capture_output=True).stdout.strip()
            == b"PONG"
        ),
        what="redis back",
    )
    assert server.info("server")["run_id"] != before  # a new server, holding nothing


def _started_at() -> Any:
    """When this test's PostgreSQL server started (a connection of its own)."""
    import psycopg

    db = connection.settings_dict
    dsn = f"host={db['HOST']} port={db['PORT'] or 5432} user={db['USER']} dbname={db['NAME']}"
    with psycopg.connect(dsn) as c:
        return c.execute("SELECT pg_postmaster_start_time()").fetchone()


def _restart_postgres() -> None:
    """Restart the PostgreSQL cluster this test's database is on (found by its port among the
    machine's clusters; ``make check`` gives the drill a cluster of its own: scripts/check)."""
    port = str(connection.settings_dict["PORT"] or 5432)
    listed = subprocess.run(
        ["pg_lsclusters", "--no-header"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    version, name = next(f[:2] for f in map(str.split, listed.splitlines()) if f[2:3] == [port])
    before = _started_at()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, name, "restart", "-m", "fast"],
        check=True,
        timeout=60,
    )
    assert _started_at() != before


def _reconnecting(query: Any) -> Any:
    """``query()``, or None while a PostgreSQL restart has cut this process's connections
    (reconnected on the next try)."""
    from django.db import connections
    from django.db.utils import OperationalError

    try:
        return query()
    except OperationalError:
        connections.close_all()
        return None


# restarts the Redis and PostgreSQL servers its settings name: nothing else may use them meanwhile
# (scripts/check runs it on servers of its own, beside the rest of the suite)
@pytest.mark.serial
@pytest.mark.skipif(os.geteuid() != 0, reason="restarts a Redis and a PostgreSQL server")
def test_batch_of_50_survives_worker_redis_and_postgres_restarts(
    flow_site: Flow, workers: Workers
) -> None:
    from onboarding.batches import onboarding_start_batch

    flow = flow_site
    rows = []
    for i in range(50):
        flow.sim.add(hostname=f"d{i:03d}", status="new", power_address=f"10.13.0.{i + 1}")
        rows.append({"hostname": f"d{i:03d}", "ipmi_ip": f"10.13.0.{i + 1}"})
    first = workers.start(concurrency=3)
    workers.start(concurrency=3)
    batch = onboarding_start_batch(
        actor=flow.admin, site_id=flow.site.pk, profile_id=flow.profile.pk, sku_id=flow.sku.pk,
        rows=rows,
    )  # fmt: skip
    moving = lambda: _reconnecting(lambda: footprint(Onboarding, batch=batch))  # noqa: E731

    def progressed(n: int) -> bool:
        under_way = Onboarding.objects.filter(batch=batch).exclude(stage="preflight")
        return bool(_reconnecting(lambda: under_way.count() >= n))

    wait_progressing(lambda: progressed(10), moving, what="ten onboardings under way")
    workers.kill(first)  # a worker restart
    workers.start(concurrency=3)
    wait_progressing(lambda: progressed(25), moving, what="more progress")
    _restart_redis()  # everything queued in Redis is gone
    wait_progressing(lambda: progressed(40), moving, what="progress after the Redis restart")
    _restart_postgres()
    open_states = ("pending", "running", "waiting")
    wait_progressing(
        lambda: _reconnecting(
            lambda: not Onboarding.objects.filter(batch=batch, state__in=open_states).exists()
        ),
        moving,
        stall=60,  # the restart itself, then the sweep's grace before it redrives
        what="the batch to finish",
    )
    from django.db import connections

    connections.close_all()
    flows = list(Onboarding.objects.filter(batch=batch))
    assert len(flows) == 50
    for wf in flows:
        assert wf.state == "succeeded" or (wf.state == "failed" and wf.reason), (
            wf.hostname,
            wf.state,
        )
    succeeded = [wf for wf in flows if wf.state == "succeeded"]
    assert len(succeeded) >= 45
    # none lost, none duplicated: one machine per onboarding, each mutation applied once (the
    # failed ones' too: whatever they got, they got once)
    assert len({wf.maas_system_id for wf in succeeded}) == len(succeeded)
    assert_mutations_once(
        flow.sim, {wf.maas_system_id: ONBOARDING_MUTATIONS["new"] for wf in succeeded}, only=False
    )
