"""The machine state machine: the lifecycle operations a user starts (commission, deploy,
release with or without erase, abort, mark broken/fixed, lock, power) and the machine-driven
steps each schedules on the simulator's clock (docs/simulator.md, "Timelines"; docs/maas-api.md
§3.5, §4).

Called by the API with the simulator lock held. Refusals raise MAAS's answers (``errors.py``).
"""

from __future__ import annotations

from typing import Any, NoReturn

from maas_client.status import RELEASABLE, NodeStatus
from maas_simulator import hwsync, runner
from maas_simulator.errors import ApiError, conflict, invalid
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine, ScriptResult, ScriptSet
from maas_simulator.outputs import BMC_CONFIG_SKIPPED, wipe_output
from maas_simulator.scripts import RELEASE
from maas_simulator.scriptsets import clean_old, new_results, select
from maas_simulator.users import User

S = NodeStatus

# MAAS-seconds timelines (docs/maas-api.md §4.4).
COMMISSION_STEPS = (
    (0, "INFO", "Commissioning", ""),
    (3, "INFO", "Powering on", ""),
    (15, "INFO", "Performing PXE boot", ""),
    (30, "INFO", "Loading ephemeral", ""),
    (50, "INFO", "Gathering information", ""),
)
COMMISSION_TESTING_AT = 80
COMMISSION_READY_AT = 120
DEPLOY_STEPS = (
    (0, "INFO", "Deploying", ""),
    (3, "INFO", "Powering on", ""),
    (15, "INFO", "Performing PXE boot", ""),
    (30, "INFO", "Loading ephemeral", ""),
    (60, "INFO", "Configuring storage", ""),
    (90, "INFO", "Installing OS", ""),
    (180, "INFO", "Configuring OS", ""),
    (200, "DEBUG", "Installation complete", "Node disabled netboot"),
    (205, "INFO", "Rebooting", ""),
)
DEPLOY_INSTALL_LOG_AT = 200
DEPLOY_FIRST_BOOT_AT = 260
ERASE_STEPS = (
    (3, "INFO", "Powering on", ""),
    (10, "INFO", "Performing PXE boot", ""),
    (20, "INFO", "Loading ephemeral", ""),
)
ERASE_SECONDS = {"quick": 30, "secure": 180, "full": 120}
RELEASE_POWER_OFF_AT = 10
BMC_CONFIG = "30-maas-01-bmc-config"


