"""OCM signatures of a component descriptor, verified by the function itself.

A signature in ``signatures[]`` names a digest (``hashAlgorithm``, ``normalisationAlgorithm``,
``value``) and an RSA signature over that digest. The function never trusts the digest a
signature claims: it normalises the descriptor it read with the signature's algorithm,
hashes it, and verifies the RSA signature over *that* digest with the key the policy names.
So a descriptor changed in anything signed (a resource digest, a signing label, the version,
a component reference) fails, while a relocated ``access`` (never signed) still verifies.

Algorithms as the OCM CLI and controller sign: ``RSASSA-PKCS1-V1_5`` and ``RSASSA-PSS`` (the
salt length detected: Go signs with the largest one), each over the pre-hashed digest, hex
encoded (``application/vnd.ocm.signature.rsa``, ``...rsa.pss``) or as a PEM ``SIGNATURE``
block (``application/x-pem-file``; certificates in it are ignored: the policy's key decides).
Sources: ocm ``api/tech/signing/handlers/rsa``, ``rsa-pss``, ``signutils/signature.go``;
open-component-model ``bindings/go/rsa/signing/handler``; ocm-spec ``doc/04-extensions/
04-algorithms/signing-algorithms.md``.

Pure: descriptor data and PEM text in, a result per signature out.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils

from function.ocm import normalisation

PKCS1V15 = "RSASSA-PKCS1-V1_5"
PSS = "RSASSA-PSS"
MEDIA_RSA = "application/vnd.ocm.signature.rsa"
MEDIA_RSA_PSS = "application/vnd.ocm.signature.rsa.pss"
MEDIA_PEM = "application/x-pem-file"
_ALGORITHMS = {PKCS1V15.upper(): PKCS1V15, PSS.upper(): PSS}


@dataclass(frozen=True)
class Verification:
    """One policy signature's outcome: ``ok``, and what was checked or what failed."""

    signature: str
    ok: bool
    detail: str
    digest: normalisation.NormalisedDigest | None = None


class UnusableKey(ValueError):
    """The policy's public key cannot be used (not PEM, not RSA)."""


def load_public_key(pem: str) -> Any:
    """An RSA public key from PEM: a public key, or a certificate's key."""
    data = pem.strip().encode()
    try:
        if b"-----BEGIN CERTIFICATE-----" in data:
            key = x509.load_pem_x509_certificate(data).public_key()
        else:
            key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as e:
        raise UnusableKey(f"not a PEM public key or certificate ({type(e).__name__})") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise UnusableKey(
            f"a {type(key).__name__.removeprefix('_').replace('PublicKey', '')} key; OCM signs "
            "with RSA (RSASSA-PKCS1-V1_5, RSASSA-PSS)"
        )
    return key


def _signature_bytes(info: Mapping[str, Any], algorithm: str) -> bytes:
    media = str(info.get("mediaType") or "")
    value = info.get("value")
    if not isinstance(value, str) or not value:
        raise ValueError("signature.value is missing")
    if media in (MEDIA_RSA, MEDIA_RSA_PSS):
        try:
            return binascii.unhexlify(value.strip())
        except (binascii.Error, ValueError):
            raise ValueError("signature.value is not hex") from None
    if media == MEDIA_PEM:
        return _from_pem(value, algorithm)
    raise ValueError(
        f"signature.mediaType {media[:60]!r} is not supported ({MEDIA_RSA}, {MEDIA_RSA_PSS}, "
        f"{MEDIA_PEM})"
    )


