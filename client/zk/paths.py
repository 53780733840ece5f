"""Connect strings and paths: `"h1:p1,h2:p2/chroot"` as ZooKeeper and kazoo parse it.

A chroot makes every path the user gives relative to it (Kafka's
`zookeeper.connect=host:2181/kafka`); paths the server returns are translated
back. Full validation of a path is the server's (one source of truth); the
client only checks what it needs to prefix a chroot or walk a tree.
"""

from __future__ import annotations

from collections.abc import Sequence

from client.zk.exceptions import BadArgumentsError

DEFAULT_PORT = 2181


def parse_hosts(hosts: str | Sequence[str]) -> tuple[list[str], str]:
    """`("h1:1,h2:2/app")` -> (["h1:1", "h2:2"], "/app"); a host without a port gets 2181."""
    if isinstance(hosts, str):
        text = hosts.strip()
        chroot = ""
        slash = text.find("/")
        if slash >= 0:
            text, chroot = text[:slash], text[slash:]
        parts = [h.strip() for h in text.split(",")]
    else:
        parts = [h.strip() for h in hosts]
        chroot = ""
    addresses = [_with_port(h) for h in parts if h]
    if not addresses:
        raise ValueError(f"no server address in hosts {hosts!r}")
    return addresses, normalize_chroot(chroot)


def _with_port(host: str) -> str:
    if host.startswith("["):  # [ipv6]:port
        return host if "]:" in host else f"{host}:{DEFAULT_PORT}"
    return host if ":" in host else f"{host}:{DEFAULT_PORT}"


def normalize_chroot(chroot: str) -> str:
    chroot = chroot.rstrip("/")
    if chroot and ("//" in chroot or not chroot.startswith("/")):
        raise ValueError(f"invalid chroot {chroot!r}")
    return chroot


def check_path(path: str) -> str:
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, not {type(path).__name__}")
    if not path.startswith("/"):
        raise BadArgumentsError(f"path must start with '/': {path!r}", path)
    return path


def join(parent: str, child: str) -> str:
    return parent + child if parent.endswith("/") else f"{parent}/{child}"


def parent_of(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


class Chroot:
    """Maps the user's paths to the server's and back."""

    def __init__(self, prefix: str) -> None:
        self.prefix = normalize_chroot(prefix)

    def to_server(self, path: str) -> str:
        check_path(path)
        if not self.prefix:
            return path
        return self.prefix if path == "/" else self.prefix + path

    def to_client(self, path: str) -> str:
        if not self.prefix:
            return path
        if path == self.prefix:
            return "/"
        if path.startswith(self.prefix + "/"):
            return path[len(self.prefix) :]
        return path

    def contains(self, server_path: str) -> bool:
        return not self.prefix or server_path == self.prefix or server_path.startswith(self.prefix + "/")


# ZooKeeper's ZooDefs.CONFIG_NODE: the quorum's dynamic configuration, read by getConfig whatever the chroot.
CONFIG_PATH = "/zookeeper/config"