def commission(sim: Simulator, m: Machine, user: User, params: dict[str, Any]) -> None:
    if m.status not in {S.NEW, S.FAILED_COMMISSIONING, S.READY, S.BROKEN} or m.locked:
        raise invalid(
            {"__all__": ["Commission is not available because of the current state of the node."]}
        )
    if m.power_type == "":
        raise ApiError(
            500, "Unconfigured power type. Please configure the power type and try again."
        )
    ordinal = m.next_count("commission")
    old_status = m.status
    sim.start_op(m, "commission")
    m.owner = user.username
    m.error_description = ""
    sim.request_event(m, "User starting node commissioning", "start commissioning", "", user)
    # start_commissioning: the configuration is wiped unless it is to be kept.
    if not params.get("skip_storage"):
        m.storage.clear()
    if not params.get("skip_networking"):
        sim.clear_networking(m)
    sim.set_status(m, S.COMMISSIONING)
    sim.script_set(m, 0, passed=None)
    if params.get("skip_bmc_config"):
        number = list(sim.users).index(user.username) + 2  # after MAAS's own worker user
        sim.skip_commissioning_script(
            m, BMC_CONFIG, BMC_CONFIG_SKIPPED.format(user=f"{user.username} ({number})")
        )
    tests = [n for n in (params.get("testing_scripts") or "").split(",") if n]
    run_tests = "none" not in tests
    # MAAS makes the testing run with the commissioning run (Pending, the per-disk parameters
    # a placeholder until the disks are known) and regenerates it once they are
    tests_run = sim.testing_set(m, tests or ["commissioning"], passed=False) if run_tests else None
    sim.schedule_timeout(m, S.COMMISSIONING)
    sim.timeline(m, COMMISSION_STEPS, until=0)  # the status's INFO event, whatever follows
    if problem := no_rack_for(sim, m):
        bmc_unavailable(sim, m, user, problem, old_status)
    if m.faults.bmc_unreachable:
        sim.schedule(m, 3, lambda sim, mm: power_failure(sim, mm, "on"))
        return
    if boots_elsewhere(sim, m):
        return
    sim.timeline(m, COMMISSION_STEPS[1:], until=1e9)
    sim.schedule(m, COMMISSION_STEPS[-1][0], lambda sim, mm: sim.run_commissioning(mm))
    if ordinal in m.faults.commission_failure:

        def fail(sim: Simulator, mm: Machine) -> None:
            sim.event(
                mm,
                "ERROR",
                "Node commissioning failure",
                "'cloudinit' running modules for final",
            )
            sim.finish_commissioning(
                mm, passed=False, output=b"50-maas-01-commissioning: lshw exited 1\n"
            )
            sim.mark_failed(
                mm,
                "Commissioning failed, cloud-init reported a failure "
                "(refer to the event log for more information)",
            )
            mm.power_state = "off"

        sim.schedule(m, COMMISSION_TESTING_AT - 10, fail)
        return

    def processed(sim: Simulator, mm: Machine) -> None:
        # The commissioning output is processed: hardware, default layout, networking.
        sim.discover(
            mm,
            storage=not params.get("skip_storage"),
            networking=not params.get("skip_networking"),
        )
        if not params.get("skip_storage"):
            sim.apply_layout(mm, sim.config["default_storage_layout"])
        if not params.get("skip_networking"):
            sim.reset_networking(mm)

    def ready(sim: Simulator, mm: Machine) -> None:
        sim.finish_commissioning(mm, passed=True)
        processed(sim, mm)
        mm.owner = None
        mm.power_state = "off"
        sim.set_status(mm, S.READY)
        sim.event(mm, "INFO", "Ready", "")

    if not run_tests:  # testing_scripts=none: straight to Ready, no Testing phase
        sim.schedule(m, COMMISSION_TESTING_AT, ready)
        return

    def testing(sim: Simulator, mm: Machine) -> None:
        # The tests run once the hardware is known (MAAS regenerates the per-disk results
        # after commissioning); the runner's last signal moves the machine on.
        sim.finish_commissioning(mm, passed=True)
        processed(sim, mm)
        sim.set_status(mm, S.TESTING)
        assert tests_run is not None
        ss = sim.regenerate_testing(mm, tests_run, tests or ["commissioning"])
        seconds = COMMISSION_READY_AT - COMMISSION_TESTING_AT
        runner.start(sim, mm, ss, at=0, seconds=seconds)

    sim.schedule(m, COMMISSION_TESTING_AT, testing)


def commissioning_passed(sim: Simulator, m: Machine) -> bool:
    sets = [s for s in m.script_sets if s.type == 0]
    return bool(sets) and sets[-1].status == 2


def power_on(sim: Simulator, m: Machine) -> None:
    """MAAS powers the machine on (or cycles it) for an ephemeral boot."""
    m.power_state = "on"
    if m.faults.enlist_on_power_cycle:
        # The BMC answers for another box: that one PXE boots from MACs MAAS does not know
        # and enlists itself as a NEW machine (with the same BMC address).
        m.faults.enlist_on_power_cycle = False
        stranger = sim.add_machine(
            power_type=m.power_type, power_parameters=dict(m.power_parameters)
        )
        sim.event(stranger, "INFO", "New", "")


def boots_elsewhere(sim: Simulator, m: Machine) -> bool:
    """Power the machine on for commissioning. With ``enlist_on_power_cycle`` the box that
    boots enlists itself as another machine instead: this record's commissioning never
    hears back (MAAS's node timeout fails it)."""
    elsewhere = m.faults.enlist_on_power_cycle
    power_on(sim, m)
    return elsewhere


def no_rack_for(sim: Simulator, m: Machine, *, query: bool = False) -> str | None:
    """``_get_bmc_client_connection_info``: on a region without a rack controller no power
    action reaches a BMC (a ``manual`` machine needs none, but a power query goes to a rack
    for it too): MAAS's PowerProblem text, else None."""
    if sim.rack_controller or (m.power_type == "manual" and not query):
        return None
    return f"No rack controllers can access the BMC of node {m.hostname}"


