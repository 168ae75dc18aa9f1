"""What binds the deployment to the descriptor the function read: its signatures, verified
before anything is composed, and its normalised digest, which the gate compares with the one
the OCM controller verified.

Verification holds with and without OCM objects composed (``ocm.enabled: false``): a
platform without the OCM controller still deploys only signed components. A failed
signature is one Fatal naming the signature and what failed, so nothing is composed from an
unverified descriptor. The result is a pure function of the descriptor bytes and the keys,
so warm reconciles reuse it (memoised by descriptor manifest digest and keys).
"""

from __future__ import annotations

from dataclasses import dataclass

from function.api.policy import Policy
from function.cache import Memos, memo
from function.errors import ComponentError
from function.ocm import normalisation, signatures
from function.ocm.model import ComponentVersion

#: What the OCM controller reports (open-component-model kubernetes/controller
#: internal/controller/component/component_controller.go: SHA-256 over jsonNormalisation/v3,
#: which its signing library maps to v4alpha1).
REPORTED_HASH = "SHA-256"
REPORTED_NORMALISATION = normalisation.V4ALPHA1


class SignatureError(ComponentError):
    """A signature the policy requires is missing, unsupported or does not verify."""

    reason = "SignatureVerificationFailed"


@dataclass(frozen=True)
class Integrity:
    """The descriptor's normalised digest (None if it cannot be normalised: the reason is in
    ``problem``) and the verified signatures.
    """

    normalised: normalisation.NormalisedDigest | None
    problem: str
    verified: tuple[signatures.Verification, ...]


def _check(policy: Policy, cv: ComponentVersion) -> Integrity:
    raw = cv.descriptor.raw
    keys = [(v.signature, v.publicKey or "") for v in policy.ocm.verify]
    results = tuple(signatures.verify_all(raw, keys))
    try:
        normalised: normalisation.NormalisedDigest | None = normalisation.digest(
            raw, REPORTED_NORMALISATION, REPORTED_HASH
        )
        problem = ""
    except normalisation.NormalisationError as e:
        normalised, problem = None, str(e)
    return Integrity(normalised, problem, results)


def check(policy: Policy, cv: ComponentVersion, memos: Memos | None = None) -> Integrity:
    """Verify every policy signature (a failure raises :class:`SignatureError`) and compute
    the normalised digest the gate binds (memoised in ``memos``, the edge's tables).
    """
    keys = tuple((v.signature, v.publicKey) for v in policy.ocm.verify)
    key = (cv.name, cv.version, cv.descriptor_digest, keys) if cv.descriptor_digest else None
    out = memo("integrity", key, lambda: _check(policy, cv), lambda _: 2048, memos)
    failed = [v for v in out.verified if not v.ok]
    if failed:
        v = failed[0]
        raise SignatureError(
            f"component {cv.name}:{cv.version}",
            f"signature {v.signature!r} (policy ocm.verify) failed: {v.detail}; nothing is "
            "composed from an unverified descriptor",
        )
    return out
