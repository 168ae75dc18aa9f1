"""``sack8s xrd``: print the XRDs and the function-input CRD generated from the models."""

from __future__ import annotations

import click


@click.command("xrd")
@click.option("--group", default=None, show_default="platform.example.org",
              help="API group for the XR (ops' choice).")
@click.option(
    "--variant",
    type=click.Choice(["cluster", "claims", "input", "rbac"]),
    default="cluster",
    show_default=True,
    help="cluster: v2 scope Cluster XRD; claims: v1 LegacyCluster XRD with claimNames; input: the function-input CRD; "
    "rbac: the ClusterRole Crossplane needs (from --policy, else the default policy).",
)
@click.option("--policy", "policy_file", type=click.Path(exists=True, dir_okay=False), help="Function input to size the rbac variant for.")
def xrd(group: str, variant: str, policy_file: str | None) -> None:
    """Print an XRD, the input CRD or Crossplane's ClusterRole as YAML."""
    from function.api.xrd import DEFAULT_GROUP, crossplane_cluster_role, input_crd, xrd_cluster, xrd_legacy_claims
    from function.render import dump_yaml, load_docs

    group = group or DEFAULT_GROUP
    policy = _policy(load_docs([policy_file])[0]) if policy_file else None
    doc = {
        "cluster": lambda: xrd_cluster(group),
        "claims": lambda: xrd_legacy_claims(group),
        "input": input_crd,
        "rbac": lambda: crossplane_cluster_role(policy),
    }[variant]()
    click.echo(dump_yaml([doc]), nl=False)


def _policy(raw: dict) -> object:
    """The function's ``parse_policy``; its module (gRPC, the SDK) is loaded only to word an error."""
    from pydantic import ValidationError

    from function.api.policy import Policy

    try:
        return Policy.model_validate(dict(raw or {}))
    except ValidationError:
        from function.fn import parse_policy

        return parse_policy(raw)
