"""A loopback HTTP/1.1 proxy in front of a real registry that injects faults on demand.

Runs its own asyncio loop in a daemon thread, so synchronous and async tests can use it.
Each client connection carries one request (the proxy answers ``Connection: close``); the
request is forwarded to the upstream registry unless a fault says otherwise. It counts
every request (``requests``) so cache tests can assert "no registry call".

Faults (``proxy.fault(kind, when=predicate)``; ``when(method, path)`` selects requests):

``reset``     close the client connection with a TCP RST, no response
``stall``     accept the request and say nothing for ``stall_seconds``
``500``       answer 500 with a body containing :data:`MARKER`
``401``/``403`` answer that status with a :data:`MARKER` body
``truncate``  forward, then send the headers and only half of the body, and close
``corrupt``   forward, then flip one byte in the body
``redirect``  answer 307 to ``redirect_to`` (default ``http://169.254.169.254/...``)
``chunked``   forward, but send the body chunked, without Content-Length

``token_auth=(user, password)`` emulates the Docker bearer-token flow in front of an
open registry: requests without the current bearer token get 401 with
``WWW-Authenticate: Bearer realm="http://<proxy>/token",service=…,scope=…``; ``/token``
hands out a token only for the right basic credentials.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

MARKER = "SACK8S-FAULT-BODY-MARKER-7f3a"


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class FaultProxy:
    upstream_host: str
    upstream_port: int
    port: int = 0
    stall_seconds: float = 5.0
    redirect_to: str = "http://169.254.169.254/latest/meta-data/"
    token_auth: tuple[str, str] | None = None
    requests: list[Seen] = field(default_factory=list)
    _fault: str | None = None
    _when: Callable[[str, str], bool] | None = None
    _token: str = field(default_factory=lambda: secrets.token_hex(16))

    # -- control ---------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def fault(self, kind: str | None, when: Callable[[str, str], bool] | None = None) -> None:
        self._fault, self._when = kind, when

    def clear(self) -> None:
        self._fault, self._when = None, None
        self.requests.clear()

    def start(self) -> FaultProxy:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self._loop)

            async def boot() -> None:
                self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
                self.port = self._server.sockets[0].getsockname()[1]
                ready.set()

            self._loop.run_until_complete(boot())
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="faultproxy", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fault proxy did not start")
        return self

    def stop(self) -> None:
        async def shutdown() -> None:
            self._server.close()
            me = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not me]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._server.wait_closed()

        fut = asyncio.run_coroutine_threadsafe(shutdown(), self._loop)
        with contextlib.suppress(TimeoutError, RuntimeError, OSError):
            fut.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    # -- serving ---------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve_one(reader, writer)
        except (
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            asyncio.CancelledError,
        ):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        body = b""
        if (
            headers.get("content-length", "0").isdigit()
            and int(headers.get("content-length", "0")) > 0
        ):
            body = await reader.readexactly(int(headers["content-length"]))
        self.requests.append(Seen(method, target, dict(headers)))

        if self.token_auth is not None:
            if urlsplit(target).path == "/token":
                await self._token_endpoint(target, headers, writer)
                return
            if headers.get("authorization") != f"Bearer {self._token}":
                repo = urlsplit(target).path.split("/v2/", 1)[-1].rsplit("/", 2)[0]
                challenge = (
                    f'Bearer realm="http://{self.host}/token",service="sack8s-test",'
                    f'scope="repository:{repo}:pull"'
                )
                await self._respond(
                    writer,
                    401,
                    b'{"errors":[{"code":"UNAUTHORIZED"}]}',
                    {"WWW-Authenticate": challenge},
                )
                return
            headers.pop("authorization", None)

        fault = self._fault if (self._when is None or self._when(method, target)) else None
        if fault == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        if fault == "stall":
            await asyncio.sleep(self.stall_seconds)
            return
        if fault in ("500", "401", "403"):
            extra = {"WWW-Authenticate": 'Basic realm="fault"'} if fault == "401" else {}
            await self._respond(writer, int(fault), f"{MARKER} internal detail".encode(), extra)
            return
        if fault == "redirect":
            await self._respond(writer, 307, MARKER.encode(), {"Location": self.redirect_to})
            return

        status_line, resp_headers, resp_body = await self._forward(method, target, headers, body)
        if fault == "corrupt" and resp_body:
            i = len(resp_body) // 2
            resp_body = resp_body[:i] + bytes([resp_body[i] ^ 0xFF]) + resp_body[i + 1 :]
        out = [status_line]
        for k, v in resp_headers:
            if k.lower() in ("connection", "keep-alive", "transfer-encoding", "content-length"):
                continue
            out.append(f"{k}: {v}")
        if fault == "chunked":
            out.append("Transfer-Encoding: chunked")
        else:
            out.append(f"Content-Length: {len(resp_body)}")
        out.append("Connection: close")
        writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
        if fault == "chunked":
            for i in range(0, len(resp_body), 64):
                piece = resp_body[i : i + 64]
                writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return
        if fault == "truncate":
            writer.write(resp_body[: len(resp_body) // 2])
            await writer.drain()
            writer.transport.abort()
            return
        writer.write(resp_body)
        await writer.drain()

    async def _forward(self, method: str, target: str, headers: dict[str, str], body: bytes):
        r, w = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        try:
            req = [
                f"{method} {target} HTTP/1.1",
                f"Host: {self.upstream_host}:{self.upstream_port}",
            ]
            for k, v in headers.items():
                if k in ("host", "connection", "keep-alive"):
                    continue
                req.append(f"{k}: {v}")
            req.append("Connection: close")
            w.write(("\r\n".join(req) + "\r\n\r\n").encode("latin-1") + body)
            await w.drain()
            raw = await r.read()
        finally:
            w.close()
        head, _, rest = raw.partition(b"\r\n\r\n")
        hl = head.decode("latin-1").split("\r\n")
        hdrs = [tuple(x.strip() for x in line.split(":", 1)) for line in hl[1:] if ":" in line]
        if any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in hdrs):
            rest = _dechunk(rest)
        return hl[0], hdrs, rest

    async def _token_endpoint(
        self, target: str, headers: dict[str, str], writer: asyncio.StreamWriter
    ) -> None:
        assert self.token_auth is not None
        user, pw = self.token_auth
        want = "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()
        q = parse_qs(urlsplit(target).query)
        if headers.get("authorization") != want or "scope" not in q:
            await self._respond(writer, 401, f'{{"details":"{MARKER}"}}'.encode(), {})
            return
        body = f'{{"token":"{self._token}","expires_in":300}}'.encode()
        await self._respond(writer, 200, body, {"Content-Type": "application/json"})

    @staticmethod
    async def _respond(
        writer: asyncio.StreamWriter, status: int, body: bytes, extra: dict[str, str]
    ) -> None:
        reason = {
            200: "OK",
            307: "Temporary Redirect",
            401: "Unauthorized",
            403: "Forbidden",
            500: "Internal Server Error",
        }
        lines = [
            f"HTTP/1.1 {status} {reason.get(status, 'X')}",
            f"Content-Length: {len(body)}",
            "Connection: close",
        ]
        lines += [f"{k}: {v}" for k, v in extra.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return bytes(out)
