"""What verifying a component costs per cold reconcile (docs/security.md, "Signatures").

Times the normalised digest of the bundled example descriptor (v4alpha1 and v1) and one
RSASSA-PSS verification (2048-bit key, normalisation included). Usage, from the repository
root: .venv/bin/python hack/integrity-cost.py
"""

import sys
import timeit

sys.path.insert(0, "tests")

from support.ctfedit import bundled_descriptor
from support.signing import PSS, public_pem, sign

from function.ocm import normalisation, signatures

descriptor = sign(bundled_descriptor(), algorithm=PSS)
pem = public_pem()
cases = {
    "normalised digest, jsonNormalisation/v4alpha1": lambda: normalisation.digest(
        descriptor, normalisation.V4ALPHA1
    ),
    "normalised digest, jsonNormalisation/v1": lambda: normalisation.digest(
        descriptor, normalisation.V1
    ),
    "RSASSA-PSS verification (with its normalisation)": lambda: signatures.verify(
        descriptor, "acme", pem
    ),
}
for what, fn in cases.items():
    n, total = timeit.Timer(fn).autorange()
    sys.stdout.write(f"{what}: {total / n * 1000:.2f} ms\n")