def bmc_unavailable(
    sim: Simulator, m: Machine, user: User | None, problem: str, old: NodeStatus | None
) -> NoReturn:
    """A power action no rack can carry out: MAAS logs it, answers 503 with the text (no
    ``Retry-After``: a PowerProblem), and when the action was a commissioning or a deploy,
    puts the machine back where it was (``_start_bmc_unavailable``: the change was committed
    before the power action failed, so the machine keeps its owner; the runs' unfinished
    results end Aborted). Recorded against MAAS 3.5.10 (onboarding-sequence.jsonl 13-18)."""
    who = user.username if user is not None else "unknown"
    sim.event(m, "WARNING", "Failed to query node's BMC", f"({who}) - {problem}", user=who)
    if old is not None:
        owner = m.owner
        sim.event(
            m,
            "WARNING",
            "Failed to query node's BMC",
            f"({who}) - Aborting {m.status.name} and reverting to {old.name}. Unable to power "
            "control the node. Please check power credentials.",
        )
        sim.start_op(m, "bmc-unavailable")  # what the action scheduled does not happen
        sim.end_running_scripts(m, 5)
        if m.status == S.DEPLOYING:
            sim.release_auto_ips(m)
        sim.set_status(m, old)
        m.owner = owner
    raise ApiError(503, problem)


def power_failure(sim: Simulator, m: Machine, change: str) -> None:
    """What the rack reports when the BMC cannot be reached (``power_change_failure``)."""
    message = (
        f"Power {change} for the node failed: Connection timed out while performing power "
        "action.  Check BMC configuration and connectivity and try again."
    )
    m.power_state = "error"
    if m.status == S.DEPLOYING:
        sim.release_auto_ips(m)  # the claim is undone when the power-on fails
    sim.mark_failed(m, message)
    sim.event(m, "ERROR", f"Failed to power {change} node", message)


def acquire(sim: Simulator, m: Machine, user: User, agent_name: str, comment: str) -> None:
    """``Node.acquire``: Allocated to the caller, with the agent name it gave."""
    sim.request_event(m, "User acquiring node", "acquire", comment, user)
    m.storage.acquire()  # _create_acquired_filesystems
    sim.set_status(m, S.ALLOCATED)
    m.owner = user.username
    m.agent_name = agent_name
    m.token = None  # op=allocate sets the caller's


def deploy_refusal(m: Machine) -> None:
    """``Node._start_deployment``'s checks, before anything is saved (from Ready the allocation
    is rolled back with them): a managed network on some NIC, then a deployable storage layout."""
    if not any(
        k.mode != "link_up" and k.subnet_id is not None for i in m.interfaces for k in i.links
    ):
        raise ApiError(  # a model ValidationError: JSON without a charset (recorded)
            400,
            {"network": ["Node must be configured to use a network"]},
            json_body=True,
            content_type="application/json",
        )
    issues = m.storage.layout_issues()
    if issues:
        raise ApiError(400, {"storage": issues}, json_body=True, content_type="application/json")


def deploy(sim: Simulator, m: Machine, user: User, params: dict[str, Any]) -> None:
    if m.status in (S.READY, S.ALLOCATED):
        deploy_refusal(m)
    if m.status == S.READY:
        if m.owner is not None and m.owner != user.username:
            raise conflict("Can't allocate a machine belonging to another user.")
        acquire(sim, m, user, params.get("agent_name") or "", params.get("comment") or "")
    elif m.status == S.ALLOCATED and m.owner != user.username and not user.is_superuser:
        raise ApiError(403, "")  # no edit permission on someone else's machine
    if m.status != S.ALLOCATED:  # DEPLOYING not in NODE_TRANSITIONS[status]
        raise conflict(f"Can't deploy a machine that is in the '{m.status.label}' state")
    m.osystem = "ubuntu"
    m.distro_series = params["distro_series"]
    m.hwe_kernel = params.get("hwe_kernel") or None
    m.user_data = params.get("user_data")
    hwsync.enable(sim, m, bool(params.get("enable_hw_sync")))
    start_deployment(sim, m, user, "")


