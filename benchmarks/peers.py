"""The peers' function inputs: a go-template and a pythonic composite that compose, from the
same XR, the same set of objects function-sack8s composes (same composition-resource names,
kinds, names and namespaces; same labels, RBAC rules, secret references, Usages).

They do no ConfigData or registry work (that is the point of the comparison): the Flux
Kustomization carries no ConfigData patches and the OCIRepository/OCM objects take their
registry coordinates from the XR spec. The benchmark checks that each returns exactly the
composition-resource names sack8s returns, so no peer is measured doing less *objects*.
"""

from __future__ import annotations

from typing import Any

RULES = [
    (
        ["apps"],
        ["deployments", "statefulsets", "daemonsets", "replicasets"],
        ["get", "list", "watch", "create", "update", "patch", "delete"],
    ),
    (
        ["batch"],
        ["jobs", "cronjobs"],
        ["get", "list", "watch", "create", "update", "patch", "delete"],
    ),
    (
        [""],
        ["services", "configmaps", "secrets", "serviceaccounts", "persistentvolumeclaims"],
        ["get", "list", "watch", "create", "update", "patch", "delete"],
    ),
    (
        ["networking.k8s.io"],
        ["ingresses", "networkpolicies"],
        ["get", "list", "watch", "create", "update", "patch", "delete"],
    ),
    (
        ["policy"],
        ["poddisruptionbudgets"],
        ["get", "list", "watch", "create", "update", "patch", "delete"],
    ),
    (
        ["autoscaling"],
        ["horizontalpodautoscalers"],
        ["get", "list", "watch", "create", "update", "patch", "delete"],
    ),
    ([""], ["pods", "events", "endpoints"], ["get", "list", "watch"]),
]
DEPLOY_RULES = [
    ([""], ["secrets"], ["get", "list", "watch", "create", "update", "patch", "delete"])
]


def _yaml_rules(rules: list[tuple[list[str], list[str], list[str]]], indent: str) -> str:
    out = ""
    for groups, resources, verbs in rules:
        out += f"{indent}- apiGroups: [{', '.join(repr(g).replace(chr(39), chr(34)) for g in groups)}]\n"
        out += f"{indent}  resources: [{', '.join(resources)}]\n"
        out += f"{indent}  verbs: [{', '.join(verbs)}]\n"
    return out


