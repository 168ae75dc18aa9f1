"""A Mermaid picture of what one claim composes, for ``sack8s render --graph``.

Twenty-odd objects in three API groups are hard to hold in one's head from a YAML stream. The
picture groups them by namespace and draws only the edges a reader needs to reason about
rights, secrets and deletion:

* which ServiceAccount the Flux object impersonates, and which RoleBinding binds which Role
  to it (in the deploy namespace and in every target namespace);
* which Secret (from which ExternalSecret, from which store) feeds which object: the
  repository secret into the OCM objects and the OCIRepository, the pull and service
  secrets into the workloads of their namespace;
* where the Flux object gets its chart or manifests, and where it deploys;
* what waits on the gate (the Flux objects on the OCM Component), drawn even while the
  Flux objects are withheld;
* which deletion a Usage or ClusterUsage orders: a dotted edge from the user (``by``,
  deleted first) to the object it protects (``of``).

Pure and deterministic: the same render gives the same text, byte for byte, so the pictures
in docs/graph.md are regenerated and compared by a test.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

ANNOTATION = "crossplane.io/composition-resource-name"
FLUX_RELEASES = ("HelmRelease", "Kustomization")
USAGES = ("Usage", "ClusterUsage")
DOCKERCONFIG = "kubernetes.io/dockerconfigjson"


def _esc(text: str) -> str:
    return text.replace('"', "#quot;")


class _Ids:
    """Mermaid ids from names: letters, digits and ``_`` only, never two alike."""

    def __init__(self) -> None:
        self._by_name: dict[str, str] = {}
        self._used: set[str] = set()

    def __call__(self, prefix: str, name: str) -> str:
        key = f"{prefix}:{name}"
        if key not in self._by_name:
            base = prefix + "_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
            ident, n = base, 2
            while ident in self._used:
                ident, n = f"{base}_{n}", n + 1
            self._used.add(ident)
            self._by_name[key] = ident
        return self._by_name[key]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def mermaid(xr: Mapping[str, Any], resources: Iterable[Mapping[str, Any]]) -> str:
    """The flowchart for one rendered claim: ``xr`` with status, ``resources`` as rendered."""
    ids = _Ids()
    objs = sorted(
        (o for o in resources if _meta(o).get("annotations", {}).get(ANNOTATION)),
        key=lambda o: _meta(o)["annotations"][ANNOTATION],
    )
    status = xr.get("status") or {}
    deploy = status.get("deploy") or {}
    deploy_ns = deploy.get("namespace")

    nodes: dict[str, list[str]] = {}  # namespace ("" = cluster) -> node lines
    where: dict[tuple[str, str, str], str] = {}  # (kind, namespace, name) -> node id
    namespaces: set[str] = set()
    composed_ns: set[str] = set()
    for o in objs:
        kind, meta = str(o.get("kind")), _meta(o)
        name, ns = str(meta.get("name", "")), str(meta.get("namespace") or "")
        if kind in USAGES:
            continue
        if kind == "Namespace":
            composed_ns.add(name)
            namespaces.add(name)
            where[("Namespace", "", name)] = ids("ns", name)
            continue
        node = ids("n", meta["annotations"][ANNOTATION])
        where[(kind, ns, name)] = node
        namespaces.add(ns)
        nodes.setdefault(ns, []).append(f'{node}["{_esc(kind)}<br/>{_esc(name)}"]:::{_class(kind)}')

    release = next((o for o in objs if o.get("kind") in FLUX_RELEASES), None)
    release_id = (
        where.get(
            (
                str(release.get("kind")),
                str(_meta(release).get("namespace") or ""),
                str(_meta(release).get("name")),
            )
        )
        if release
        else None
    )
    withheld = release is None and deploy.get("fluxKind") and deploy_ns
    if withheld:
        release_id = ids("n", "withheld-flux")
        nodes.setdefault(deploy_ns, []).append(
            f'{release_id}["{_esc(str(deploy["fluxKind"]))} and OCIRepository<br/>'
            f"{_esc(str(deploy.get('fluxName', '')))}"
            '<br/>(withheld until the gate opens)"]:::withheld'
        )
        namespaces.add(deploy_ns)

    target = str(_spec(release).get("targetNamespace") or "") if release else ""
    if not target and withheld:
        target = next((n for n in sorted(composed_ns) if n != deploy_ns), "")
    workload_ns = sorted(n for n in namespaces if n and n != deploy_ns)
    for ns in workload_ns:
        nodes.setdefault(ns, []).append(f'{ids("w", ns)}(["workloads"]):::workload')

    edges: list[str] = []

    def edge(a: str | None, b: str | None, label: str, style: str = "-->") -> None:
        if a and b:
            line = f'{a} {style}|"{_esc(label)}"| {b}'
            if line not in edges:
                edges.append(line)

    # Flux: impersonation, source, where it deploys.
    if release is not None:
        rns = str(_meta(release).get("namespace") or "")
        sa = _spec(release).get("serviceAccountName")
        edge(release_id, where.get(("ServiceAccount", rns, str(sa))), "impersonates")
        ref = _spec(release).get("chartRef") or _spec(release).get("sourceRef") or {}
        what = "chart from" if release.get("kind") == "HelmRelease" else "manifests from"
        edge(
            release_id,
            where.get(
                (str(ref.get("kind")), str(ref.get("namespace") or rns), str(ref.get("name")))
            ),
            what,
        )
    for ns in workload_ns:
        edge(release_id, ids("w", ns), "deploys into" if ns == target else "may place objects in")

    # RBAC: which RoleBinding binds which Role to which ServiceAccount.
    for o in objs:
        if o.get("kind") != "RoleBinding":
            continue
        meta = _meta(o)
        rb = where.get(("RoleBinding", str(meta.get("namespace") or ""), str(meta.get("name"))))
        role = o.get("roleRef") or {}
        edge(
            rb,
            where.get(
                (str(role.get("kind")), str(meta.get("namespace") or ""), str(role.get("name")))
            ),
            "grants",
        )
        for s in o.get("subjects") or []:
            if s.get("kind") == "ServiceAccount":
                edge(
                    rb,
                    where.get(
                        ("ServiceAccount", str(s.get("namespace") or ""), str(s.get("name")))
                    ),
                    "to",
                )

    # Secrets: store -> ExternalSecret -> the objects that read the Secret it writes.
    secrets: dict[tuple[str, str], str] = {}
    stores: list[str] = []
    for o in objs:
        if o.get("kind") != "ExternalSecret":
            continue
        meta, spec = _meta(o), _spec(o)
        ns = str(meta.get("namespace") or "")
        es = where[("ExternalSecret", ns, str(meta.get("name")))]
        tgt = spec.get("target") or {}
        secrets[(ns, str(tgt.get("name") or meta.get("name")))] = es
        store = spec.get("secretStoreRef") or {}
        sid = ids("store", f"{store.get('kind', 'SecretStore')}-{store.get('name')}")
        kind = _esc(str(store.get("kind", "SecretStore")))
        label = f'{sid}[("{kind}<br/>{_esc(str(store.get("name")))}")]:::external'
        if label not in stores:
            stores.append(label)
        edge(sid, es, "remote keys")
        if ns != deploy_ns:
            pull = (tgt.get("template") or {}).get("type") == DOCKERCONFIG
            edge(
                es,
                ids("w", ns),
                "imagePullSecret" if pull else f"Secret {tgt.get('name') or meta.get('name')}",
            )
    for o in objs:
        meta, spec = _meta(o), _spec(o)
        ns = str(meta.get("namespace") or "")
        me = where.get((str(o.get("kind")), ns, str(meta.get("name"))))
        names = [c.get("name") for c in spec.get("ocmConfig") or [] if c.get("kind") == "Secret"]
        names += (
            [(spec.get("secretRef") or {}).get("name")] if o.get("kind") == "OCIRepository" else []
        )
        for n in names:
            edge(secrets.get((ns, str(n))), me, f"Secret {n}")

    # OCM: Resource -> Component -> Repository; the gate holds the Flux objects back.
    component_id = None
    for o in objs:
        meta, spec = _meta(o), _spec(o)
        ns = str(meta.get("namespace") or "")
        me = where.get((str(o.get("kind")), ns, str(meta.get("name"))))
        if o.get("kind") == "Component":
            component_id = me
            edge(
                me,
                where.get(("Repository", ns, str((spec.get("repositoryRef") or {}).get("name")))),
                "repositoryRef",
            )
        if o.get("kind") == "Resource" and str(o.get("apiVersion", "")).startswith(
            "delivery.ocm.software/"
        ):
            edge(
                me,
                where.get(("Component", ns, str((spec.get("componentRef") or {}).get("name")))),
                "componentRef",
            )
    version = (status.get("component") or {}).get("version")
    gate = f"gate: Ready at {version}" if version else "gate: Ready"
    if component_id:
        for o in objs:
            if o.get("kind") in ("OCIRepository", *FLUX_RELEASES):
                meta = _meta(o)
                edge(
                    component_id,
                    where.get(
                        (
                            str(o.get("kind")),
                            str(meta.get("namespace") or ""),
                            str(meta.get("name")),
                        )
                    ),
                    gate,
                    "==>",
                )
        if withheld:
            edge(component_id, release_id, gate, "==>")

    # Usages: the user (by) is deleted before what it uses (of).
    for o in objs:
        if o.get("kind") not in USAGES:
            continue
        spec, uns = _spec(o), str(_meta(o).get("namespace") or "")
        of, by = spec.get("of") or {}, spec.get("by") or {}
        of_ref, by_ref = of.get("resourceRef") or {}, by.get("resourceRef") or {}
        of_ns = "" if of.get("kind") == "Namespace" else str(of_ref.get("namespace") or uns)
        by_ns = "" if by.get("kind") == "Namespace" else str(by_ref.get("namespace") or uns)
        by_id = where.get((str(by.get("kind")), by_ns, str(by_ref.get("name"))))
        if by_id is None and withheld and by.get("kind") == deploy.get("fluxKind"):
            by_id = release_id
        edge(
            by_id,
            where.get((str(of.get("kind")), of_ns, str(of_ref.get("name")))),
            "deleted before",
            "-.->",
        )

    title = f"{xr.get('kind')} {_meta(xr).get('name')}"
    comp = status.get("component") or {}
    if comp.get("name"):
        title += f" ({comp['name']} {comp.get('version', '')}".rstrip() + ")"
    title = title.replace("\\", "").replace('"', "'")
    out = ["---", f'title: "{title}"', "---", "flowchart LR"]
    for ns in _order(namespaces, deploy_ns):
        if not ns:
            continue
        sid = ids("ns", ns)
        role = "deploy namespace" if ns == deploy_ns else "target namespace"
        label = f"Namespace {ns} ({role}{'' if ns in composed_ns else ', not composed'})"
        out.append(f'  subgraph {sid}["{_esc(label)}"]')
        out += [f"    {line}" for line in nodes.get(ns, [])]
        out.append("  end")
    out += [f"  {line}" for line in nodes.get("", [])]
    out += [f"  {line}" for line in stores]
    out += [f"  {line}" for line in edges]
    out += [
        "  classDef flux fill:#e3f2fd,stroke:#1565c0",
        "  classDef ocm fill:#f3e5f5,stroke:#6a1b9a",
        "  classDef rbac fill:#fff8e1,stroke:#ef6c00",
        "  classDef secret fill:#e8f5e9,stroke:#2e7d32",
        "  classDef other fill:#fafafa,stroke:#616161",
        "  classDef external fill:#ffffff,stroke:#616161,stroke-dasharray: 3 3",
        "  classDef workload fill:#ffffff,stroke:#1565c0,stroke-dasharray: 5 5",
        "  classDef withheld fill:#ffffff,stroke:#1565c0,stroke-dasharray: 5 5",
    ]
    return "\n".join(out) + "\n"


def _class(kind: str) -> str:
    if kind in ("HelmRelease", "Kustomization", "OCIRepository"):
        return "flux"
    if kind in ("Component", "Repository", "Resource"):
        return "ocm"
    if kind in ("ServiceAccount", "Role", "RoleBinding"):
        return "rbac"
    if kind == "ExternalSecret":
        return "secret"
    return "other"


def _order(namespaces: set[str], deploy_ns: str | None) -> list[str]:
    return ([deploy_ns] if deploy_ns in namespaces else []) + sorted(
        n for n in namespaces if n != deploy_ns
    )


__all__ = ["mermaid"]