def start_deployment(sim: Simulator, m: Machine, user: User, comment: str) -> None:
    """``Node.start`` of an Allocated machine, which is a deployment: the deploy op sets the
    OS first; ``power_on`` of an Allocated machine deploys it as it is (its OS empty: MAAS
    boots the default one). Recorded: errors.jsonl 167-170."""
    ordinal = m.next_count("deploy")
    sim.start_op(m, "deploy")
    m.error_description = ""
    sim.request_event(m, "User starting deployment", "start", comment, user)
    sim.set_status(m, S.DEPLOYING)
    m.current_installation = sim.script_set(m, 1, passed=None).id
    sim.schedule_timeout(m, S.DEPLOYING)
    sim.timeline(m, DEPLOY_STEPS, until=0)  # the status's INFO event, whatever follows
    # The AUTO addresses are claimed after the commit, a moment after MAAS answers.
    sim.schedule(m, 0, lambda sim, mm: sim.claim_auto_ips(mm))
    if problem := no_rack_for(sim, m):
        bmc_unavailable(sim, m, user, problem, S.ALLOCATED)
    if m.faults.bmc_unreachable:
        sim.schedule(m, 3, lambda sim, mm: power_failure(sim, mm, "on"))
        return
    power_on(sim, m)
    if ordinal in m.faults.deploy_curtin_failure:
        sim.timeline(m, DEPLOY_STEPS[1:], until=90)

        def curtin_fail(sim: Simulator, mm: Machine) -> None:
            sim.event(mm, "ERROR", "Node installation failure", "'curtin' command install")
            sim.finish_script_set(
                mm,
                1,
                passed=False,
                output=b"curtin: Installation failed with exception: Unexpected error while "
                b"running command.\nCommand: ['sgdisk', '--zap-all', '/dev/sda']\n",
            )
            sim.mark_failed(
                mm, "Installation failed (refer to the installation log for more information)."
            )

        sim.schedule(m, 120, curtin_fail)
        return
    sim.timeline(m, DEPLOY_STEPS[1:], until=1e9)

    def install_log(sim: Simulator, mm: Machine) -> None:
        mm.netboot = False  # curtin's netboot_off ("Installation complete")
        sim.finish_script_set(mm, 1, passed=True, output=b"curtin: Installation finished.\n")
        sim.event(
            mm,
            "DEBUG",
            "Script result",
            "/tmp/install.log changed status from 'Running' to 'Passed'",  # noqa: S108
        )

    sim.schedule(m, DEPLOY_INSTALL_LOG_AT, install_log)
    if ordinal in m.faults.deploy_datasource_failure:
        # The installed OS never reaches the MAAS datasource: no user-data request, so MAAS
        # never marks it Deployed; the node timeout fires 30 minutes after deploy started.
        sim.schedule(
            m,
            DEPLOY_FIRST_BOOT_AT,
            lambda sim, mm: sim.event(
                mm,
                "DEBUG",
                "Node installation",
                "'cloudinit' searching for network data from DataSourceMAAS",
            ),
        )
        return

    def first_boot(sim: Simulator, mm: Machine) -> None:
        # cloud-init of the installed OS asks for user-data: MAAS ends the deployment.
        sim.set_status(mm, S.DEPLOYED)
        hwsync.start(sim, mm)
        osystem = mm.osystem or sim.config["default_osystem"]
        series = mm.distro_series or sim.config["default_distro_series"]
        sim.event(mm, "INFO", "Image Deployed", f"deployed {osystem}/{series}/{mm.architecture}")
        sim.event(mm, "INFO", "Deployed", "")
        if sim.node_side is not None:
            sim.node_side(sim, mm)  # the node side (enrollment call) plugs in here

    sim.schedule(m, DEPLOY_FIRST_BOOT_AT, first_boot)


