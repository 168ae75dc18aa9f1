r"""External Secrets Operator ``ExternalSecret`` objects (``external-secrets.io/v1`` only).

Secret *values* never pass through the function: the claim names a store ops allows and a
remote key under an allowed prefix, and ESO fetches the value in the cluster. Registry
credentials become ``kubernetes.io/dockerconfigjson`` Secrets whose JSON is built with the
``toJson`` template function, so a ``"`` or ``\\`` in a password cannot break (or inject
into) the document.

ESO copies none of the ExternalSecret's labels onto the Secret it creates, so every target
template carries the claim's labels (``target.template.metadata.labels``): each object a claim
causes is traceable to it. A template without ``data`` keeps the provider's keys as they are.
``refreshInterval`` is spelled as ESO writes it back (``1h0m0s``), so it never owns the field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from function.api.claim import RegistryCredential, RemoteRef, SecretData
from function.compose import collisions, names
from function.compose.context import Context
from function.compose.durations import canonical
from function.errors import InvalidClaim

API = "external-secrets.io/v1"
REFRESH = canonical("1h", "refreshInterval")  # 1h0m0s


def key_repository() -> str:
    """Composition-resource key of the repository credential's ExternalSecret."""
    return "externalsecret-repository"


def key_pull(namespace: str) -> str:
    """Composition-resource key of the pull credential's ExternalSecret in ``namespace``."""
    return names.key("externalsecret-pull", namespace)


def key_service(namespace: str, name: str) -> str:
    """Composition-resource key of a service secret's ExternalSecret."""
    return names.key("externalsecret", namespace, name)


def _remote(ref: RemoteRef, prop: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": ref.key}
    p = prop if prop is not None else ref.property
    if p:
        out["property"] = p
    if ref.version:
        out["version"] = ref.version
    return out


def docker_config_template(hosts: Iterable[str]) -> str:
    """A Go template (ESO engine v2, Sprig) that renders a dockerconfigjson for ``hosts``.

    Hosts come from the policy allowlist and image references (validated host[:port]), never
    from secret data; username and password only ever pass through ``dict``/``toJson``.
    """
    entry = (
        '(dict "username" .username "password" .password '
        '"auth" (printf "%s:%s" .username .password | b64enc))'
    )
    pairs = " ".join(f'"{h}" {entry}' for h in sorted(set(hosts)))
    return '{{ dict "auths" (dict ' + pairs + ") | toJson }}"


def docker_config_filter(hosts: Iterable[str]) -> str:
    """A Go template that keeps only ``hosts`` of a complete docker config JSON from the store:
    the store's value may name any registry, the Secret is keyed to the policy's hosts only.
    """
    picked = " ".join(f'"{h}"' for h in sorted(set(hosts)))
    return (
        '{{- $auths := get (.dockerconfigjson | toString | fromJson) "auths" -}}'
        '{{ dict "auths" (pick $auths ' + picked + ") | toJson }}"
    )


def _registry_secret(
    ctx: Context, name: str, target: str, namespace: str, cred: RegistryCredential, hosts: list[str]
) -> dict[str, Any]:
    if cred.format == "dockerConfigJson":
        data = [{"secretKey": "dockerconfigjson", "remoteRef": _remote(cred.remoteRef)}]
        template = docker_config_filter(hosts)
    else:
        data = [
            {"secretKey": "username", "remoteRef": _remote(cred.remoteRef, cred.usernameProperty)},
            {"secretKey": "password", "remoteRef": _remote(cred.remoteRef, cred.passwordProperty)},
        ]
        template = docker_config_template(hosts)
    return {
        "apiVersion": API,
        "kind": "ExternalSecret",
        "metadata": ctx.meta(name, namespace),
        "spec": {
            "refreshInterval": REFRESH,
            "secretStoreRef": {"name": cred.storeRef.name, "kind": cred.storeRef.kind},
            "target": {
                "name": target,
                "creationPolicy": "Owner",
                "template": {
                    "type": "kubernetes.io/dockerconfigjson",
                    "engineVersion": "v2",
                    "metadata": {"labels": ctx.labels()},
                    "data": {".dockerconfigjson": template},
                },
            },
            "data": data,
        },
    }


def _check_unique_keys(index: int, data: Iterable[SecretData]) -> None:
    """ESO's webhook refuses two ``data`` entries with one ``secretKey``; without the webhook the
    last silently wins. Either way the claim did not get what it wrote: one Fatal, naming both.
    """
    first: dict[str, int] = {}
    for j, d in enumerate(data):
        if d.secretKey in first:
            earlier = f"spec.secrets[{index}].data[{first[d.secretKey]}]"
            raise InvalidClaim(
                f"spec.secrets[{index}].data[{j}].secretKey",
                f"secretKey {d.secretKey!r} is already set by {earlier}; each key of a Secret "
                "can come from one data entry only",
            )
        first[d.secretKey] = j


def build(ctx: Context, image_hosts: list[str]) -> collisions.Objects:
    """The ExternalSecrets of one claim: the repository credential (deploy namespace), the pull
    credential (every target namespace, for ``image_hosts`` only) and the service secrets.

    Args:
        ctx: The claim's context.
        image_hosts: The registries the pull credential may be sent to (images.py).

    Returns:
        The objects by composition-resource key, each with the claim field that asked for it.
    """
    out = collisions.Objects()
    creds = ctx.spec.credentials
    if creds and creds.repository:
        name = ctx.names.repository_secret
        obj = _registry_secret(
            ctx, name, name, ctx.deploy_namespace, creds.repository, [ctx.repository.host.lower()]
        )
        collisions.merge(out, {key_repository(): obj}, "spec.credentials.repository")
    if creds and creds.pull:
        # image_hosts: only hosts the policy lets receive the pull credential (images.py).
        for i, ns in enumerate(ctx.targets):
            obj = _registry_secret(
                ctx,
                ctx.names.pull_externalsecret(ns.name),
                ctx.names.pull_secret,
                ns.name,
                creds.pull,
                image_hosts,
            )
            collisions.merge(
                out, {key_pull(ns.name): obj}, f"spec.credentials.pull (spec.namespaces[{i}])"
            )
    for i, s in enumerate(ctx.spec.secrets):
        target = s.namespace or ctx.primary_namespace
        _check_unique_keys(i, s.data)
        template: dict[str, Any] = {"engineVersion": "v2", "metadata": {"labels": ctx.labels()}}
        if s.type:
            template["type"] = s.type
        spec: dict[str, Any] = {
            "refreshInterval": REFRESH,
            "secretStoreRef": {"name": s.storeRef.name, "kind": s.storeRef.kind},
            "target": {"name": s.name, "creationPolicy": "Owner", "template": template},
        }
        if s.data:
            spec["data"] = [
                {"secretKey": d.secretKey, "remoteRef": _remote(d.remoteRef)} for d in s.data
            ]
        if s.dataFrom:
            spec["dataFrom"] = [{"extract": _remote(d)} for d in s.dataFrom]
        obj = {
            "apiVersion": API,
            "kind": "ExternalSecret",
            "metadata": ctx.meta(ctx.names.service_externalsecret(target, s.name), target),
            "spec": spec,
        }
        collisions.merge(out, {key_service(target, s.name): obj}, f"spec.secrets[{i}]")
    return out
