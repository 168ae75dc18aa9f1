"""The size of real component content, to size the budgets (docs/security.md).

``python tests/support/content_sizes.py examples $SACK8S_SHARED/fixtures`` prints the largest
YAML/JSON documents (nodes, nesting, bytes) among the files under the given directories,
gzip'd tar members (charts) included, and the schema steps the example ConfigData takes.
"""

from __future__ import annotations

import gzip
import io
import sys
import tarfile
from pathlib import Path

from ruamel.yaml.nodes import MappingNode, SequenceNode

from function.yamlio import compose_all

REPO = Path(__file__).resolve().parents[2]


def shape(node: object) -> tuple[int, int]:
    count, deepest, stack = 0, 0, [(node, 1)]
    while stack:
        x, depth = stack.pop()
        count, deepest = count + 1, max(deepest, depth)
        if isinstance(x, MappingNode):
            stack += [(y, depth + 1) for kv in x.value for y in kv]
        elif isinstance(x, SequenceNode):
            stack += [(y, depth + 1) for y in x.value]
    return count, deepest


def documents(root: Path):
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.stat().st_size > 8 << 20:
            continue
        data = p.read_bytes()
        if data[:2] == b"\x1f\x8b":
            try:
                with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
                    for m in tar.getmembers():
                        if m.isfile() and m.name.endswith((".yaml", ".yml", ".json")):
                            yield f"{p}:{m.name}", tar.extractfile(m).read()
            except (OSError, tarfile.TarError, EOFError):
                pass
        elif p.suffix in (".yaml", ".yml", ".json") or data.lstrip()[:1] in (b"{", b"["):
            yield str(p), data


def main(roots: list[str]) -> None:
    found = []
    for root in roots:
        for name, data in documents(Path(root)):
            try:
                nodes, _ = compose_all(data.decode("utf-8"), name)
            except Exception:  # noqa: S112 - not YAML, or refused: not a real document
                continue
            shapes = [shape(n) for n in nodes if n is not None]
            if shapes:
                found.append(
                    (sum(c for c, _ in shapes), max(d for _, d in shapes), len(data), name)
                )
    found.sort(reverse=True)
    print(f"{len(found)} documents; largest (nodes, depth, bytes, file):")
    for row in found[:5]:
        print(" ", row)
    print("deepest:", max(found, key=lambda r: r[1]))

    sys.path[:0] = [str(REPO / "tests")]
    from function.configdata import schemabudget
    from function.configdata.configure import configure
    from function.configdata.model import parse_configdata
    from support import example_component

    used: list[int] = []
    exit_budget = schemabudget.Budget.__exit__

    def counting_exit(self: schemabudget.Budget, *exc: object) -> None:
        used.append(self.steps - schemabudget._steps.get()[0])
        exit_budget(self, *exc)

    schemabudget.Budget.__exit__ = counting_exit  # type: ignore[method-assign]
    cd = parse_configdata(example_component.version().path("config").read_bytes())
    configure(cd, {"replicas": 3, "message": "hi"})
    print("schema steps per validation of the example's values:", used)


if __name__ == "__main__":
    main(sys.argv[1:] or [str(REPO / "examples")])
