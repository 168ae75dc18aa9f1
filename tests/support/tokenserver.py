"""A minimal Docker token service for distribution's ``auth: token`` on loopback.

Issues ES256 JWTs (header ``kid`` = libtrust key ID of the signing key, which distribution
looks up among the public keys of its ``rootcertbundle``) for HTTP-basic-authenticated
requests, granting exactly the requested ``repository:<name>:<actions>`` scopes.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

ISSUER = "sack8s-test-issuer"
SERVICE = "sack8s-test-registry"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def libtrust_key_id(public_key) -> str:
    der = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    b32 = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode()
    return ":".join(b32[i : i + 4] for i in range(0, len(b32), 4))


class TokenServer:
    def __init__(self, workdir: Path, user: str, password: str) -> None:
        self.user, self.password = user, password
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.kid = libtrust_key_id(self.key.public_key())
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sack8s token signer")])
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(self.key, hashes.SHA256())
        )
        workdir.mkdir(parents=True, exist_ok=True)
        self.bundle = workdir / "token-signer.pem"
        self.bundle.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.requests: list[str] = []
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def realm(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/token"

    @property
    def host(self) -> str:
        assert self._httpd is not None
        return f"127.0.0.1:{self._httpd.server_address[1]}"

    def issue(self, scopes: list[str]) -> str:
        access = []
        for scope in scopes:
            parts = scope.split(":")
            if len(parts) >= 3 and parts[0] == "repository":
                access.append(
                    {
                        "type": "repository",
                        "name": ":".join(parts[1:-1]),
                        "actions": parts[-1].split(","),
                    }
                )
        now = int(time.time())
        claims = {
            "iss": ISSUER,
            "sub": self.user,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        header = {"typ": "JWT", "alg": "ES256", "kid": self.kid}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(
            self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        )
        return f"{signing_input}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def start(self) -> TokenServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                server.requests.append(self.path)
                want = (
                    "Basic "
                    + base64.b64encode(f"{server.user}:{server.password}".encode()).decode()
                )
                q = parse_qs(urlsplit(self.path).query)
                if self.headers.get("Authorization") != want or q.get("service") != [SERVICE]:
                    self._send(401, b'{"details":"SACK8S-FAULT-BODY-MARKER-7f3a"}')
                    return
                tok = server.issue(q.get("scope", []))
                self._send(200, json.dumps({"token": tok, "expires_in": 300}).encode())

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, name="tokenserver", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
