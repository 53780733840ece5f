"""Generated protobuf and gRPC stubs for proto/zkraft_proto/*.proto: do not edit.

Regenerate with `python3 scripts/gen_protos.py`.
"""
