"""The exit-status contract every ``sack8s`` command keeps, in one place.

Scripts and CI jobs branch on the status, so it must mean the same thing for every command:

* ``0``: success (warnings may have been printed on stderr);
* ``1``: bad input: a file that is missing or unreadable (including one given as an
  argument), invalid YAML, a ConfigData, claim, policy or component that is refused, a
  registry that cannot be read, or a Fatal result of the function;
* ``2``: usage: an unknown command or option, a missing required option or argument, an
  option value click itself refuses (``--variant bogus``).

Click reports usage errors with status 2 on its own; what it would also call a usage error,
a path argument that does not exist (``click.Path(exists=True)``), is bad input here:
:class:`InputPath` turns it into :class:`BadInput`, status 1, one line on stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

import click

EXIT_OK = 0
EXIT_BAD_INPUT = 1
EXIT_USAGE = 2

EPILOG = (
    "Exit status: 0 success; 1 bad input (a missing or invalid file, a refused ConfigData, claim, "
    "policy or component, a Fatal result); 2 usage (unknown option, missing required option or "
    "argument)."
)


def one_line(text: object) -> str:
    return " ".join(str(text).split())


class BadInput(click.ClickException):
    """Bad input found while parsing the command line or running it: status 1, one line."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file: IO[Any] | None = None) -> None:  # noqa: ARG002 - always stderr
        click.echo(f"sack8s: error: {one_line(self.format_message())}", err=True)


class InputPath(click.Path):
    """``click.Path`` whose refusals (no such file, a directory where a file is wanted) are
    bad input (status 1), not usage errors (status 2).
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as e:
            name = param.human_readable_name if param is not None else "path"
            if param is not None and param.param_type_name == "option":
                name = (param.opts or [name])[0]
            raise BadInput(f"{name} {value}: {_reason(e.message, value)}") from None


def _reason(message: str, value: object) -> str:
    """Click says ``File 'x' does not exist.``; keep the reason, drop the repeated name."""
    text = message.replace(repr(str(value)), "").replace(f"'{value}'", "")
    text = one_line(text).rstrip(".")
    for head in ("File ", "Directory ", "Path "):
        if text.startswith(head):
            text = text[len(head) :]
    return text.strip() or one_line(message)


def file_option(*decls: str, **kwargs: Any) -> Callable[[Any], Any]:
    """An option naming one existing file: a missing one, or a directory, is bad input."""
    return click.option(*decls, type=InputPath(exists=True, dir_okay=False), **kwargs)


def objects_option(*decls: str, **kwargs: Any) -> Callable[[Any], Any]:
    """A repeatable option naming files or directories of Kubernetes objects (as
    ``crossplane render`` takes them).
    """
    return click.option(*decls, multiple=True, type=InputPath(exists=True), **kwargs)


def severity_option(*decls: str, choices: tuple[str, str], **kwargs: Any) -> Callable[[Any], Any]:
    """An option saying how hard a kind of finding fails: the first choice (an error, the
    default) or the second (a warning), as the policy's ``configData`` fields say it.
    """
    return click.option(
        *decls,
        type=click.Choice(list(choices), case_sensitive=False),
        default=choices[0],
        show_default=True,
        **kwargs,
    )
