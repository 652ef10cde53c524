"""maasctl's commands, one module per resource (docs/cli.md, "Commands"); ``maasctl.main``
assembles them into one Typer app."""
