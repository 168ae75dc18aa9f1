"""``sack8s component build``: a component version from a team's own inputs, no code to edit.

Either the OCM CLI's component constructor file (``--constructor``; the same file
``ocm add component-version --constructor`` takes) or flags describing one component
(``--chart``/``--manifests``, ``--config-data``, ``--image``). Writes a CTF in the OCM CLI
v0.9.1 layout (default) or a component directory; the ConfigData is checked against the
component before anything is written (it parses; every localization rule names an image
resource of the component). ``function/ocm/build.py`` has the layout and what differs
from the CLI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from function.cli.exits import EPILOG, InputPath

if TYPE_CHECKING:
    from function.ocm.build import ComponentSpec


def _named(value: str, default: str, flag: str) -> tuple[str, str]:
    """``[NAME=]VALUE``: an explicit resource name, else ``default``."""
    name, sep, rest = value.partition("=")
    if sep and name and "/" not in name and not Path(value).exists():
        return name, rest
    if flag == "--image":
        raise click.UsageError(f"--image {value}: give NAME=REFERENCE (the resource name first)")
    return default, value


def _path(value: str, flag: str, *, directory: bool) -> Path:
    from function.ocm.build import BuildError

    p = Path(value)
    if not p.exists():
        raise BuildError(f"{flag} {value}", "does not exist")
    if directory and not p.is_dir():
        raise BuildError(f"{flag} {value}", "is not a directory")
    if not directory and not p.is_file():
        raise BuildError(f"{flag} {value}", "is not a file")
    return p


def check_configdata(spec: ComponentSpec, where_prefix: str = "") -> list[str]:
    """The ConfigData resources against the component: parse errors and rules naming a resource
    the component does not have are errors (raised); findings are returned as warnings.
    """
    from function.configdata.model import parse_configdata
    from function.ocm.build import BuildError, resource_kinds

    kinds = resource_kinds(spec)
    names = {r.name for r in spec.resources}
    warnings: list[str] = []
    for r in spec.resources:
        if r.name not in kinds["configdata"] or r.input is None:
            continue
        where = f"{where_prefix}{r.input.path}"
        cd = parse_configdata(r.input.path.read_bytes(), where)
        warnings += [f"{where}: {f.message}" for f in cd.findings]
        for i, rule in enumerate(cd.localization):
            res = rule.resource.name if rule.resource else None
            if res is None:
                continue
            if res not in names:
                raise BuildError(
                    f"{where}: localization[{i}].resource.name",
                    f"{res!r} is not a resource of {spec.name}:{spec.version} (it has "
                    f"{', '.join(sorted(names))})",
                )
            if res not in kinds["images"]:
                raise BuildError(
                    f"{where}: localization[{i}].resource.name",
                    f"{res!r} is not an image resource (images: "
                    f"{', '.join(kinds['images']) or 'none'})",
                )
    return warnings


@click.group("component", epilog=EPILOG)
def component() -> None:
    """Build a component version (CTF or directory) from your own inputs.

    A chart or manifests directory, a ConfigData and image references (or an OCM CLI component
    constructor file).
    """


@component.command("build", epilog=EPILOG)
@click.option(
    "--constructor",
    type=InputPath(exists=True, dir_okay=False),
    help="An OCM CLI component constructor file (components[].resources[] with input helm/v1, "
    "dir/v1, file/v1 or access ociArtifact); paths are relative to the file.",
)
@click.option("--name", help="Component name (e.g. acme.org/team/shop), without --constructor.")
@click.option("--version", "version", help="Component version (e.g. 1.0.0).")
@click.option("--provider", help="Provider name (default: the component name's domain).")
@click.option(
    "--chart",
    multiple=True,
    metavar="[NAME=]DIR",
    help="A Helm chart directory: resource `chart` (type helmChart, an OCI artifact).",
)
@click.option(
    "--manifests",
    multiple=True,
    metavar="[NAME=]DIR",
    help="A Kustomize/manifests directory: resource `manifests` (tar+gzip, as Flux extracts).",
)
@click.option(
    "--config-data",
    metavar="[NAME=]FILE",
    help="The ConfigData file: resource `config` (configdata.ocm.software).",
)
@click.option(
    "--image",
    multiple=True,
    metavar="NAME=REFERENCE",
    help="An image the deployment pulls, pinned by digest (host/repo:tag@sha256:…; "
    "http://host/… for a plain-HTTP registry): an ociImage resource NAME.",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False),
    help="The CTF to write (created, or the version added/replaced), or the directory.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["ctf", "directory"]),
    default="ctf",
    show_default=True,
    help="A CTF (OCM CLI v0.9.1 layout) or a component directory (descriptor + blobs).",
)
def build(constructor, name, version, provider, chart, manifests, config_data, image, out, fmt):
    """Write a component version (descriptor, resources and their digests; reproducible).

    \b
    Examples:
      sack8s component build --constructor component-constructor.yaml --out ./ctf
      sack8s component build --name acme.org/team/shop --version 1.0.0 --chart ./chart
        --config-data ./config.yaml --image image=REGISTRY/shop:1.0@sha256:DIGEST --out ./ctf
    """  # noqa: D301 - \b is click's "keep this paragraph as written"
    from function.errors import SackError
    from function.ocm.build import (
        BuildError,
        flags_spec,
        parse_constructor,
        write_ctf,
        write_directory,
    )

    described = any([name, version, provider, chart, manifests, config_data, image])
    if constructor and described:
        raise click.UsageError("give either --constructor or the component flags, not both")
    if not constructor and not (name and version):
        raise click.UsageError("give --constructor, or --name and --version with the resources")
    try:
        if constructor:
            specs = parse_constructor(Path(constructor).read_bytes(), Path(constructor))
        else:
            if not (chart or manifests):
                raise click.UsageError("give --chart or --manifests (what the claim deploys)")
            cd = None
            if config_data:
                cd_name, cd_path = _named(config_data, "config", "--config-data")
                cd = (cd_name, _path(cd_path, "--config-data", directory=False))
            specs = [
                flags_spec(
                    name=name,
                    version=version,
                    provider=provider or name.split("/")[0],
                    chart=[
                        (n, _path(v, "--chart", directory=True))
                        for n, v in (_named(c, "chart", "--chart") for c in chart)
                    ],
                    manifests=[
                        (n, _path(v, "--manifests", directory=True))
                        for n, v in (_named(m, "manifests", "--manifests") for m in manifests)
                    ],
                    config_data=cd,
                    images=[_named(i, "image", "--image") for i in image],
                )
            ]
        warnings = [w for s in specs for w in check_configdata(s)]
        target = Path(out)
        if fmt == "directory":
            if len(specs) != 1:
                raise BuildError("--format directory", "holds one component version; use a CTF")
            built = [write_directory(specs[0], target)]
        else:
            built = write_ctf(specs, target)
    except SackError as e:
        click.echo(f"sack8s component build: {e}", err=True)
        sys.exit(1)
    for w in warnings:
        click.echo(f"Warning {w}", err=True)
    for b in built:
        click.echo(f"{b.name}:{b.version} -> {fmt} {target}")
        if fmt == "ctf":
            click.echo(f"  index {b.index}  descriptor manifest {b.descriptor_manifest}")
        for r in b.descriptor["component"]["resources"]:
            click.echo(f"  {r['name']:<16} {r['type']:<28} sha256:{r['digest']['value']}")
