"""Signing component descriptors the way the OCM CLI does, with ``cryptography``.

RSASSA-PKCS1-V1_5 and RSASSA-PSS over the pre-hashed normalised digest (PSS with the largest
salt, as Go's ``rsa.SignPSS`` with nil options writes it), hex encoded with the OCM media
types or as a PEM ``SIGNATURE`` block. The digest comes from ``function.ocm.normalisation``
for v3/v4alpha1 (checked against the OCM specification's conformance vectors by
tests/test_integrity_signatures.py) and from ``gardener-ocm`` (an independent implementation)
for ``jsonNormalisation/v1`` where its model reads the descriptor unchanged.
"""

from __future__ import annotations

import base64
import functools
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa, utils

from function.ocm import normalisation

PKCS1V15 = "RSASSA-PKCS1-V1_5"
PSS = "RSASSA-PSS"


@functools.cache
def private_key(name: str = "acme") -> rsa.RSAPrivateKey:
    """One RSA key per name, made once per test session (2048 bits, as the OCM CLI makes)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_pem(name: str = "acme") -> str:
    return (
        private_key(name)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def sign(
    descriptor: dict[str, Any],
    name: str = "acme",
    *,
    key: str = "acme",
    algorithm: str = PKCS1V15,
    norm: str = normalisation.V3,
    hash_name: str = "SHA-256",
    pem: bool = False,
    digest_value: str | None = None,
) -> dict[str, Any]:
    """Add (or replace) signature ``name`` to ``descriptor`` in place; returns the descriptor."""
    if digest_value is None:
        digest_value = normalisation.digest(descriptor, norm, hash_name).value
    h = hashes.SHA256() if normalisation.canonical_hash(hash_name) == "SHA-256" else hashes.SHA512()
    pad: Any = (
        padding.PKCS1v15()
        if algorithm == PKCS1V15
        else padding.PSS(mgf=padding.MGF1(h), salt_length=padding.PSS.MAX_LENGTH)
    )
    raw = private_key(key).sign(bytes.fromhex(digest_value), pad, utils.Prehashed(h))
    if pem:
        body = base64.b64encode(raw).decode()
        lines = [body[i : i + 64] for i in range(0, len(body), 64)]
        value = "\n".join(
            [
                "-----BEGIN SIGNATURE-----",
                f"Signature Algorithm: {algorithm}",
                "",
                *lines,
                "-----END SIGNATURE-----",
                "",
            ]
        )
        media = "application/x-pem-file"
    else:
        value = raw.hex()
        media = (
            "application/vnd.ocm.signature.rsa"
            if algorithm == PKCS1V15
            else "application/vnd.ocm.signature.rsa.pss"
        )
    sig = {
        "name": name,
        "digest": {
            "hashAlgorithm": hash_name,
            "normalisationAlgorithm": norm,
            "value": digest_value,
        },
        "signature": {"algorithm": algorithm, "mediaType": media, "value": value},
    }
    sigs = [s for s in (descriptor.get("signatures") or []) if s.get("name") != name]
    descriptor["signatures"] = [*sigs, sig]
    return descriptor


def gardener_v1_digest(descriptor: dict[str, Any]) -> str:
    """``jsonNormalisation/v1`` SHA-256 as gardener-ocm computes it (digests must be present)."""
    import ocm
    import ocm.sign

    def no_lookup(*_: Any, **__: Any) -> Any:
        raise AssertionError("every digest is in the descriptor")

    cd = ocm.ComponentDescriptor.from_dict(descriptor)
    return ocm.sign.component_descriptor_digest(cd, no_lookup, no_lookup)
