"""``sack8s xrd``: print the XRDs and the function-input CRD generated from the models."""

from __future__ import annotations

import click

from function.cli.exits import EPILOG, BadInput, file_option

# function.api.xrd.DEFAULT_GROUP, shown without importing the models (sack8s xrd --help stays
# fast; tests/test_cli_startup.py keeps the two equal).
DEFAULT_GROUP = "platform.example.org"


@click.command("xrd", epilog=EPILOG)
@click.option(
    "--group", default=DEFAULT_GROUP, show_default=True, help="API group for the XR (ops' choice)."
)
@click.option(
    "--variant",
    type=click.Choice(["cluster", "claims", "input", "rbac"]),
    default="cluster",
    show_default=True,
    help="cluster: v2 scope Cluster XRD; claims: v1 LegacyCluster XRD with claimNames; input: "
    "the function-input CRD; "
    "rbac: the ClusterRole Crossplane needs (from --policy, else the default policy).",
)
@file_option("--policy", "policy_file", help="Function input to size the rbac variant for.")
def xrd(group: str, variant: str, policy_file: str | None) -> None:
    """Print an XRD, the input CRD or Crossplane's ClusterRole as YAML."""
    from function.api.parse import parse_policy
    from function.api.xrd import (
        crossplane_cluster_role,
        input_crd,
        xrd_cluster,
        xrd_legacy_claims,
    )
    from function.edge.render import dump_yaml, load_docs
    from function.errors import SackError

    try:
        docs = load_docs([policy_file]) if policy_file else []
        if policy_file and len(docs) != 1:
            raise BadInput(
                f"--policy {policy_file}: must hold exactly one function input, "
                f"found {len(docs)} documents"
            )
        policy = parse_policy(docs[0]) if docs else None
    except SackError as e:
        raise BadInput(f"--policy {policy_file}: {e}") from None
    doc = {
        "cluster": lambda: xrd_cluster(group),
        "claims": lambda: xrd_legacy_claims(group),
        "input": input_crd,
        "rbac": lambda: crossplane_cluster_role(policy),
    }[variant]()
    click.echo(dump_yaml([doc]), nl=False)
