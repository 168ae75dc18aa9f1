"""Resource digests: the bytes the function reads are the bytes the descriptor declares.

An OCM signature covers the descriptor, and through each resource's ``digest`` the resource
content; it never covers the ``access`` (a transfer rewrites it). So the digest is the only
thing that binds a blob to what was signed: a descriptor whose access is pointed at other
bytes still verifies, and only comparing the blob with ``resource.digest`` notices.
Every blob the function reads from a component (the deployable, the ConfigData) passes
:func:`check` before anything is made of it.

Normalisations (``digest.normalisationAlgorithm``), as the OCM specification defines them:

* ``genericBlobDigest/v1``: the hash of the blob bytes as stored. OCM CLI v0.9.1 writes it
  for every resource (``fixtures/ocm-cli-v0.9.1/FACTS.md`` §4); for a localBlob that is an
  OCI artifact (a Helm chart) the blob is the artifact's manifest, so the value is the
  manifest digest, which names every layer by digest in turn;
* ``ociArtifactDigest/v1``: the digest of the OCI artifact's manifest; only meaningful for a
  blob that is an OCI manifest or index.

Anything else, an unknown hash algorithm (names compared case-insensitively, ``SHA-256`` =
``sha256``), or a value that is not hex of the hash's length is one error naming it. A
resource without a digest (or with OCM's ``NO-DIGEST``/``EXCLUDE-FROM-SIGNATURE`` marker) is
not an error here: the policy decides (``source.requireDigests``, :func:`enforce`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from function.errors import ComponentError, DigestMismatch
from function.ocm.layout import is_manifest_media_type
from function.ocm.model import Resource

GENERIC_BLOB_DIGEST = "genericBlobDigest/v1"
OCI_ARTIFACT_DIGEST = "ociArtifactDigest/v1"
SUPPORTED_NORMALISATIONS = (GENERIC_BLOB_DIGEST, OCI_ARTIFACT_DIGEST)
#: OCM's marker for a resource whose content a signature deliberately leaves out.
EXCLUDED = ("no-digest", "exclude-from-signature")

_HASHES: dict[str, Callable[[bytes], Any]] = {
    "sha256": hashlib.sha256,
    "sha512": hashlib.sha512,
}

Status = Literal["verified", "missing", "skipped"]

__all__ = ["DigestCheck", "DigestMismatch", "check", "enforce", "hash_name", "skipped"]


@dataclass(frozen=True)
class DigestCheck:
    """What became of one resource's digest check.

    ``verified``: the blob hashes to the declared digest; ``missing``: the resource declares
    none (``detail`` says how); ``skipped``: the caller turned checking off
    (``--skip-digest-check``, tests only).
    """

    resource: str
    status: Status
    declared: str = ""
    detail: str = ""

    def text(self) -> str:
        if self.status == "verified":
            return f"verified ({self.declared})"
        if self.status == "missing":
            return f"not verified: {self.detail}"
        return "not checked (--skip-digest-check)"


def hash_name(algorithm: str) -> str:
    """``SHA-256``, ``sha256``, ``Sha_256`` → ``sha256``."""
    return algorithm.strip().lower().replace("-", "").replace("_", "")


def declared(resource: Resource) -> str:
    d = resource.digest
    if d is None:
        return ""
    return f"{d.hash_algorithm} {d.normalisation_algorithm} {d.value}".replace("  ", " ")


def _missing_reason(resource: Resource) -> str | None:
    d = resource.digest
    if d is None:
        return "the resource declares no digest"
    names = {d.hash_algorithm.strip().lower(), d.normalisation_algorithm.strip().lower()}
    if names & set(EXCLUDED):
        return (
            f"the resource's digest is {d.hash_algorithm}/{d.normalisation_algorithm} (excluded "
            "from signatures)"
        )
    return None


def check(where: str, resource: Resource, data: bytes, media_type: str) -> DigestCheck:
    """Check ``data``, the blob read for ``resource`` (stored as ``media_type``), against the
    resource's declared digest; raise on a mismatch or a digest that cannot be checked.
    """
    missing = _missing_reason(resource)
    d = resource.digest
    if missing is not None or d is None:
        return DigestCheck(resource.describe(), "missing", detail=missing or "no digest")
    norm = {n.lower(): n for n in SUPPORTED_NORMALISATIONS}.get(d.normalisation_algorithm.lower())
    if norm is None:
        raise ComponentError(
            where,
            f"digest.normalisationAlgorithm {d.normalisation_algorithm[:80]!r} is not supported "
            f"(supported: {', '.join(SUPPORTED_NORMALISATIONS)}), so the blob cannot be verified",
        )
    if norm == OCI_ARTIFACT_DIGEST and not is_manifest_media_type(media_type):
        raise ComponentError(
            where,
            f"digest.normalisationAlgorithm {OCI_ARTIFACT_DIGEST} is the digest of an OCI "
            f"artifact's manifest, but the resource is a {media_type[:100]!r} blob",
        )
    hasher = _HASHES.get(hash_name(d.hash_algorithm))
    if hasher is None:
        raise ComponentError(
            where,
            f"digest.hashAlgorithm {d.hash_algorithm[:80]!r} is not supported (supported: "
            "SHA-256, SHA-512), so the blob cannot be verified",
        )
    actual = hasher(data).hexdigest()
    value = d.value.strip().lower()
    if value != actual:
        raise DigestMismatch(
            where,
            f"digest mismatch: the descriptor declares {d.hash_algorithm} {norm} "
            f"{d.value[:200]}, the blob read ({len(data)} bytes) hashes to {actual}",
        )
    return DigestCheck(resource.describe(), "verified", declared=declared(resource))


def skipped(resource: Resource) -> DigestCheck:
    return DigestCheck(resource.describe(), "skipped", declared=declared(resource))


def enforce(
    checks: Mapping[str, DigestCheck], where: str, *, require: bool
) -> list[tuple[str, str]]:
    """The policy on the checks of one load: a missing digest is one error naming the
    resource when ``require`` (``source.requireDigests``), else a warning; a skipped check is
    a warning. Returns ``(reason, message)`` warnings.
    """
    warnings: list[tuple[str, str]] = []
    for key in sorted(checks):
        c = checks[key]
        if c.status == "missing":
            if require:
                raise ComponentError(
                    f"{where} {c.resource}",
                    f"{c.detail}, so its content cannot be verified: the policy requires a "
                    "digest on every resource the function deploys or reads "
                    "(source.requireDigests)",
                    reason="ResourceDigestMissing",
                )
            warnings.append(
                (
                    "ResourceDigestMissing",
                    f"{where} {c.resource}: {c.detail}; its content is used unverified "
                    "(policy source.requireDigests: false)",
                )
            )
        elif c.status == "skipped":
            warnings.append(
                (
                    "ResourceDigestNotChecked",
                    f"{where} {c.resource}: digest not checked (--skip-digest-check, for "
                    "tests only)",
                )
            )
    return warnings
