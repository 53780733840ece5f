"""Hosts on one machine: a network namespace each, a veth pair into one bridge, an address of a private /24.

    with Network() as net:                      # refuses when the /24 is routed here already
        a, b = net.add_host("n1"), net.add_host("n2")
        proc = a.popen(["python3", "-m", "zkraft", "quorum", "start", "--listen", f"{a.address}:7000", ...])
        net.cut(a, b)                           # a's packets to b are lost from now on (one way)
        net.isolate(b)                          # b's cable is pulled: nothing in or out
        net.heal()                              # every link as it was

Why namespaces: a node in its own namespace has its own address and reaches the others only through the
bridge, so nothing can lean on 127.0.0.1, and a link can be cut while both ends keep running -- the fault
that breaks coordination systems (Jepsen: Kafka 2013, etcd 2020).

How a link is cut without packet filters (the machine has no iptables/nftables, and tc has no actions):
- one direction of one link, `cut(src, dst)`: inside src's namespace dst's address is pinned to a MAC
  that no host has (a permanent neighbour entry), so src's frames to dst leave and are lost on the bridge.
  The sender sees silence and times out, as with a DROP rule; nothing else changes.
- a whole host, `isolate(host)`: the bridge side of its veth goes down (frames in both directions lost).
The addresses are 198.18.29.0/24 by default: 198.18.0.0/15 is reserved for network benchmark tests
(RFC 2544), so it collides with neither loopback, docker's 172.17.0.0/16 nor a real network; the root
namespace never gets an address in it (only the hosts do), and the range is refused when a route or an
address of this machine already covers it. Only addresses of hosts made here are ever used.

Cleanup: every name starts with a per-run prefix `zf<pid>` (the pid of the process that made it).
`close()` kills what still runs in the hosts and removes the veths, namespaces and bridge; `Network()`
first removes what runs whose process is gone left behind (after a SIGKILL of the test, say).
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_SUBNET = "198.18.29.0/24"
# Hosts get .10, .11, ... of the subnet, in the order they are made.
FIRST_HOST_INDEX = 10
HOSTS_MAX = 200
# A unicast, locally administered MAC that no host here has: frames sent to it are lost on the bridge.
NOWHERE_MAC = "02:00:5e:00:00:01"
IP_TIMEOUT_S = 10.0
NAME_PREFIX = "zf"
_STALE_NETNS = re.compile(rf"^{NAME_PREFIX}(\d+)-")
# `ip route` prints a route's type before its destination unless it is unicast.
_ROUTE_TYPES = {
    "unicast",
    "local",
    "broadcast",
    "multicast",
    "anycast",
    "blackhole",
    "unreachable",
    "prohibit",
    "throw",
    "nat",
}
_STALE_LINK = re.compile(rf"^{NAME_PREFIX}(\d+)[vb]")


class NetnsUnavailable(RuntimeError):
    """Why hosts cannot be made here (the tests skip with this message)."""


class SubnetTaken(RuntimeError):
    """The chosen test subnet is already routed or addressed on this machine."""


def ip(*args: str, check: bool = True) -> str:
    """Run `ip args...` and return its stdout; a failure raises with ip's own message."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout


