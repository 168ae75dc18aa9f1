"""Registry authentication pieces that need no network: challenge parsing and token caching.

The Docker/OCI token flow: a request answers ``401`` with
``WWW-Authenticate: Bearer realm="https://auth.example/token",service="reg",scope="repository:x:pull"``;
the client GETs the realm with ``service`` and ``scope`` as query parameters (with HTTP basic
credentials when it has some), gets ``{"token": …}`` (or ``access_token``) back, and retries
with ``Authorization: Bearer <token>``. ``Basic realm=…`` means: send the basic credentials.
The HTTP part lives in :mod:`function.ocm.oci.client`; the realm host is checked against the
allowlist like every other URL.
"""

from __future__ import annotations

import base64
import re
import time
from dataclasses import dataclass, field

from function.ocm.oci.config import BasicCredential

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"  # noqa: S105 - the RFC 9110 token grammar
_PARAM = re.compile(r'\s*([!#$%&\'*+\-.^_`|~0-9A-Za-z]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s"]*)\s*')
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*\s*(?=,|$)")
_SCHEME = re.compile(rf"\s*({_TOKEN})(?:\s+|$|(?=,))")


@dataclass(frozen=True)
class Challenge:
    scheme: str  # lower case: "bearer", "basic", ...
    params: dict[str, str] = field(default_factory=dict)

    @property
    def realm(self) -> str | None:
        return self.params.get("realm")


def parse_www_authenticate(header: str | None) -> list[Challenge]:
    """Parse a ``WWW-Authenticate`` value (RFC 7235) into its challenges, in order.

    ``Bearer realm="https://a/token",service="reg",scope="repository:x:pull,push"`` ->
    ``[Challenge("bearer", {"realm": …, "service": "reg", "scope": "repository:x:pull,push"})]``.
    Several challenges in one header (``Basic realm="x", Bearer realm="y"``) give several
    entries. Parameter names are lower-cased; quoted values are unquoted. Garbage yields
    whatever could be parsed, never an exception.
    """
    out: list[Challenge] = []
    if not header:
        return out
    s = header
    i = 0
    current: Challenge | None = None
    while i < len(s):
        while i < len(s) and s[i] in " \t,":
            i += 1
        if i >= len(s):
            break
        m = _PARAM.match(s, i)
        if m and current is not None:
            name, value = m.group(1).lower(), m.group(2)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            current.params[name] = value
            i = m.end()
            continue
        m = _SCHEME.match(s, i)
        if not m:
            break
        current = Challenge(m.group(1).lower(), {})
        out.append(current)
        i = m.end()
        # token68 form (``Negotiate abc==``) carries no params we use: skip it
        m68 = _TOKEN68.match(s, i)
        if m68:
            i = m68.end()
    return out


def basic_header(cred: BasicCredential) -> str:
    raw = f"{cred.username}:{cred.password}".encode()
    return "Basic " + base64.b64encode(raw).decode("ascii")


@dataclass
class _Token:
    value: str
    expires: float


class TokenCache:
    """Bearer tokens by (host, scope), dropped a little before they expire."""

    def __init__(self, clock=time.monotonic) -> None:
        self._tokens: dict[tuple[str, str], _Token] = {}
        self._clock = clock

    def get(self, host: str, scope: str) -> str | None:
        t = self._tokens.get((host, scope))
        if t is None:
            return None
        if t.expires <= self._clock():
            del self._tokens[(host, scope)]
            return None
        return t.value

    def put(self, host: str, scope: str, token: str, expires_in: float | None) -> None:
        # the distribution spec default lifetime is 60 s; keep a margin
        life = max(float(expires_in or 60) - 10.0, 5.0)
        self._tokens[(host, scope)] = _Token(token, self._clock() + life)

    def drop(self, host: str, scope: str) -> None:
        self._tokens.pop((host, scope), None)