def release(sim: Simulator, m: Machine, user: User, params: dict[str, Any]) -> None:
    """``start_releasing``: ``params["scripts"]`` are the release scripts the form asked for
    (``wipe-disks`` when an erase flag was set) with their ``input``; config
    ``enable_disk_erasing_on_release`` adds ``wipe-disks`` with its own erase settings, which
    replace the request's. Only ``wipe-disks`` → Disk erasing; any other mix → Releasing with
    the scripts; none → released at once."""
    if m.status in (S.RELEASING, S.READY):
        return  # a redundant retry: the postcondition already holds

    if m.status not in RELEASABLE:
        raise conflict(f"Machine cannot be released in its current state ('{m.status.label}').")
    scripts = [n for n in params.get("scripts") or [] if n != "none"]
    given: dict[str, dict[str, Any]] = dict(params.get("input") or {})
    if sim.config["enable_disk_erasing_on_release"]:
        scripts.append("wipe-disks")
        given["wipe-disks"] = {
            "secure_erase": bool(sim.config["disk_erase_with_secure_erase"]),
            "quick_erase": bool(sim.config["disk_erase_with_quick_erase"]),
        }
    ordinal = m.next_count("release")
    sim.start_op(m, "release")
    comment = params.get("comment") or ""
    if not scripts:
        sim.request_event(m, "User releasing node", "release", comment, user)
        start_release(sim, m)
        return
    ss = release_set(sim, m, scripts, given)
    wipe_only = scripts == ["wipe-disks"]
    # Only the wipe-disks release script: MAAS keeps the old "Disk erasing" statuses. The
    # machine keeps its owner and OS until the scripts have run and release() runs.
    # No status timeout while the scripts run, in either status: start_releasing's _start sets
    # status_expires only for a deployment, so MAAS 3.5 waits for the node for ever; the
    # 5-minute Releasing timeout starts with the power-off of the release itself.
    if wipe_only:
        sim.request_event(m, "User erasing disk", "start disk erasing", comment, user)
        sim.set_status(m, S.DISK_ERASING)
    else:
        sim.request_event(m, "User releasing node", "start node releasing", comment, user)
        sim.set_status(m, S.RELEASING)
    m.power_state = "on"
    sim.timeline(m, ERASE_STEPS, until=1e9)
    failing = ordinal in m.faults.erase_failure
    if m.faults.release_stuck:
        # the ephemeral environment never reports back, until the fault is lifted
        m.stuck_release = (ss, wipe_only, failing)
        return
    _run_release_scripts(sim, m, ss, wipe_only, failing)


def _run_release_scripts(
    sim: Simulator, m: Machine, ss: ScriptSet, wipe_only: bool, failing: bool
) -> None:
    if not wipe_only:  # Disk erasing: MAAS stores nothing the node reports (below)
        sim.schedule(m, ERASE_STEPS[-1][0], lambda sim, mm: _wipe_started(sim, mm, ss))
    seconds = max((ERASE_SECONDS[wipe_mode(r)] for r in ss.results), default=0)
    sim.schedule(m, seconds, lambda sim, mm: _released_scripts(sim, mm, ss, wipe_only, failing))


def resume_release(sim: Simulator, m: Machine) -> None:
    """The ``release_stuck`` fault lifted (the control endpoint): a release still erasing goes
    on from where it hung, its scripts running and reporting as they would have."""
    stuck, m.stuck_release = m.stuck_release, None
    if stuck is not None and m.status in (S.DISK_ERASING, S.RELEASING):
        _run_release_scripts(sim, m, *stuck)


def wipe_mode(r: ScriptResult) -> str:
    """What a ``wipe-disks`` result was asked to do: ``secure``, ``quick`` or ``full``."""
    if r.parameters.get("secure_erase", {}).get("value"):
        return "secure"
    if r.parameters.get("quick_erase", {}).get("value"):
        return "quick"
    return "full"


def release_set(
    sim: Simulator, m: Machine, names: list[str], given: dict[str, dict[str, Any]]
) -> ScriptSet:
    """``create_release_script_set``: a result per selected release script (``wipe-disks``
    runs once for all disks), the type's older runs kept three per script."""
    now = sim.now()
    results = []
    for script in select(sim.scripts, m, names, RELEASE):
        results += new_results(m, script, given.get(script.name, {}), sim.new_id, now)
    ss = ScriptSet(id=sim.new_id(), type=3, started=now, results=results)
    m.script_sets.append(ss)
    clean_old(m, ss)
    return ss


def _wipe_started(sim: Simulator, m: Machine, ss: ScriptSet) -> None:
    for r in ss.results:
        sim.set_result(m, ss, r, 1)


