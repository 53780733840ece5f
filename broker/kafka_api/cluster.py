"""ApiVersions, Metadata, DescribeCluster and SaslHandshake: what a client asks before anything else."""

from __future__ import annotations