def _from_pem(text: str, algorithm: str) -> bytes:
    """The bytes of the ``SIGNATURE`` PEM block (its ``Signature Algorithm`` header must agree)."""
    lines = text.strip().splitlines()
    try:
        start = lines.index("-----BEGIN SIGNATURE-----")
        end = lines.index("-----END SIGNATURE-----", start)
    except ValueError:
        raise ValueError("signature.value holds no SIGNATURE PEM block") from None
    body = lines[start + 1 : end]
    headers: dict[str, str] = {}
    while body and ":" in body[0]:
        k, _, v = body.pop(0).partition(":")
        headers[k.strip()] = v.strip()
    if body and not body[0].strip():
        body.pop(0)
    declared = headers.get("Signature Algorithm")
    if declared and declared.upper() != algorithm.upper():
        raise ValueError(f"the PEM block says {declared[:40]!r}, the signature says {algorithm!r}")
    try:
        return base64.b64decode("".join(x.strip() for x in body), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the SIGNATURE PEM block is not base64") from None


def _verify_rsa(key: Any, algorithm: str, hash_name: str, digest: bytes, sig: bytes) -> bool:
    h = hashes.SHA256() if hash_name == "SHA-256" else hashes.SHA512()
    pad: Any = (
        padding.PKCS1v15()
        if algorithm == PKCS1V15
        else padding.PSS(mgf=padding.MGF1(h), salt_length=padding.PSS.AUTO)
    )
    try:
        key.verify(sig, digest, pad, utils.Prehashed(h))
    except InvalidSignature:
        return False
    return True


def _fail(
    name: str, detail: str, computed: normalisation.NormalisedDigest | None = None
) -> Verification:
    return Verification(name, ok=False, detail=detail, digest=computed)


def find(raw: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    sigs = raw.get("signatures")
    for s in sigs if isinstance(sigs, list) else []:
        if isinstance(s, Mapping) and s.get("name") == name:
            return s
    return None


def verify(raw: Mapping[str, Any], name: str, public_key_pem: str) -> Verification:
    """Verify the descriptor's signature ``name`` with the policy's key."""
    sig = find(raw, name)
    if sig is None:
        present = [
            str(s.get("name")) for s in (raw.get("signatures") or []) if isinstance(s, Mapping)
        ]
        return _fail(
            name,
            "missing: the descriptor carries "
            + (f"signature(s) {', '.join(present)}" if present else "no signature"),
        )
    dig = sig.get("digest") if isinstance(sig.get("digest"), Mapping) else {}
    info = sig.get("signature") if isinstance(sig.get("signature"), Mapping) else {}
    algorithm = _ALGORITHMS.get(str(info.get("algorithm") or "").upper())
    if algorithm is None:
        return _fail(
            name,
            f"signature.algorithm {str(info.get('algorithm'))[:60]!r} is not supported "
            f"({PKCS1V15}, {PSS})",
        )
    norm = str(dig.get("normalisationAlgorithm") or "")
    if normalisation.canonical_algorithm(norm) is None:
        return _fail(
            name,
            f"digest.normalisationAlgorithm {norm[:60]!r} is not one the function computes "
            f"({', '.join(normalisation.ALGORITHMS)})",
        )
    hash_name = normalisation.canonical_hash(str(dig.get("hashAlgorithm") or ""))
    if hash_name is None:
        return _fail(
            name,
            f"digest.hashAlgorithm {str(dig.get('hashAlgorithm'))[:40]!r} is not supported "
            "(SHA-256, SHA-512)",
        )
    try:
        computed = normalisation.digest(raw, norm, hash_name)
    except normalisation.NormalisationError as e:
        return _fail(name, f"the descriptor cannot be normalised: {e}")
    try:
        key = load_public_key(public_key_pem)
    except UnusableKey as e:
        return _fail(name, f"the policy's publicKey is {e}", computed)
    try:
        sig_bytes = _signature_bytes(info, algorithm)
    except ValueError as e:
        return _fail(name, str(e), computed)
    if _verify_rsa(key, algorithm, hash_name, bytes.fromhex(computed.value), sig_bytes):
        return Verification(
            name,
            ok=True,
            detail=f"verified ({algorithm}, {norm}, {hash_name} {computed.value})",
            digest=computed,
        )
    claimed = str(dig.get("value") or "").lower()
    if claimed != computed.value:
        why = (
            f"the descriptor was changed after signing: its {norm} {hash_name} digest is "
            f"{computed.value}, the signature was made over {claimed[:128] or 'no digest'}"
        )
    else:
        why = (
            f"the {algorithm} signature over {hash_name} {computed.value} does not verify with "
            "the policy's public key"
        )
    return _fail(name, why, computed)


def verify_all(raw: Mapping[str, Any], keys: Sequence[tuple[str, str]]) -> list[Verification]:
    """Every ``(signature name, public key PEM)`` of the policy, in the policy's order."""
    return [verify(raw, name, pem) for name, pem in keys]