GO_TEMPLATE = (
    r"""{{- $xr := .observed.composite.resource }}
{{- $name := $xr.metadata.name }}
{{- $dns := printf "sack8s-%s" $name }}
{{- $sa := printf "%s-deployer" $name }}
{{- $spec := $xr.spec }}
{{- $repo := trimPrefix "oci::http://" $spec.component.repository }}
{{- $host := index (splitList "/" $repo) 0 }}
{{- $sub := join "/" (rest (splitList "/" $repo)) }}
{{- define "labels" }}
  labels:
    app.kubernetes.io/managed-by: function-sack8s
    sack8s.io/claim-name: {{ . }}
    sack8s.io/owner: {{ . }}
{{- end }}
---
apiVersion: v1
kind: Namespace
metadata:
  name: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: deploy-namespace
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
    pod-security.kubernetes.io/enforce: restricted
{{- range $spec.namespaces }}
---
apiVersion: v1
kind: Namespace
metadata:
  name: {{ .name }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: namespace-{{ .name }}
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
    pod-security.kubernetes.io/audit: restricted
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
    pod-security.kubernetes.io/warn: restricted
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ $sa }}
  namespace: {{ .name }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: role.{{ .name }}
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
rules:
"""
    + _yaml_rules(RULES, "  ")
    + r"""---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $sa }}
  namespace: {{ .name }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: rolebinding.{{ .name }}
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $sa }}
subjects:
  - kind: ServiceAccount
    name: {{ $sa }}
    namespace: {{ $dns }}
---
apiVersion: protection.crossplane.io/v1beta1
kind: ClusterUsage
metadata:
  name: {{ $dns }}.{{ .name }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: clusterusage.namespace-{{ .name }}
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  replayDeletion: true
  reason: the deploy namespace (Helm storage, deployer) outlives the target namespaces
  by: {apiVersion: v1, kind: Namespace, resourceRef: {name: {{ .name }}}}
  of: {apiVersion: v1, kind: Namespace, resourceRef: {name: {{ $dns }}}}
---
apiVersion: protection.crossplane.io/v1beta1
kind: Usage
metadata:
  name: {{ $name }}-role-{{ .name }}
  namespace: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: usage.role.{{ .name }}
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  replayDeletion: true
  reason: Kustomization uninstalls with the deployer's rights and secrets
  by: {apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, resourceRef: {name: {{ $name
      }}}}
  of: {apiVersion: rbac.authorization.k8s.io/v1, kind: Role, resourceRef: {name: {{ $sa }},
      namespace: {{ .name }}}}
---
apiVersion: protection.crossplane.io/v1beta1
kind: Usage
metadata:
  name: {{ $name }}-rolebinding-{{ .name }}
  namespace: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: usage.rolebinding.{{ .name }}
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  replayDeletion: true
  reason: Kustomization uninstalls with the deployer's rights and secrets
  by: {apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, resourceRef: {name: {{ $name
      }}}}
  of: {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, resourceRef: {name: {{ $sa }},
      namespace: {{ .name }}}}
{{- end }}
{{- range $spec.secrets }}
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata:
  name: {{ .name }}
  namespace: {{ .namespace }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: externalsecret.{{ .namespace }}.{{
      .name }}
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  refreshInterval: 1h0m0s
  secretStoreRef: {kind: {{ .storeRef.kind }}, name: {{ .storeRef.name }}}
  target: {creationPolicy: Owner, name: {{ .name }}}
  data:
{{- range .data }}
    - secretKey: {{ .secretKey }}
      remoteRef: {key: {{ .remoteRef.key }}, property: {{ .remoteRef.property }}}
{{- end }}
---
apiVersion: protection.crossplane.io/v1beta1
kind: Usage
metadata:
  name: {{ $name }}-externalsecret-{{ .namespace }}-{{ .name }}
  namespace: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: usage.externalsecret.{{ .namespace
      }}.{{ .name }}
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  replayDeletion: true
  reason: Kustomization uninstalls with the deployer's rights and secrets
  by: {apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, resourceRef: {name: {{ $name
      }}}}
  of: {apiVersion: external-secrets.io/v1, kind: ExternalSecret, resourceRef: {name: {{ .name }},
      namespace: {{ .namespace }}}}
{{- end }}
---
apiVersion: v1
kind: ServiceAccount
automountServiceAccountToken: false
metadata:
  name: {{ $sa }}
  namespace: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: serviceaccount-deployer
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
---
apiVersion: protection.crossplane.io/v1beta1
kind: Usage
metadata:
  name: {{ $name }}-serviceaccount-deployer
  namespace: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: usage.serviceaccount-deployer
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  replayDeletion: true
  reason: Kustomization uninstalls with the deployer's rights and secrets
  by: {apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, resourceRef: {name: {{ $name
      }}}}
  of: {apiVersion: v1, kind: ServiceAccount, resourceRef: {name: {{ $sa }}, namespace: {{ $dns }}}}
---
apiVersion: delivery.ocm.software/v1alpha1
kind: Repository
metadata:
  name: {{ $name }}
  namespace: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: ocm-repository
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  interval: 10m
  repositorySpec: {baseUrl: "http://{{ $host }}", subPath: {{ $sub }}, type: OCIRegistry}
---
apiVersion: delivery.ocm.software/v1alpha1
kind: Component
metadata:
  name: {{ $name }}
  namespace: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: ocm-component
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  component: {{ $spec.component.name }}
  downgradePolicy: Allow
  interval: 10m
  repositoryRef: {name: {{ $name }}}
  semver: {{ $spec.component.version | quote }}
---
apiVersion: delivery.ocm.software/v1alpha1
kind: Resource
metadata:
  name: {{ $name }}
  namespace: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: ocm-resource
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  componentRef: {name: {{ $name }}}
  resource: {byReference: {resource: {name: {{ $spec.deploy.resource.name }}}}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: OCIRepository
metadata:
  name: {{ $name }}
  namespace: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: flux-ocirepository
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  insecure: true
  interval: 5m
  layerSelector: {mediaType: application/x-tar+gzip, operation: extract}
  ref: {tag: {{ $spec.component.version | quote }}}
  url: oci://{{ $repo }}/component-descriptors/{{ $spec.component.name }}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: {{ $name }}
  namespace: {{ $dns }}
  annotations:
    gotemplating.fn.crossplane.io/composition-resource-name: flux-kustomization
    gotemplating.fn.crossplane.io/ready: "True"
{{- template "labels" $name }}
spec:
  interval: 10m
  path: ./
  prune: true
  serviceAccountName: {{ $sa }}
  sourceRef: {kind: OCIRepository, name: {{ $name }}}
  targetNamespace: {{ (index $spec.namespaces 0).name }}
  timeout: 5m
  wait: true
"""
)


def go_input() -> dict[str, Any]:
    return {
        "apiVersion": "gotemplating.fn.crossplane.io/v1beta1",
        "kind": "GoTemplate",
        "source": "Inline",
        "inline": {"template": GO_TEMPLATE},
    }


