"""The ``sack8s`` command: one click group, one module per command.

``serve`` runs the gRPC function; ``render`` runs the same RunFunction in-process (like
``crossplane render``); ``xrd`` prints the generated XRDs; ``inspect`` shows what a component
holds; ``localize``/``configure``/``mutate`` are the service teams' ConfigData tools. Every
command keeps the exit-status contract of :mod:`function.cli.exits`.
"""

from __future__ import annotations

import click

from function.__version__ import __version__
from function.cli import inspect, mutate, render, serve, xrd
from function.cli.exits import EPILOG


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.version_option(__version__, prog_name="sack8s")
def main() -> None:
    """SACK8sComponentVersion composition function and ConfigData tools."""


for _module in (serve, render, xrd, mutate, inspect):
    for _command in _module.COMMANDS:
        main.add_command(_command)