def unavailable_reason() -> str | None:
    """None when this process can make hosts, else a one-line reason."""
    if os.geteuid() != 0:
        return "network namespaces need root (the fault campaign makes hosts with `ip netns`)"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    try:
        ip("netns", "list")
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return f"`ip netns` is unavailable: {exc}"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_pids_in(netns: str) -> None:
    """SIGKILL the processes a harness started inside `netns` (ip netns pids lists exactly those)."""
    for word in ip("netns", "pids", netns, check=False).split():
        try:
            os.kill(int(word), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass


def clean_stale() -> list[str]:
    """Remove the namespaces and links of harness runs whose process is gone; return their names."""
    removed = []
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        found = _STALE_NETNS.match(name)
        if found and not _pid_alive(int(found.group(1))):
            _kill_pids_in(name)
            ip("netns", "del", name, check=False)
            removed.append(name)
    for line in ip("-o", "link", "show").splitlines():
        parts = line.split(":", 2)
        name = parts[1].strip().split("@")[0] if len(parts) > 1 else ""
        found = _STALE_LINK.match(name)
        if found and not _pid_alive(int(found.group(1))):
            ip("link", "del", name, check=False)
            removed.append(name)
    return removed


def check_subnet_free(subnet: ipaddress.IPv4Network) -> None:
    """Refuse a subnet that a route (other than the default one) or an address of this machine overlaps."""
    for line in ip("-o", "-4", "route", "show", "table", "all").splitlines():
        words = line.split()
        if not words:
            continue
        dest = words[1] if words[0] in _ROUTE_TYPES and len(words) > 1 else words[0]
        if dest == "default":
            continue
        try:
            routed = ipaddress.ip_network(dest, strict=False)
        except ValueError:
            continue
        if routed.overlaps(subnet):
            raise SubnetTaken(f"test subnet {subnet} overlaps route '{line.strip()}' on this machine: pick another")
    for line in ip("-o", "-4", "addr", "show").splitlines():
        found = re.search(r"inet (\S+)", line)
        if found and ipaddress.ip_interface(found.group(1)).ip in subnet:
            raise SubnetTaken(f"test subnet {subnet} holds address {found.group(1)} of this machine: pick another")


@dataclass(frozen=True, slots=True)
class Host:
    """One host: a network namespace with one interface, eth0, at `address`."""

    name: str
    netns: str
    address: str
    veth: str  # the bridge side of its cable, in the root namespace

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` as run inside this host (ip netns exec execs it: the pid is the command's own)."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        return subprocess.Popen(self.command(argv), **kwargs)

    def run(self, argv: Sequence[str], timeout_s: float, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.command(argv), timeout=timeout_s, check=False, **kwargs)


class Network:
    """Hosts on one bridge; a context manager that removes all it made on exit."""

    def __init__(self, subnet: str = DEFAULT_SUBNET) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise NetnsUnavailable(reason)
        self.subnet = ipaddress.ip_network(subnet)
        if self.subnet.prefixlen != 24:
            raise ValueError(f"subnet must be a /24, got {subnet}")
        clean_stale()
        check_subnet_free(self.subnet)
        self.prefix = f"{NAME_PREFIX}{os.getpid()}"
        self.bridge = f"{self.prefix}b"
        self.hosts: dict[str, Host] = {}
        self._cuts: set[tuple[str, str]] = set()
        self._isolated: set[str] = set()
        ip("link", "add", self.bridge, "type", "bridge")
        ip("link", "set", self.bridge, "up")

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_host(self, name: str) -> Host:
        """A new host `name` with the next address of the subnet, its cable plugged into the bridge."""
        if name in self.hosts:
            raise ValueError(f"host {name} exists already")
        if not re.fullmatch(r"[a-z0-9]{1,8}", name):
            raise ValueError(f"host name must be 1-8 lowercase letters or digits, got {name!r}")
        index = len(self.hosts)
        if index >= HOSTS_MAX:
            raise ValueError(f"at most {HOSTS_MAX} hosts")
        host = Host(name, f"{self.prefix}-{name}", str(self.subnet[FIRST_HOST_INDEX + index]), f"{self.prefix}v{index}")
        ip("netns", "add", host.netns)
        self.hosts[name] = host
        ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
        ip("link", "set", host.veth, "master", self.bridge, "up")
        ip("-n", host.netns, "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", "eth0")
        ip("-n", host.netns, "link", "set", "eth0", "up")
        ip("-n", host.netns, "link", "set", "lo", "up")
        return host

    # ---- faults
    def cut(self, src: Host, dst: Host) -> None:
        """From now on src's packets to dst are lost (one direction; dst's packets to src still arrive)."""
        ip("-n", src.netns, "neigh", "replace", dst.address, "lladdr", NOWHERE_MAC, "dev", "eth0", "nud", "permanent")
        self._cuts.add((src.name, dst.name))

    def uncut(self, src: Host, dst: Host) -> None:
        """src reaches dst again (its neighbour entry is dropped: the next packet asks ARP afresh)."""
        ip("-n", src.netns, "neigh", "del", dst.address, "dev", "eth0", check=False)
        self._cuts.discard((src.name, dst.name))

    def partition(self, *sides: Sequence[Host]) -> None:
        """Cut both directions between every two hosts on different sides."""
        for i, side in enumerate(sides):
            for other in sides[i + 1 :]:
                for a in side:
                    for b in other:
                        self.cut(a, b)
                        self.cut(b, a)

    def isolate(self, host: Host) -> None:
        """Pull host's cable: nothing in or out (its own interface stays up, as on a switch failure)."""
        ip("link", "set", host.veth, "down")
        self._isolated.add(host.name)

    def heal(self) -> None:
        """Every cut mended and every cable plugged back in."""
        for src, dst in sorted(self._cuts):
            self.uncut(self.hosts[src], self.hosts[dst])
        for name in sorted(self._isolated):
            ip("link", "set", self.hosts[name].veth, "up")
        self._isolated.clear()

    # ---- cleanup
    def close(self) -> None:
        """Kill what still runs in the hosts; remove veths, namespaces and the bridge (never raises)."""
        for host in self.hosts.values():
            _kill_pids_in(host.netns)
            ip("link", "del", host.veth, check=False)
            ip("netns", "del", host.netns, check=False)
        self.hosts.clear()
        ip("link", "del", self.bridge, check=False)
