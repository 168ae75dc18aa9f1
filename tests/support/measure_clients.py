"""Measure a warm fetch of the fixture component with each candidate OCI client.

Not a test: ``.venv/bin/python tests/support/measure_clients.py`` (needs docker-registry;
oras, gardener-oci and aiohttp only for their rows). One "fetch" = what ``OciSource.get``
plus two ``blob`` calls need: the tag (index), the descriptor manifest, the component
config, the descriptor layer, the chart manifest (``/manifests/``) and the ConfigData blob.
Every client is warmed up first (connections open, tokens fetched); the figure is the
median of N rounds. Results go to stdout as a Markdown table.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve()
sys.path[:0] = [str(HERE.parents[1]), str(HERE.parents[2])]

from function.cache import Cache
from function.ocm.layout import ACCEPT_MANIFESTS
from function.ocm.model import Repository
from function.ocm.oci import AllowedHost, OciSource, RegistryAccess
from support.registry import RegistryServer

FIXTURES = HERE.parents[3] / "shared/fixtures/ocm-cli-v0.9.1"
COMPONENT = "acme.org/sack8s/podinfo"
REPO = f"source/component-descriptors/{COMPONENT}"
CHART = "sha256:d3db565bb38f9b1e65f95416ccdd7582911e79a57a5007ffb5f80a4b1d47d315"
CONFIGDATA = "sha256:29f6125ecdc4a1ed3635c8a12497221b3d5fc27e8b4d6a73231db6765d395051"
ROUNDS = 200


def ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.2f} ms (p90 {sorted(samples)[int(len(samples) * 0.9)] * 1000:.2f})"


def walk(get_manifest, get_blob) -> None:
    index = json.loads(get_manifest("6.2.0"))
    child = next(
        m for m in index["manifests"] if m.get("artifactType", "").startswith("application/vnd.ocm")
    )
    dm = json.loads(get_manifest(child["digest"]))
    cfg = json.loads(get_blob(dm["config"]["digest"]))
    get_blob(cfg["componentDescriptorLayer"]["digest"])
    get_manifest(CHART)
    get_blob(CONFIGDATA)


async def awalk(get_manifest, get_blob) -> None:
    index = json.loads(await get_manifest("6.2.0"))
    child = next(
        m for m in index["manifests"] if m.get("artifactType", "").startswith("application/vnd.ocm")
    )
    dm = json.loads(await get_manifest(child["digest"]))
    cfg = json.loads(await get_blob(dm["config"]["digest"]))
    await get_blob(cfg["componentDescriptorLayer"]["digest"])
    await get_manifest(CHART)
    await get_blob(CONFIGDATA)


def timed(fn, rounds=ROUNDS) -> list[float]:
    fn()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


async def atimed(fn, rounds=ROUNDS) -> list[float]:
    await fn()
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t)
    return out


def main() -> None:
    import os

    from support.tlsca import make_pki

    work = Path(tempfile.mkdtemp())
    pki = make_pki(work / "pki")
    # the libraries under test trust the CA only through the process-wide defaults
    os.environ["SSL_CERT_FILE"] = str(pki.ca_file)
    os.environ["REQUESTS_CA_BUNDLE"] = str(pki.ca_file)
    tables = []
    for tls in (False, True):
        reg = RegistryServer(
            "docker-registry",
            work / f"reg-{tls}",
            storage=FIXTURES / "registry",
            **(
                {"tls_cert": pki.cert_file, "tls_key": pki.key_file, "ca_file": pki.ca_file}
                if tls
                else {}
            ),
        ).start()
        try:
            tables.append((tls, measure(reg.host, tls, pki)))
        finally:
            reg.stop()
    for tls, rows in tables:
        print(f"\n{'HTTPS (private CA)' if tls else 'plain HTTP'}, loopback, distribution 2.8.2\n")
        print(f"| client | warm fetch, median of {ROUNDS} |\n|---|---|")
        for name, value in rows:
            print(f"| {name} | {value} |")


def measure(host: str, tls: bool, pki) -> list[tuple[str, str]]:
    """Build one fetch callable per client, then run them interleaved (round-robin), so the
    load of a shared machine hits every client alike."""
    scheme = "https" if tls else "http"
    rows: list[tuple[str, str]] = []
    access = RegistryAccess.build(
        [AllowedHost(host, plain_http=not tls, ca_bundle=pki.ca_pem if tls else None)]
    )
    repo = Repository(host, "source", plain_http=not tls)
    ref = f"{host}/{REPO}"

    async def run() -> None:
        candidates: list[tuple[str, object]] = []  # (name, callable: sync or async)
        closers = []

        cold = OciSource(repo, access, Cache(max_bytes=0, ttl=0))
        hot = OciSource(repo, access, Cache())
        closers += [cold.aclose, hot.aclose]

        def ours(src: OciSource, clear: bool):
            async def one() -> None:
                if clear:
                    src.cache.clear()
                cv = await src.get(COMPONENT, "6.2.0")
                await src.blob(cv, CHART, "application/vnd.oci.image.manifest.v1+json")
                await src.blob(cv, CONFIGDATA, "application/yaml")

            return one

        candidates.append(
            (
                "function.ocm.oci (httpx async), no cache: get + 2 blobs, parsed + verified",
                ours(cold, True),
            )
        )
        candidates.append(
            ("function.ocm.oci (httpx async), cache warm (the hot path)", ours(hot, False))
        )

        try:
            import oras
            import oras.provider

            r = oras.provider.Registry(
                host, insecure=not tls, tls_verify=str(pki.ca_file) if tls else True
            )
            base = f"{scheme}://{host}/v2/{REPO}"

            def om(x: str) -> bytes:
                resp = r.do_request(
                    f"{base}/manifests/{x}", "GET", headers={"Accept": ACCEPT_MANIFESTS}
                )
                resp.raise_for_status()
                return resp.content

            def ob(d: str) -> bytes:
                resp = r.do_request(f"{base}/blobs/{d}", "GET")
                resp.raise_for_status()
                return resp.content

            candidates.append(
                ("oras 0.2.43 (requests, sync): the same 6 GETs, raw", lambda: walk(om, ob))
            )
        except ImportError as exc:
            rows.append(("oras", f"not installed ({exc.name})"))

        try:
            import oci.client

            routes = oci.client.OciRoutes(
                base_api_url_lookup=lambda image_reference: f"{scheme}://{host}/v2/"
            )
            c = oci.client.Client(routes=routes, max_retries=0)

            def gm(x: str) -> bytes:
                sep = "@" if x.startswith("sha256:") else ":"
                return c.manifest_raw(f"{ref}{sep}{x}", accept=ACCEPT_MANIFESTS).content

            def gb(d: str) -> bytes:
                return c.blob(ref, d).content

            candidates.append(
                (
                    "gardener-oci 1.2863.0 (requests, sync): the same 6 GETs, raw",
                    lambda: walk(gm, gb),
                )
            )
            try:
                import aiohttp
                import oci.client_async

                ac = oci.client_async.Client(routes=routes)
                closers.append(ac.session.close)

                async def agm(x: str) -> bytes:
                    sep = "@" if x.startswith("sha256:") else ":"
                    return await (
                        await ac.manifest_raw(f"{ref}{sep}{x}", accept=ACCEPT_MANIFESTS)
                    ).read()

                async def agb(d: str) -> bytes:
                    return await (await ac.blob(ref, d)).read()

                candidates.append(
                    (
                        "gardener-oci 1.2863.0 async (aiohttp): the same 6 GETs, raw",
                        lambda: awalk(agm, agb),
                    )
                )
            except ImportError as exc:
                rows.append(("gardener-oci async", f"not usable ({exc.name} missing)"))
        except ImportError as exc:
            rows.append(("gardener-oci", f"not installed ({exc.name})"))

        async def call(fn) -> None:
            res = fn()
            if asyncio.iscoroutine(res):
                await res

        samples: dict[str, list[float]] = {}
        working = []
        for name, fn in candidates:  # warm up: connections, tokens; drop what cannot work
            try:
                await call(fn)
                await call(fn)
                working.append((name, fn))
                samples[name] = []
            except Exception as exc:
                rows.append((name.split(":")[0], f"fails: {type(exc).__name__}: {str(exc)[:90]}"))
        for i in range(ROUNDS):
            order = working if i % 2 == 0 else list(reversed(working))
            for name, fn in order:
                t = time.perf_counter()
                await call(fn)
                samples[name].append(time.perf_counter() - t)
        for name, _ in working:
            rows.insert(len([r for r in rows if r[0] in samples]), (name, ms(samples[name])))
        for close in closers:
            await close()

    asyncio.run(run())
    return rows


if __name__ == "__main__":
    main()
