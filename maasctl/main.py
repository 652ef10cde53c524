"""maasctl's entry point (docs/cli.md): the Typer app assembled from ``maasctl/commands/``, one
module per resource. Every command is one or a few HTTP calls to the admin API; errors print
the API's reason and exit with the code docs/cli.md lists, never a traceback."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from maasctl import output
from maasctl.api import ApiError
from maasctl.cli import INTERRUPTED, STATE, api_failure, fail
from maasctl.commands import (
    allocations,
    batches,
    decommission,
    nodes,
    onboard,
    profiles,
    reconciliation,
    repair,
    roce,
    sites,
    skus,
    tokens,
    workflows,
)
from maasctl.config import ConfigError
from maasctl.options import Format, Output, output_anywhere


class RootGroup(TyperGroup):
    """Turns every error into its message and exit code: never a traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):
            raise
        except ApiError as exc:
            raise api_failure(exc) from None
        except ConfigError as exc:
            raise fail(str(exc)) from None
        except KeyboardInterrupt:
            raise fail("interrupted", INTERRUPTED) from None
        except Exception as exc:  # a bug in maasctl: say what, not where
            message = f"internal error: {type(exc).__name__}: {output.clean(exc)}"
            raise fail(message, 5) from None


app = typer.Typer(
    cls=RootGroup,
    help="The control plane's command line: sites, SKUs, nodes, onboarding, decommission, "
    "reconciliation. Talks only to the HTTP API.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def root(
    profile: Annotated[
        str | None, typer.Option("--profile", help="Config profile (default: MAASCTL_PROFILE).")
    ] = None,
    output_format: Output = None,
) -> None:
    output.setup()
    fmt = output_format or Format.table
    STATE.profile, STATE.fmt, STATE._api = profile, fmt.value, None


def _choose(fmt: Format) -> None:
    STATE.fmt = fmt.value


# the names batches had before they were a group of their own (docs/cli.md)
workflows.onboardings.command("batches", help="Batches (as `maasctl batches list`).")(
    batches.batches_list
)
workflows.onboardings.command("batch", help="One batch (as `maasctl batches show`).")(
    batches.batch_show
)

app.add_typer(sites.app, name="sites")
app.add_typer(profiles.app, name="profiles")
app.add_typer(skus.app, name="skus")
app.add_typer(nodes.app, name="nodes")
app.add_typer(allocations.app, name="allocations")
app.add_typer(onboard.app, name="onboard")
app.add_typer(workflows.onboardings, name="onboardings")
app.add_typer(batches.app, name="batches")
app.add_typer(workflows.decommissions, name="decommissions")
app.command("decommission")(decommission.decommission_start)
app.command("storage-cleanup")(decommission.storage_cleanup)
nodes.app.command("cordon")(repair.cordon)
nodes.app.command("uncordon")(repair.uncordon)
nodes.app.command("repair")(repair.repair_start)
app.add_typer(repair.repairs, name="repairs")
app.add_typer(reconciliation.drift, name="drift")
app.add_typer(reconciliation.reconcile, name="reconcile")
app.add_typer(reconciliation.leaks, name="leaks")
app.add_typer(roce.app, name="roce")
app.add_typer(tokens.app, name="tokens")
output_anywhere(app, _choose)  # -o/--output after the command's name too (kubectl, gh)


def main() -> None:
    """The console script: ``maasctl`` (pyproject.toml)."""
    app()
