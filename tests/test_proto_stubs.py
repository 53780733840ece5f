"""The checked-in stubs in zkraft_proto/ are exactly what scripts/gen_protos.py generates."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO_ROOT / "proto" / "zkraft_proto"
STUB_DIR = REPO_ROOT / "zkraft_proto"
STUB_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
PROTOS = sorted(PROTO_DIR.glob("*.proto"))


def test_there_are_protos() -> None:
    assert PROTOS, f"no .proto files under {PROTO_DIR}"


@pytest.mark.parametrize("proto", PROTOS, ids=lambda p: p.name)
def test_every_proto_has_stubs(proto: Path) -> None:
    missing = [proto.stem + suffix for suffix in STUB_SUFFIXES if not (STUB_DIR / (proto.stem + suffix)).is_file()]
    assert not missing, f"{proto.name} has no generated {', '.join(missing)}; run: python3 scripts/gen_protos.py"


@pytest.mark.parametrize("proto", PROTOS, ids=lambda p: p.name)
def test_stubs_import_with_installed_runtime(proto: Path) -> None:
    # Fails when the installed protobuf/grpcio is older than the generated code requires.
    for module in (f"zkraft_proto.{proto.stem}_pb2", f"zkraft_proto.{proto.stem}_pb2_grpc"):
        importlib.import_module(module)


def test_checked_in_stubs_are_fresh() -> None:
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("grpc_tools is not installed (it comes with the test extra: pip install -e '.[test]')")
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "gen_protos.py"), "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"stale protobuf stubs:\n{result.stdout}{result.stderr}"
