"""Packages import each other only in the direction docs/DESIGN.md §3 draws.

Every .py file of the packages is parsed with `ast` (nothing is imported, so a broken module still gets checked);
each `import` and `from ... import` names a module of ours, relative imports resolved, imports under
`TYPE_CHECKING` and inside functions included: a dependency is a dependency wherever it is written.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent

# Every package of ours, bottom of the graph first (docs/DESIGN.md §2).
PACKAGES = ("runtime", "zkraft_proto", "quorum", "zkemu", "client", "broker", "spark_connector", "zkraft")

# What each package may import of the others (docs/DESIGN.md §3). A package may always import itself; an entry
# allows that module and everything below it.
MAY_IMPORT: dict[str, tuple[str, ...]] = {
    "runtime": (),
    "zkraft_proto": (),
    "quorum": ("runtime", "zkraft_proto"),
    # The facade is all zkemu knows of the quorum; the ZooKeeper client's wire codec is the contract zkemu's
    # front ends share with the SDK, as ZooKeeper's server and client share zookeeper-jute.
    "zkemu": ("quorum.facade", "client.zk", "runtime", "zkraft_proto"),
    "client": ("runtime", "zkraft_proto"),
    # A broker reaches the quorum through the ZooKeeper client, as a Kafka broker reaches ZooKeeper.
    "broker": ("client", "runtime", "zkraft_proto"),
    "spark_connector": ("client", "runtime", "zkraft_proto"),
    "zkraft": ("runtime", "zkraft_proto", "quorum", "zkemu", "client", "broker", "spark_connector"),
}

# Folders inside a package held to a narrower rule: (folder, what it may import of ours outside itself,
# modules it must not import even inside its package).
NARROWER: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    # The Raft core is pure (docs/STYLE.md 1): it imports nothing of ours but itself.
    ("quorum/raft", (), ("quorum",)),
    # What a ZooKeeper user imports does not pull in the Kafka SDK.
    ("client/zk", ("runtime", "zkraft_proto"), ("client.kafka",)),
)


class Edge(NamedTuple):
    """One import statement: the importing file (relative to the root, with `/`) and the module it names."""

    file: str
    module: str


@functools.cache
def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _absolute(file: Path, node: ast.ImportFrom) -> str:
    """The module a `from` import names, a relative one resolved against the importing file's package."""
    if node.level == 0:
        return node.module or ""
    package = file.relative_to(ROOT).with_suffix("").parts[:-1]
    if file.name == "__init__.py":
        package = file.relative_to(ROOT).parts[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imported_modules(file: Path) -> list[str]:
    """Every module of ours one file imports: `from a import b` names `a.b` when b is a module, else `a`."""
    modules = []
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"), filename=str(file))):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(file, node)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                modules.append(candidate if _is_module(candidate) else base)
    return [module for module in modules if module.split(".")[0] in PACKAGES]


@functools.cache
def _edges() -> tuple[tuple[Edge, int], ...]:
    """(edge, count) for every distinct (file, module) import in the packages."""
    counts: dict[Edge, int] = {}
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            relative = file.relative_to(ROOT).as_posix()
            for module in _imported_modules(file):
                edge = Edge(relative, module)
                counts[edge] = counts.get(edge, 0) + 1
    return tuple(sorted(counts.items()))


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def _violation(edge: Edge) -> str | None:
    """Why an import goes against the map, or None when it goes with it."""
    own = edge.file.split("/")[0]
    for folder, allowed, forbidden in NARROWER:
        if edge.file.startswith(folder + "/"):
            inside = _under(edge.module, (folder.replace("/", "."),))
            if _under(edge.module, forbidden) and not inside:
                return f"{folder}/ must not import {edge.module}"
            if not inside and edge.module.split(".")[0] != own and not _under(edge.module, allowed):
                return f"{folder}/ may import of ours only {', '.join(allowed) or 'itself'}"
    if edge.module.split(".")[0] == own or _under(edge.module, MAY_IMPORT[own]):
        return None
    return f"{own} may import of ours only {', '.join(MAY_IMPORT[own]) or 'itself'}"


def test_every_package_is_mapped() -> None:
    """A new top-level package gets a line in the map (and in MAY_IMPORT) before it gets code."""
    ours = {
        path.parent.name
        for path in ROOT.glob("*/__init__.py")
        if path.parent.name not in {"tests", "bench", "scripts", "examples", "docs"}
    }
    assert ours <= set(PACKAGES), (
        f"packages missing from docs/DESIGN.md §3 and this test: {sorted(ours - set(PACKAGES))}"
    )
    assert set(MAY_IMPORT) == set(PACKAGES)


def test_imports_follow_the_map() -> None:
    against = []
    for edge, _count in _edges():
        reason = _violation(edge)
        if reason is not None:
            against.append(f"{edge.file} imports {edge.module}: {reason}")
    assert not against, "imports against docs/DESIGN.md §3:\n" + "\n".join(against)


def test_protobuf_messages_only_in_the_client_codecs() -> None:
    """STYLE 8: in the SDK, `*_pb2` messages are built and read only by its package's codec module
    (`client/zk/codec.py`, `client/kafka/codec.py`); the gRPC stub modules (`*_pb2_grpc`) may be wired elsewhere."""
    against = [
        f"{edge.file} imports {edge.module}"
        for edge, _count in _edges()
        if edge.file.startswith("client/")
        and not edge.file.endswith("/codec.py")
        and edge.module.startswith("zkraft_proto.")
        and edge.module.endswith("_pb2")
    ]
    assert not against, "protobuf messages outside the client codecs:\n" + "\n".join(against)
