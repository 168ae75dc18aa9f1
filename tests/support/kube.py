"""A minimal Kubernetes API client for the e2e suite (httpx): discovery, server-side apply,
get/list/delete, SubjectAccessReview.

Small on purpose: every request the suite makes as "Crossplane" is visible here, with the one
field manager, strict field validation (an unknown or misspelled field is an error, not a
dropped field) and optional server-side dry-run.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import httpx

MANAGER = "crossplane-test"  # the one field manager for everything "Crossplane" applies


class ApiError(Exception):
    def __init__(self, status: int, body: Any):
        self.status = status
        self.body = body
        super().__init__(f"HTTP {status}: {self.message}")

    @property
    def message(self) -> str:
        return str(self.body.get("message") if isinstance(self.body, dict) else self.body)


class Kube:
    def __init__(self, server: str, ca: Path, token: str, mapping: dict | None = None):
        self.server, self.ca, self.token = server, ca, token
        ctx = ssl.create_default_context(cafile=str(ca))
        self.http = httpx.Client(
            base_url=server, verify=ctx, timeout=30, headers={"Authorization": f"Bearer {token}"}
        )
        self.mapping: dict[tuple[str, str], tuple[str, bool]] = (
            mapping if mapping is not None else {}
        )
        self.warnings: list[str] = []  # Warning headers (deprecations, PSA, unknown fields)

    def as_token(self, token: str) -> Kube:
        return Kube(self.server, self.ca, token, self.mapping)  # shares the discovery map

    def clone(self) -> Kube:
        """Another connection with the same identity (for a second thread)."""
        return Kube(self.server, self.ca, self.token, self.mapping)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kw) -> Any:
        r = self.http.request(method, path, **kw)
        self.warnings += [f"{method} {path}: {w}" for w in r.headers.get_list("warning")]
        try:
            body = r.json()
        except ValueError:
            body = r.text
        if r.status_code >= 400:
            raise ApiError(r.status_code, body)
        return body

    def discover(self) -> None:
        self.mapping.clear()
        gvs = ["v1"]
        for g in self.request("GET", "/apis")["groups"]:
            gvs += [v["groupVersion"] for v in g["versions"]]
        for gv in gvs:
            base = "/api/v1" if gv == "v1" else f"/apis/{gv}"
            for r in self.request("GET", base)["resources"]:
                if "/" not in r["name"]:
                    self.mapping[(gv, r["kind"])] = (r["name"], r["namespaced"])

    def path(
        self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None
    ) -> str:
        if (api_version, kind) not in self.mapping:
            self.discover()
        # Not served: ask anyway (the usual plural), so the API server itself refuses it.
        plural, namespaced = self.mapping.get((api_version, kind), (kind.lower() + "s", True))
        p = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        if namespaced and namespace:
            p += f"/namespaces/{namespace}"
        p += f"/{plural}"
        return p + (f"/{name}" if name else "")

    def ref_path(self, obj: dict) -> str:
        m = obj["metadata"]
        return self.path(obj["apiVersion"], obj["kind"], m.get("namespace"), m["name"])

    def apply(self, obj: dict, manager: str = MANAGER, dry_run: bool = False) -> dict:
        params = {"fieldManager": manager, "force": "true", "fieldValidation": "Strict"}
        if dry_run:
            params["dryRun"] = "All"
        return self.request(
            "PATCH",
            self.ref_path(obj),
            params=params,
            content=json.dumps(obj),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )

    def apply_status(self, obj: dict, status: dict, manager: str = MANAGER) -> dict:
        """Server-side apply of ``status`` to the status subresource (what a controller writes)."""
        m = obj["metadata"]
        patch = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {
                "name": m["name"],
                **({"namespace": m["namespace"]} if m.get("namespace") else {}),
            },
            "status": status,
        }
        return self.request(
            "PATCH",
            self.ref_path(obj) + "/status",
            params={"fieldManager": manager, "force": "true", "fieldValidation": "Strict"},
            content=json.dumps(patch),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )

    def get(
        self,
        obj_or_api: dict | str,
        kind: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
    ) -> dict | None:
        p = (
            self.ref_path(obj_or_api)
            if isinstance(obj_or_api, dict)
            else self.path(obj_or_api, kind, namespace, name)
        )
        try:
            return self.request("GET", p)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, **params: str
    ) -> list[dict]:
        return self.request("GET", self.path(api_version, kind, namespace), params=params)["items"]

    def delete(self, obj: dict, propagation: str | None = None) -> None:
        body = {"propagationPolicy": propagation} if propagation else None
        try:
            self.request("DELETE", self.ref_path(obj), json=body)
        except ApiError as e:
            if e.status != 404:
                raise

    def can(
        self, user: str, verb: str, resource: str, group: str = "", namespace: str | None = None
    ) -> bool:
        sar = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": user,
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "resourceAttributes": {
                    "verb": verb,
                    "resource": resource,
                    "group": group,
                    **({"namespace": namespace} if namespace else {}),
                },
            },
        }
        got = self.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", json=sar)
        return bool(got["status"].get("allowed"))


def key(obj: dict) -> tuple:
    m = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], m.get("namespace"), m["name"])


def condition(obj: dict | None, kind: str = "Ready") -> dict | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c
    return None