def _released_scripts(
    sim: Simulator, m: Machine, ss: ScriptSet, wipe_only: bool, failing: bool
) -> None:
    """The release scripts report: ``wipe-disks``' per-disk lines (``erase_fails`` names the
    disks that fail; ``erase_failure`` fails the wipe of that release outright).

    In Disk erasing (``wipe-disks`` alone) MAAS 3.5 keeps none of it: its metadata handler for
    that status (``_process_disk_erasing``) stores no result, so the ``wipe-disks`` result stays
    Pending with no output whatever the node reported, and only the status and the ``Disks
    erased`` event tell (recorded against MAAS 3.5.10: onboarding-sequence.jsonl 158, 169,
    244). Releasing (any other script list) stores them (``_process_releasing``, step 184)."""
    disks = [str(d["name"]) for d in m.hardware.disks or []]
    passed = True
    for r in ss.results:
        if r.name != "wipe-disks":  # another release script (the site's own): it passes
            sim.set_result(m, ss, r, 2, output=f"{r.name}: done\n".encode(), exit_status=0)
            continue
        mode = wipe_mode(r)
        fails = {disks[0]} if failing and disks else set(m.faults.erase_fails)
        secure, quick = mode == "secure", bool(r.parameters.get("quick_erase", {}).get("value"))
        if failing:
            secure = quick = False  # the failure of that release is its zeroing's
        output, ok = wipe_output(disks, secure, quick, fails)
        if not wipe_only:
            sim.set_result(m, ss, r, 2 if ok else 3, output=output, exit_status=0 if ok else 1)
        passed = passed and ok
    m.power_state = "off" if not passed else m.power_state
    if not passed:
        sim.mark_failed(m, "Failed to erase disks." if wipe_only else "Failed to release machine.")
        return
    if wipe_only:
        sim.event(m, "INFO", "Disks erased", "")
    else:
        sim.event(m, "INFO", "Release scripts executed successfully.", "")
    start_release(sim, m)


def start_release(sim: Simulator, m: Machine) -> None:
    """``Node._release``: RELEASING, clear the deployment, power off, then finalise."""
    sim.set_status(m, S.RELEASING)
    m.osystem = m.distro_series = ""
    m.current_installation = None
    m.hwe_kernel = None
    m.enable_hw_sync, m.last_sync, m.sync_interval = False, None, None
    m.user_data = None
    m.netboot = True
    m.agent_name = ""
    sim.release_auto_ips(m)
    m.storage.release()  # _clear_acquired_filesystems
    sim.event(m, "INFO", "Releasing", "")
    if m.faults.release_stuck:
        sim.schedule_timeout(m, S.RELEASING)  # power-off is never observed
        return
    if m.power_state == "off" or m.power_type == "manual":
        finalize_release(sim, m)
        return
    sim.event(m, "INFO", "Powering off", "")
    sim.schedule_timeout(m, S.RELEASING)

    def powered_off(sim: Simulator, mm: Machine) -> None:
        mm.power_state = "off"
        finalize_release(sim, mm)

    sim.schedule(m, RELEASE_POWER_OFF_AT, powered_off)


def finalize_release(sim: Simulator, m: Machine) -> None:
    """READY, or NEW if the machine never commissioned successfully; owner cleared."""
    sim.set_status(m, S.READY if commissioning_passed(sim, m) else S.NEW)
    m.owner = None
    m.owner_data = {}
    sim.event(m, "INFO", "Released", "")


ABORTS = {  # request event, its action, status event
    S.COMMISSIONING: (
        "User aborting node commissioning",
        "abort commissioning",
        "Aborted commissioning",
    ),
    S.DEPLOYING: ("User aborting deployment", "abort deploying", "Aborted deployment"),
    S.DISK_ERASING: ("User aborting disk erase", "abort disk erasing", "Aborted disk erasing"),
    S.TESTING: ("User aborting node testing", "abort testing", "Aborted testing"),
}


