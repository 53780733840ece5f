"""The Raft core (quorum/raft/) is a pure, deterministic state machine (docs/DESIGN.md §2, docs/STYLE.md 1-2).

It is given ticks, messages and an injected source of randomness, and returns
what to persist, send and apply. So nothing under quorum/raft/ may import
I/O, clocks, threads, process control, logging or module-level randomness,
nor open files. The check is static (ast), so it covers code paths no test
runs. Imports under `if TYPE_CHECKING:` are allowed: they never run.
Project modules the core imports from outside quorum/raft/ are checked too,
transitively, so impurity cannot come in through a helper.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
CORE_DIR = REPO_ROOT / "quorum" / "raft"

# Top-level module name -> why the core may not import it.
FORBIDDEN_MODULES: dict[str, str] = {
    "asyncio": "event loop",
    "grpc": "network transport",
    "socket": "network I/O",
    "select": "I/O multiplexing",
    "selectors": "I/O multiplexing",
    "time": "clock (the core counts ticks)",
    "datetime": "clock (the core counts ticks)",
    "threading": "threads",
    "multiprocessing": "processes",
    "concurrent": "threads/processes",
    "subprocess": "processes",
    "signal": "process signals",
    "os": "files and environment",
    "pathlib": "files",
    "io": "files",
    "tempfile": "files",
    "shutil": "files",
    "mmap": "files",
    "lmdb": "storage",
    "random": "module-level randomness (inject a random source)",
    "secrets": "randomness (inject a random source)",
    "uuid": "randomness and clock",
    "logging": "logging (the runner logs what the core returns)",
    "structlog": "logging (the runner logs what the core returns)",
    "importlib": "dynamic imports defeat this check",
}
FORBIDDEN_CALLS: dict[str, str] = {
    "open": "file I/O",
    "__import__": "dynamic imports defeat this check",
}


def _core_files() -> list[Path]:
    return sorted(CORE_DIR.rglob("*.py"))


def _is_type_checking_guard(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except the bodies of `if TYPE_CHECKING:` (their `else:` branch does run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking_guard(node):
            stack.append(node.test)
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def _module_name(path: Path, repo_root: Path) -> str:
    parts = list(path.relative_to(repo_root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_modules(node: ast.AST, path: Path, repo_root: Path) -> list[str]:
    """Absolute names of the modules an import statement may load."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level == 0:
        base = node.module or ""
    else:
        package = _module_name(path, repo_root).split(".")
        if path.name != "__init__.py":
            package.pop()
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, node.module] if node.module else package)
    # `from pkg import name` loads the submodule pkg.name when there is one, else takes a name from pkg.
    return [
        f"{base}.{alias.name}" if _local_source(f"{base}.{alias.name}", repo_root) is not None else base
        for alias in node.names
    ]


def _local_source(module: str, repo_root: Path) -> Path | None:
    """The repository file a project module lives in; None for stdlib, third-party or missing modules."""
    relative = Path(*module.split("."))
    for candidate in (repo_root / relative.with_suffix(".py"), repo_root / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _violations_in(path: Path, repo_root: Path = REPO_ROOT) -> tuple[list[tuple[int, str]], list[Path]]:
    """(line, problem) pairs for one file, and the project files it imports."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as error:
        return [(error.lineno or 0, f"cannot parse ({error.msg}), so its purity cannot be checked")], []
    violations: list[tuple[int, str]] = []
    local_imports: list[Path] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            violations.append((node.lineno, f"calls {node.func.id}(): {FORBIDDEN_CALLS[node.func.id]}"))
        for module in _imported_modules(node, path, repo_root):
            top = module.split(".")[0]
            if top in FORBIDDEN_MODULES:
                violations.append((node.lineno, f"imports {module}: {FORBIDDEN_MODULES[top]}"))
                break
            source = _local_source(module, repo_root)
            if source is not None:
                local_imports.append(source)
    return sorted(violations), local_imports


def _violations_from(root: Path) -> list[str]:
    """Violations in `root` and, transitively, in project modules outside the core that it imports."""
    violations: list[str] = []
    seen: set[Path] = set()
    pending: list[tuple[Path, tuple[Path, ...]]] = [(root, ())]
    while pending:
        path, importers = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        found, local_imports = _violations_in(path)
        via = "".join(f" <- {importer.relative_to(REPO_ROOT)}" for importer in reversed(importers))
        violations.extend(f"{path.relative_to(REPO_ROOT)}:{line}: {problem}{via}" for line, problem in found)
        # Other core files get their own test; follow only helpers outside quorum/raft/.
        pending.extend((local, (*importers, path)) for local in local_imports if not local.is_relative_to(CORE_DIR))
    return violations


def test_core_package_exists() -> None:
    assert _core_files(), f"no Python files under {CORE_DIR}"


@pytest.mark.parametrize("path", _core_files(), ids=lambda p: str(p.relative_to(CORE_DIR)))
def test_core_file_is_pure(path: Path) -> None:
    violations = _violations_from(path)
    assert not violations, "the Raft core must stay pure:\n" + "\n".join(violations)


def test_checker_catches_impurity(tmp_path: Path) -> None:
    """The checker itself: each forbidden form is reported at its line; allowed forms are not."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "import os.path\n"
        "from time import monotonic\n"
        "if TYPE_CHECKING:\n"
        "    import random\n"
        "else:\n"
        "    import asyncio\n"
        "def f():\n"
        "    import structlog\n"
        "    return open('x')\n"
        "import dataclasses, enum\n"
        "from concurrent.futures import Future\n"
        "x = __import__('socket')\n",
        encoding="utf-8",
    )
    found, _ = _violations_in(sample, repo_root=tmp_path)
    assert [line for line, _ in found] == [3, 4, 8, 10, 11, 13, 14], found
