"""A copy of the bundled CTF with another ConfigData, re-hashed the way the OCM CLI stores it.

Every object in a CTF is content-addressed, so changing the ConfigData blob changes the
descriptor that names it, the descriptor manifest that lists both as layers, its config, the
index and the tag in ``artifact-index.json``. This walks that chain for one version and
rewrites each object, so the real CTF reader (digest checks included) reads the new file.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

CTF = Path(__file__).resolve().parents[2] / "examples" / "component" / "ctf"
COMPONENT = "acme.org/sack8s/podinfo"


def _put(ctf: Path, data: bytes) -> tuple[str, int]:
    hexd = hashlib.sha256(data).hexdigest()
    (ctf / "blobs" / f"sha256.{hexd}").write_bytes(data)
    return f"sha256:{hexd}", len(data)


def _get(ctf: Path, digest: str) -> Any:
    return json.loads((ctf / "blobs" / f"sha256.{digest.split(':', 1)[1]}").read_bytes())


def _swap(obj: Any, new: dict[str, tuple[str, int]]) -> Any:
    """Replace every ``{digest, size}`` pair (and bare digests) found in ``new``."""
    if isinstance(obj, dict):
        out = {k: _swap(v, new) for k, v in obj.items()}
        d = obj.get("digest")
        if isinstance(d, str) and d in new:
            out["digest"], size = new[d]
            if "size" in obj:
                out["size"] = size
        return out
    if isinstance(obj, list):
        return [_swap(v, new) for v in obj]
    if isinstance(obj, str) and obj in new:
        return new[obj][0]
    return obj


def with_configdata(
    dest: Path, configdata: str, version: str = "6.2.0", resource: str = "config"
) -> Path:
    """``dest``: a copy of the bundled CTF whose ``version`` ships ``configdata`` as ConfigData."""
    shutil.copytree(CTF, dest)
    index_file = dest / "artifact-index.json"
    index = json.loads(index_file.read_text())
    (entry,) = [a for a in index["artifacts"] if a.get("tag") == version]
    top = _get(dest, entry["digest"])
    (child,) = [m for m in top["manifests"] if m.get("artifactType")]
    manifest = _get(dest, child["digest"])
    config = _get(dest, manifest["config"]["digest"])
    old_desc = config["componentDescriptorLayer"]["digest"]
    descriptor = _get(dest, old_desc)
    (res,) = [r for r in descriptor["component"]["resources"] if r["name"] == resource]
    old_cd = res["access"]["localReference"]
    new_cd = _put(dest, configdata.encode())
    res["access"]["localReference"] = new_cd[0]
    res["digest"]["value"] = new_cd[0].split(":", 1)[1]
    new: dict[str, tuple[str, int]] = {old_cd: new_cd}
    new[old_desc] = _put(dest, json.dumps(descriptor, separators=(",", ":")).encode())
    old_cfg = manifest["config"]["digest"]
    new[old_cfg] = _put(dest, json.dumps(_swap(config, new), separators=(",", ":")).encode())
    new[child["digest"]] = _put(
        dest, json.dumps(_swap(manifest, new), separators=(",", ":")).encode()
    )
    new_top = _put(dest, json.dumps(_swap(top, new), separators=(",", ":")).encode())
    entry["digest"] = new_top[0]
    index_file.write_text(json.dumps(index))
    return dest


def bundled_configdata() -> str:
    """The bundled component's ConfigData text (the same for both versions)."""
    return (
        CTF / "blobs" / "sha256.29f6125ecdc4a1ed3635c8a12497221b3d5fc27e8b4d6a73231db6765d395051"
    ).read_text()