PYTHONIC = f"""
RULES = {[list(r) for r in RULES]!r}
REASON = "Kustomization uninstalls with the deployer's rights and secrets"

class Sack8sPeer(BaseComposite):
    def compose(self):
        name = str(self.metadata.name)
        spec = self.spec
        dns = "sack8s-" + name
        sa = name + "-deployer"
        repo = str(spec.component.repository).removeprefix("oci::http://")
        host, _, sub = repo.partition("/")
        labels = {{"app.kubernetes.io/managed-by": "function-sack8s", "sack8s.io/claim-name": name, "sack8s.io/owner": name}}

        def obj(key, kind, api, ns=None, objname=None):
            r = self.resources[key](kind, api)
            r.metadata.name = objname or name
            if ns:
                r.metadata.namespace = ns
            r.metadata.labels = labels
            r.ready = True
            return r

        def usage(key, api, kind, ref):
            u = obj("usage." + key, "Usage", "protection.crossplane.io/v1beta1", dns, name + "-" + key)
            u.spec.replayDeletion = True
            u.spec.reason = REASON
            u.spec.by = {{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "resourceRef": {{"name": name}}}}
            u.spec.of = {{"apiVersion": api, "kind": kind, "resourceRef": ref}}

        d = obj("deploy-namespace", "Namespace", "v1", objname=dns)
        d.metadata.labels["pod-security.kubernetes.io/enforce"] = "restricted"
        for n in spec.namespaces:
            ns = str(n.name)
            o = obj("namespace-" + ns, "Namespace", "v1", objname=ns)
            for k, v in (("audit", "restricted"), ("enforce", "restricted"), ("enforce-version", "latest"), ("warn", "restricted")):
                o.metadata.labels["pod-security.kubernetes.io/" + k] = v
            role = obj("role." + ns, "Role", "rbac.authorization.k8s.io/v1", ns, sa)
            role.rules = [{{"apiGroups": g, "resources": r, "verbs": v}} for g, r, v in RULES]
            rb = obj("rolebinding." + ns, "RoleBinding", "rbac.authorization.k8s.io/v1", ns, sa)
            rb.roleRef = {{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa}}
            rb.subjects = [{{"kind": "ServiceAccount", "name": sa, "namespace": dns}}]
            cu = obj(
                "clusterusage.namespace-" + ns,
                "ClusterUsage",
                "protection.crossplane.io/v1beta1",
                None,
                dns + "." + ns,
            )
            cu.spec.replayDeletion = True
            cu.spec.reason = "the deploy namespace (Helm storage, deployer) outlives the target namespaces"
            cu.spec.by = {{"apiVersion": "v1", "kind": "Namespace", "resourceRef": {{"name": ns}}}}
            cu.spec.of = {{"apiVersion": "v1", "kind": "Namespace", "resourceRef": {{"name": dns}}}}
            usage("role." + ns, "rbac.authorization.k8s.io/v1", "Role", {{"name": sa, "namespace": ns}})
            usage("rolebinding." + ns, "rbac.authorization.k8s.io/v1", "RoleBinding", {{"name": sa, "namespace": ns}})
        for s in spec.secrets:
            sn, ns = str(s.name), str(s.namespace)
            es = obj("externalsecret.%s.%s" % (ns, sn), "ExternalSecret", "external-secrets.io/v1", ns, sn)
            es.spec.refreshInterval = "1h0m0s"
            es.spec.secretStoreRef = {{"kind": str(s.storeRef.kind), "name": str(s.storeRef.name)}}
            es.spec.target = {{"creationPolicy": "Owner", "name": sn}}
            es.spec.data = [{{"secretKey": str(x.secretKey), "remoteRef": {{"key": str(x.remoteRef.key), "property": str(x.remoteRef.property)}}}} for x in s.data]
            usage("externalsecret.%s.%s" % (ns, sn), "external-secrets.io/v1", "ExternalSecret", {{"name": sn, "namespace": ns}})
        a = obj("serviceaccount-deployer", "ServiceAccount", "v1", dns, sa)
        a.automountServiceAccountToken = False
        usage("serviceaccount-deployer", "v1", "ServiceAccount", {{"name": sa, "namespace": dns}})
        r = obj("ocm-repository", "Repository", "delivery.ocm.software/v1alpha1", dns)
        r.spec.interval = "10m"
        r.spec.repositorySpec = {{"baseUrl": "http://" + host, "subPath": sub, "type": "OCIRegistry"}}
        c = obj("ocm-component", "Component", "delivery.ocm.software/v1alpha1", dns)
        c.spec = {{"component": str(spec.component.name), "downgradePolicy": "Allow", "interval": "10m", "repositoryRef": {{"name": name}}, "semver": str(spec.component.version)}}
        res = obj("ocm-resource", "Resource", "delivery.ocm.software/v1alpha1", dns)
        res.spec = {{"componentRef": {{"name": name}}, "resource": {{"byReference": {{"resource": {{"name": str(spec.deploy.resource.name)}}}}}}}}
        src = obj("flux-ocirepository", "OCIRepository", "source.toolkit.fluxcd.io/v1", dns)
        src.spec = {{"insecure": True, "interval": "5m", "layerSelector": {{"mediaType": "application/x-tar+gzip", "operation": "extract"}},
                    "ref": {{"tag": str(spec.component.version)}}, "url": "oci://" + repo + "/component-descriptors/" + str(spec.component.name)}}
        k = obj("flux-kustomization", "Kustomization", "kustomize.toolkit.fluxcd.io/v1", dns)
        k.spec = {{"interval": "10m", "path": "./", "prune": True, "serviceAccountName": sa, "sourceRef": {{"kind": "OCIRepository", "name": name}},
                  "targetNamespace": str(spec.namespaces[0].name), "timeout": "5m", "wait": True}}
"""


def pythonic_input() -> dict[str, Any]:
    return {
        "apiVersion": "pythonic.fn.crossplane.io/v1alpha1",
        "kind": "Composite",
        "composite": PYTHONIC,
    }
