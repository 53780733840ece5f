"""zkemu meets quorum at one facade (quorum.facade, issue 28): no zkemu module imports another quorum module.

The check is static (ast), so it covers code paths no test runs, imports
inside functions and under `if TYPE_CHECKING:` included: a type named from
the node's internals couples zkemu to them as much as a call does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import quorum.facade

REPO_ROOT = Path(__file__).resolve().parent.parent
ZKEMU_DIR = REPO_ROOT / "zkemu"
FACADE = "quorum.facade"


def _quorum_imports(tree: ast.AST) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """(line, module, names) of every import of the quorum package or one of its modules."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "quorum" or alias.name.startswith("quorum."):
                    yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == "quorum" or node.module.startswith("quorum."):
                yield node.lineno, node.module, tuple(alias.name for alias in node.names)


def _violations(source: str, filename: str) -> list[str]:
    found = []
    for line, module, names in _quorum_imports(ast.parse(source, filename)):
        if module == FACADE or (module == "quorum" and names == ("facade",)):
            continue
        what = f"from {module} import {', '.join(names)}" if names else f"import {module}"
        found.append(f"{filename}:{line}: {what} (zkemu imports only {FACADE})")
    return found


def _zkemu_files() -> list[Path]:
    return sorted(ZKEMU_DIR.rglob("*.py"))


def test_zkemu_imports_nothing_of_quorum_but_the_facade() -> None:
    files = _zkemu_files()
    assert len(files) > 10, f"found only {len(files)} zkemu modules under {ZKEMU_DIR}"
    violations = [v for path in files for v in _violations(path.read_text(), str(path.relative_to(REPO_ROOT)))]
    assert not violations, "\n".join(violations)


def test_every_name_zkemu_takes_from_the_facade_is_one_it_exports() -> None:
    exported = set(quorum.facade.__all__)
    missing = []
    for path in _zkemu_files():
        for line, module, names in _quorum_imports(ast.parse(path.read_text(), str(path))):
            if module == FACADE:
                missing += [f"{path.name}:{line}: {name}" for name in names if name not in exported]
    assert not missing, "names not in quorum.facade.__all__:\n" + "\n".join(missing)
    assert all(hasattr(quorum.facade, name) for name in exported)


def test_the_check_sees_each_way_of_reaching_past_the_facade() -> None:
    source = """
import quorum
import quorum.node as qn
from quorum import errors
from quorum.raft.types import Entry

def late():
    from quorum.transport import GRPC_OPTIONS

from quorum import facade
from quorum.facade import QuorumFacade
"""
    violations = _violations(source, "example.py")
    assert [v.split(": ", 1)[1] for v in violations] == [
        "import quorum (zkemu imports only quorum.facade)",
        "import quorum.node (zkemu imports only quorum.facade)",
        "from quorum import errors (zkemu imports only quorum.facade)",
        "from quorum.raft.types import Entry (zkemu imports only quorum.facade)",
        "from quorum.transport import GRPC_OPTIONS (zkemu imports only quorum.facade)",
    ]
