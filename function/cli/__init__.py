"""The ``sack8s`` command: one click group, one module per command, each imported only when run.

``serve`` runs the gRPC function; ``render`` runs the same RunFunction in-process (like
``crossplane render``); ``xrd`` prints the generated XRDs; ``inspect`` shows what a component
holds; ``localize``/``configure``/``mutate`` are the service teams' ConfigData tools and
``check`` lints a ConfigData. Every command keeps the exit-status contract of
:mod:`function.cli.exits`.

Why lazy: importing everything (gRPC, the Crossplane SDK, protobuf, httpx, jsonschema, the
pydantic models) costs about a second before any work, paid on every ``sack8s localize`` in a
team's CI loop. The group lists commands from the table below and imports a command's module
only when that command runs (or its ``--help`` is asked for); the modules import their heavy
dependencies inside the command, so a command pays only for what it uses.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from function.__version__ import __version__
from function.cli.exits import EPILOG

#: name → (module, attribute, one-line help shown by ``sack8s --help``).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "serve": (
        "function.cli.serve",
        "serve",
        "Serve RunFunction over gRPC (--insecure, --tls-certs-dir, --address, --debug).",
    ),
    "render": (
        "function.cli.render",
        "render_cmd",
        "Print the desired composed resources as a YAML stream.",
    ),
    "xrd": (
        "function.cli.xrd",
        "xrd",
        "Print an XRD, the input CRD or Crossplane's ClusterRole as YAML.",
    ),
    "inspect": (
        "function.cli.inspect",
        "inspect_cmd",
        "Show a component's versions, resources and ConfigData rules, or --extract one resource.",
    ),
    "localize": (
        "function.cli.mutate",
        "localize",
        "Print FILE with every localization rule for it applied.",
    ),
    "configure": (
        "function.cli.mutate",
        "configure",
        "Print FILE with every configuration rule for it applied.",
    ),
    "mutate": (
        "function.cli.mutate",
        "mutate",
        "Print FILE with localization, then configuration, applied.",
    ),
    "check": (
        "function.cli.check",
        "check",
        "Lint a ConfigData against its deployable: one line per finding.",
    ),
    "component": (
        "function.cli.component",
        "component",
        "Build a component version (CTF or directory) from your own inputs.",
    ),
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use; the listing needs no import."""

    def list_commands(self, ctx: click.Context) -> list[str]:  # noqa: ARG002 - click API
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:  # noqa: ARG002
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        command = getattr(importlib.import_module(spec[0]), spec[1])
        self.commands[cmd_name] = command
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (
                name,
                COMMANDS[name][2]
                if name in COMMANDS
                else (self.commands[name].get_short_help_str()),
            )
            for name in self.list_commands(ctx)
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.version_option(__version__, prog_name="sack8s")
def main() -> None:
    """SACK8sComponentVersion composition function and ConfigData tools."""


def command(name: str) -> Any:
    """The click command ``name`` (imports its module): for tests and embedding."""
    return main.get_command(click.Context(main), name)
