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


def _rewrite(dest: Path, version: str, edit) -> Path:
    """Copy the bundled CTF to ``dest`` and rewrite ``version``'s descriptor with ``edit``.

    ``edit(ctf, descriptor)`` changes the descriptor in place and returns ``{old digest: (new
    digest, size)}`` for any blob it replaced; the chain above it is re-hashed here.
    """
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
    new: dict[str, tuple[str, int]] = dict(edit(dest, descriptor))
    new[old_desc] = _put(dest, json.dumps(descriptor, separators=(",", ":")).encode())
    old_cfg = manifest["config"]["digest"]
    new[old_cfg] = _put(dest, json.dumps(_swap(config, new), separators=(",", ":")).encode())
    new[child["digest"]] = _put(
        dest, json.dumps(_swap(manifest, new), separators=(",", ":")).encode()
    )
    new_top = _put(dest, json.dumps(_swap(top, new), separators=(",", ":")).encode())
    entry["digest"] = new_top[0]
    for art in index["artifacts"]:  # the index's children are listed too (what a push sends)
        if art["digest"] in new:
            art["digest"] = new[art["digest"]][0]
    index_file.write_text(json.dumps(index))
    return dest


def _resource(descriptor: dict[str, Any], name: str) -> dict[str, Any]:
    (res,) = [r for r in descriptor["component"]["resources"] if r["name"] == name]
    return res


def with_configdata(
    dest: Path, configdata: str, version: str = "6.2.0", resource: str = "config"
) -> Path:
    """``dest``: a copy of the bundled CTF whose ``version`` ships ``configdata`` as ConfigData."""

    def edit(ctf: Path, descriptor: dict[str, Any]) -> dict[str, tuple[str, int]]:
        res = _resource(descriptor, resource)
        old_cd = res["access"]["localReference"]
        new_cd = _put(ctf, configdata.encode())
        res["access"]["localReference"] = new_cd[0]
        res["digest"]["value"] = new_cd[0].split(":", 1)[1]
        return {old_cd: new_cd}

    return _rewrite(dest, version, edit)


def with_access(
    dest: Path,
    access: dict[str, Any],
    digest: dict[str, Any] | None,
    version: str = "6.2.0",
    resource: str = "image",
) -> Path:
    """``dest``: a copy of the bundled CTF whose ``version`` has ``resource`` with another access
    (and resource digest), e.g. the image as one of the OCM CLI's transfer modes wrote it. Only
    the descriptor changes: what the access names is not copied in.
    """

    def edit(ctf: Path, descriptor: dict[str, Any]) -> dict[str, tuple[str, int]]:
        res = _resource(descriptor, resource)
        res["access"] = dict(access)
        if digest is None:
            res.pop("digest", None)
        else:
            res["digest"] = dict(digest)
        return {}

    return _rewrite(dest, version, edit)


def rewritten(dest: Path, edit, version: str = "6.2.0") -> Path:
    """``dest``: a copy of the bundled CTF whose ``version`` is changed by ``edit(ctf,
    descriptor)``, which edits the descriptor in place, may write new blobs, and returns
    ``{old digest: (new digest, size)}`` for the blobs it replaced (layers of the descriptor
    manifest, children of the index); everything above is re-hashed.
    """
    return _rewrite(dest, version, edit)


def with_descriptor(dest: Path, edit, version: str = "6.2.0") -> Path:
    """``dest``: a copy of the bundled CTF whose ``version``'s descriptor ``edit(descriptor)``
    changed in place (signed, tampered with); the blobs it names stay as they are.
    """

    def change(ctf: Path, descriptor: dict[str, Any]) -> dict[str, tuple[str, int]]:
        edit(descriptor)
        return {}

    return _rewrite(dest, version, change)


def bundled_descriptor(version: str = "6.2.0", ctf: Path = CTF) -> dict[str, Any]:
    """The descriptor of ``version`` in ``ctf`` (the bundled one by default), as stored."""
    index = json.loads((ctf / "artifact-index.json").read_text())
    (entry,) = [a for a in index["artifacts"] if a.get("tag") == version]
    (child,) = [m for m in _get(ctf, entry["digest"])["manifests"] if m.get("artifactType")]
    config = _get(ctf, _get(ctf, child["digest"])["config"]["digest"])
    return _get(ctf, config["componentDescriptorLayer"]["digest"])


def bundled_configdata(version: str = "6.2.0") -> str:
    """The bundled component's ConfigData text (the same for both versions), found by walking
    the CTF (its digests change whenever make-component.py rebuilds it).
    """
    index = json.loads((CTF / "artifact-index.json").read_text())
    (entry,) = [a for a in index["artifacts"] if a.get("tag") == version]
    (child,) = [m for m in _get(CTF, entry["digest"])["manifests"] if m.get("artifactType")]
    config = _get(CTF, _get(CTF, child["digest"])["config"]["digest"])
    descriptor = _get(CTF, config["componentDescriptorLayer"]["digest"])
    ref = _resource(descriptor, "config")["access"]["localReference"]
    return (CTF / "blobs" / f"sha256.{ref.split(':', 1)[1]}").read_text()