def abort(sim: Simulator, m: Machine, user: User, comment: str) -> None:
    if m.status not in ABORTS:
        raise conflict(
            f"Cannot abort in current state: node {m.system_id} is in state {m.status.label}."
        )
    target = {
        S.COMMISSIONING: S.NEW,
        S.DEPLOYING: S.ALLOCATED,
        S.DISK_ERASING: S.FAILED_DISK_ERASING,
        # testing right after commissioning: straight to Ready
        S.TESTING: S.READY if m.previous_status == S.COMMISSIONING else m.previous_status,
    }[m.status]
    request_event, action, status_event = ABORTS[m.status]
    if m.status == S.COMMISSIONING:
        m.owner = None
    sim.start_op(m, "abort")
    sim.request_event(m, request_event, action, comment, user)
    sim.event(m, "INFO", status_event, "")
    if m.power_state == "on":
        sim.event(m, "INFO", "Powering off", "")

    def stopped(sim: Simulator, mm: Machine) -> None:
        # _abort_*_async: after the commit, once the power-off went out, running scripts
        # end Aborted and the status moves; the answer to abort shows the status before.
        sim.end_running_scripts(mm, 5)
        mm.power_state = "off"
        sim.set_status(mm, target)

    sim.schedule(m, 0, stopped)


def mark_broken(sim: Simulator, m: Machine, user: User, comment: str) -> None:
    if m.owner != user.username:
        raise ApiError(403, "")

    sim.start_op(m, "mark_broken")
    sim.request_event(m, "User marking node broken", "mark broken", comment, user)
    if m.status in RELEASABLE:  # release first (RELEASING, OS cleared, power off)
        sim.set_status(m, S.RELEASING)
        m.osystem = m.distro_series = ""
        m.current_installation = None
        m.agent_name = ""
        sim.release_auto_ips(m)
        m.storage.release()
        m.hwe_kernel = None
        m.enable_hw_sync, m.last_sync, m.sync_interval = False, None, None
        m.netboot = True
        sim.event(m, "INFO", "Releasing", "")
        if m.power_state == "on":
            sim.event(m, "INFO", "Powering off", "")
            m.power_state = "off"
    sim.set_status(m, S.BROKEN)
    m.owner = None
    m.error_description = comment


def mark_fixed(sim: Simulator, m: Machine, user: User, comment: str) -> None:
    if m.status != S.BROKEN:
        raise conflict("Can't mark a non-broken node as 'Ready'.")
    sim.start_op(m, "mark_fixed")
    sim.request_event(m, "User marking node fixed", "mark fixed", comment, user)
    sim.set_status(m, S.DEPLOYED if m.previous_status == S.DEPLOYED else S.READY)
    m.error_description = ""
    m.osystem = m.distro_series = ""
    m.hwe_kernel = None


def lock_machine(sim: Simulator, m: Machine, user: User, comment: str) -> None:
    sim.request_event(m, "User locking node", "lock", comment, user)
    if m.status not in (S.DEPLOYED, S.DEPLOYING):
        raise conflict("Can't lock, node is not deployed or deploying")
    m.locked = True
    m.touch(sim.now())


def unlock_machine(sim: Simulator, m: Machine, user: User, comment: str) -> None:
    sim.request_event(m, "User unlocking node", "unlock", comment, user)
    m.locked = False
    m.touch(sim.now())


def power(sim: Simulator, m: Machine, user: User, on: bool, comment: str = "") -> None:
    """power_on / power_off: MAAS answers at once; the BMC is driven after the commit."""
    if on and m.owner is None:
        raise conflict("Can't start node: it hasn't been allocated.")
    if on and m.status == S.ALLOCATED:  # Node.start of an Allocated machine deploys it
        deploy_refusal(m)
        start_deployment(sim, m, user, comment)
        return
    change = "on" if on else "off"
    sim.request_event(
        m,
        "User powering up node" if on else "User powering down node",
        "start" if on else "stop",
        comment,
        user,
    )
    if problem := no_rack_for(sim, m):
        bmc_unavailable(sim, m, user, problem, None)
    sim.event(m, "INFO", "Powering on" if on else "Powering off", "")
    if m.faults.bmc_unreachable:
        sim.schedule(m, 3, lambda sim, mm: power_failure(sim, mm, change))
        return
    if on:
        power_on(sim, m)
    else:
        m.power_state = "off"


def query_power(sim: Simulator, m: Machine, user: User | None = None) -> str:
    if problem := no_rack_for(sim, m, query=True):
        bmc_unavailable(sim, m, user, problem, None)
    if m.faults.bmc_unreachable:
        message = (
            "Connection timed out while performing power action.  Check BMC configuration "
            "and connectivity and try again."
        )
        m.power_state = "error"
        sim.event(m, "WARNING", "Failed to query node's BMC", message)
        raise ApiError(503, message)
    return m.power_state
