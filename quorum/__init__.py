"""The Raft metadata quorum: consensus only; it replicates opaque commands."""
