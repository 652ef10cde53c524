"""Onboarding stages (docs/architecture.md, "Onboarding stages"), one module each. Each looks
at MAAS first, acts once, and returns a result; its declaration below says everything else about
it (timeout, MAAS calls, the MAAS statuses reconciliation expects while it runs).

A stage run twice makes its MAAS mutation once: it adopts what MAAS already shows, and the
engine's intent log (``ctx.sent``) tells a re-run that a mutation may already have been sent.
"""

from __future__ import annotations

from onboarding.models import Onboarding
from onboarding.stages.acceptance import acceptance, acceptance_applies
from onboarding.stages.commission import PAST_COMMISSIONING, commission
from onboarding.stages.common import S
from onboarding.stages.conformance import conformance
from onboarding.stages.deploy import deploy
from onboarding.stages.discover import discover
from onboarding.stages.enrollment import complete, enrollment, hardware_sync
from onboarding.stages.payload import payload_stage
from onboarding.stages.preflight import preflight
from onboarding.stages.reachability import reachability, reachability_applies
from onboarding.stages.recovery import adopt_stage, cancel, reset
from onboarding.stages.storage_pxe import first_deploy, storage_pxe
from workflows.kinds import Call as C
from workflows.kinds import Stage

__all__ = ["CANCEL", "RESET", "STAGES", "adopt_stage"]

# What MAAS may show while a workflow is in a stage (reconciliation: anything else is drift).
# Each set also allows the previous stage's statuses: MAAS is read a moment before our rows.
# A rerun or adopt of a machine already allocated or deployed passes commission and storage_pxe
# as it is, so those statuses are expected there too.
COMMISSIONING = frozenset(
    {S.NEW, S.COMMISSIONING, S.TESTING, S.READY, S.FAILED_COMMISSIONING, *PAST_COMMISSIONING}
)
DEPLOYING = frozenset(
    {S.READY, S.ALLOCATED, S.DEPLOYING, S.DEPLOYED, S.FAILED_DEPLOYMENT, S.RELEASING}
)

GET = C("get_machine")
STAGES: list[Stage[Onboarding]] = [
    Stage("preflight", preflight, 300),  # reads the node-facing URLs, not MAAS
    Stage(
        "discover",
        discover,
        1800,
        (
            C("list_machines", "by hostname, BMC address, PXE MAC; New machines"),
            C("power_addresses"),
            GET,
            C("create_machine", "only if no machine matches"),
            C("update_machine", "power parameters of a matched machine"),
            C("abort", "a duplicate that enlisted itself, before deleting it"),
            C("delete_machine", "that duplicate"),
            C("commission", "a New machine, to power-cycle it into commissioning"),
        ),
    ),
    Stage(
        "commission",
        commission,
        3600,
        (
            GET,
            C("commission", "unless Ready"),
            C("abort", "a stuck commissioning, before sending it again"),
            C("script_results", "on a failure (or Failed testing), the scripts that failed"),
        ),
        expects=COMMISSIONING,
    ),
    Stage(
        "conformance",
        conformance,
        600,
        (
            C("machine_hardware", "CPUs, memory, NICs, disks, firmware strings"),
            C("node_devices", "only if the SKU states GPUs"),
            C("events", "on a failure, for the evidence"),
        ),
        expects=COMMISSIONING | {S.READY},
    ),
    Stage(
        "acceptance",
        acceptance,
        14400,  # a GPU burn-in and an NCCL run take hours
        (
            GET,
            C("test", "policy's acceptance_scripts with acceptance_parameters"),
            C("testing_run", "the results per script and device, with output"),
            C("events", "on a failure, for the evidence"),
        ),
        expects=frozenset({S.READY, S.TESTING, S.FAILED_TESTING}),
        applies=acceptance_applies,
    ),
    Stage(
        "storage_pxe",
        storage_pxe,
        600,
        (
            GET,
            C("set_storage_layout"),
            C("subnets", "at most once a minute per site and worker process"),
            C("interfaces"),
            C("unlink_subnet", "only if the PXE interface is not AUTO on the PXE subnet"),
            C("link_subnet", "the same"),
        ),
        expects=COMMISSIONING | {S.READY},
        applies=first_deploy,
    ),
    Stage(
        "reachability",
        reachability,
        1800,
        (
            GET,
            C("testing_scripts", "the script's url parameter, before the test is sent"),
            C("test", "the policy's testing script, node-facing URLs"),
            C("script_results"),
        ),
        expects=frozenset({S.READY, S.TESTING, S.FAILED_TESTING}),
        applies=reachability_applies,
    ),
    Stage("payload", payload_stage, 300, expects=frozenset({S.READY, S.ALLOCATED, S.DEPLOYED})),
    Stage(
        "deploy",
        deploy,
        3600,
        (
            GET,
            C("deploy", "unless Deployed"),
            C("events", "this deployment's, to classify a failure"),
            C("abort", "a datasource failure while still Deploying"),
            C("release", "before a redeploy (datasource failure, within deploy_retry_limit)"),
        ),
        expects=DEPLOYING,
    ),
    Stage(
        "hardware_sync", hardware_sync, 1800, (C("get_machine", "if required"),), expects=DEPLOYING
    ),
    Stage("enrollment", enrollment, 1800, expects=frozenset({S.DEPLOYED, S.DEPLOYING})),
    Stage(
        "complete",
        complete,
        300,
        (
            GET,
            C("machine_hardware", "only if the machine was never judged (adopted past it)"),
            C("node_devices", "the same, if the SKU states GPUs"),
            C("events", "the same, on a failure"),
        ),
        expects=frozenset({S.DEPLOYED}),
    ),
]
RESET: Stage[Onboarding] = Stage(
    "reset",
    reset,
    None,
    (
        GET,
        C("abort", "if in progress"),
        C("release", "if allocated or deployed"),
        C("delete_machine", "if this workflow created it"),
    ),
    machine_may_vanish=True,
)
CANCEL: Stage[Onboarding] = Stage(
    "cancel",
    cancel,
    None,
    (GET, C("abort", "if in progress"), C("release", "if allocated")),
)
