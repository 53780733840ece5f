"""Regenerate the checked-in Python stubs in `zkraft_proto/` from `proto/zkraft_proto/*.proto`.

    python3 scripts/gen_protos.py           # regenerate in place
    python3 scripts/gen_protos.py --check   # exit 1 if any checked-in stub is stale

The stubs are checked in so that `from zkraft_proto import quorum_pb2` works
in a plain clone without a build step. They are produced by the protoc bundled
with the pinned grpcio-tools (see the `test` extra in pyproject.toml); a
different grpcio-tools may produce different bytes, which `--check` reports.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO_ROOT / "proto"
PACKAGE = "zkraft_proto"
STUB_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
INIT_TEXT = (
    '"""Generated protobuf and gRPC stubs for proto/zkraft_proto/*.proto: do not edit.\n'
    "\n"
    "Regenerate with `python3 scripts/gen_protos.py`.\n"
    '"""\n'
)


def proto_sources() -> list[Path]:
    return sorted((PROTO_ROOT / PACKAGE).glob("*.proto"))


def expected_stub_names(proto: Path) -> list[str]:
    return [proto.stem + suffix for suffix in STUB_SUFFIXES]


def generate(out_root: Path) -> None:
    """Write `<out_root>/zkraft_proto/` with the stubs of every .proto and the package `__init__.py`."""
    try:
        from grpc_tools import protoc
    except ImportError:
        sys.exit("grpc_tools is not installed: python3 -m pip install -e '.[test]'")
    # protoc needs the well-known types (google/protobuf/*.proto) that grpc_tools ships.
    import grpc_tools

    well_known_include = Path(grpc_tools.__file__).resolve().parent / "_proto"
    sources = proto_sources()
    if not sources:
        sys.exit(f"no .proto files under {PROTO_ROOT / PACKAGE}")
    package_dir = out_root / PACKAGE
    package_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known_include}",
        f"--python_out={out_root}",
        f"--grpc_python_out={out_root}",
        f"--pyi_out={out_root}",
        # Paths relative to the include root, so generated imports read `from zkraft_proto import ...`.
        *(str(source.relative_to(PROTO_ROOT)) for source in sources),
    ]
    status = protoc.main(args)
    if status != 0:
        sys.exit(f"protoc failed with status {status}")
    (package_dir / "__init__.py").write_text(INIT_TEXT, encoding="utf-8")


def generated_files(package_dir: Path) -> dict[str, bytes]:
    return {
        path.name: path.read_bytes()
        for path in sorted(package_dir.iterdir())
        if path.is_file() and (path.name == "__init__.py" or path.name.endswith(STUB_SUFFIXES))
    }


def check() -> int:
    """Compare freshly generated stubs with the checked-in ones; print every difference."""
    checked_in = generated_files(REPO_ROOT / PACKAGE) if (REPO_ROOT / PACKAGE).is_dir() else {}
    with tempfile.TemporaryDirectory(prefix="zkraft-protos-") as tmp:
        generate(Path(tmp))
        fresh = generated_files(Path(tmp) / PACKAGE)
    problems = []
    for name in sorted(fresh.keys() | checked_in.keys()):
        if name not in checked_in:
            problems.append(f"{PACKAGE}/{name}: missing (not generated yet)")
        elif name not in fresh:
            problems.append(f"{PACKAGE}/{name}: stale (no .proto produces it any more)")
        elif fresh[name] != checked_in[name]:
            problems.append(f"{PACKAGE}/{name}: stale (differs from what the .proto generates)")
    for problem in problems:
        print(problem)
    if problems:
        print("run: python3 scripts/gen_protos.py")
        return 1
    print(f"{PACKAGE}: {len(fresh)} files up to date")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="compare with the checked-in stubs instead of writing them"
    )
    options = parser.parse_args(argv)
    if options.check:
        return check()
    generate(REPO_ROOT)
    print(f"generated {PACKAGE}/ from {len(proto_sources())} .proto file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
