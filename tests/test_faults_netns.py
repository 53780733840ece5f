"""The host harness (tests/faults/netns.py): hosts reach each other by address, cuts and isolation act
as they say, and nothing it made outlives it, even when the process that made it is SIGKILLed."""

from __future__ import annotations

import ipaddress
import subprocess
import sys
import textwrap

import pytest

from tests.faults import netns
from tests.faults.netns import Host, Network, SubnetTaken
from tests.helpers import wait_until
from tests.quorum_harness import REPO_ROOT, subprocess_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

_reason = netns.unavailable_reason()
if _reason is not None:
    pytest.skip(f"fault harness skipped: {_reason}", allow_module_level=True)

PORT = 7000
CONNECT_TIMEOUT_S = 1.0
WAIT_S = 20.0

ECHO_SERVER = textwrap.dedent("""
    import socket, sys
    s = socket.socket()
    s.bind((sys.argv[1], int(sys.argv[2])))
    s.listen(16)
    print("listening", flush=True)
    for _ in range(1000):
        s.accept()[0].close()
""")
CONNECT = textwrap.dedent("""
    import socket, sys
    s = socket.socket()
    s.settimeout(float(sys.argv[3]))
    try:
        s.connect((sys.argv[1], int(sys.argv[2])))
        print("connected")
    except OSError as exc:
        print(type(exc).__name__)
""")
# A run that makes one host, says its prefix and waits (to be SIGKILLed).
MAKER = "from tests.faults.netns import Network\nn = Network()\nn.add_host('a')\nprint(n.prefix, flush=True)\ninput()"


def connects(src: Host, dst: Host) -> bool:
    done = src.run(
        [sys.executable, "-c", CONNECT, dst.address, str(PORT), str(CONNECT_TIMEOUT_S)],
        timeout_s=WAIT_S,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() == "connected"


def serve(host: Host) -> subprocess.Popen[str]:
    proc = host.popen([sys.executable, "-c", ECHO_SERVER, host.address, str(PORT)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
    return proc


def names_with(prefix: str) -> list[str]:
    made = netns.ip("netns", "list") + netns.ip("-o", "link", "show")
    return [word for word in made.replace(":", " ").replace("@", " ").split() if word.startswith(prefix)]


def test_hosts_reach_each_other_and_cuts_act_one_way_at_a_time() -> None:
    with Network() as net:
        a, b, c = net.add_host("a"), net.add_host("b"), net.add_host("c")
        assert len({a.address, b.address, c.address}) == 3
        assert all(ipaddress.ip_address(h.address) in net.subnet for h in (a, b, c))
        servers = [serve(h) for h in (a, b, c)]
        assert connects(a, b) and connects(b, a) and connects(c, b)

        net.cut(a, b)  # a's packets to b are lost; nothing else changes
        assert not connects(a, b)
        assert connects(c, b) and connects(a, c)

        net.isolate(c)
        assert not connects(a, c) and not connects(c, b)
        net.heal()
        assert connects(a, b) and connects(a, c) and connects(c, b)

        net.partition([a], [b, c])
        assert not connects(a, b) and not connects(c, a) and connects(b, c)
        net.heal()
        assert connects(a, b) and connects(c, a)
        for proc in servers:
            proc.kill()
            proc.wait(timeout=WAIT_S)
    assert names_with(net.prefix) == []


def test_close_kills_what_runs_in_the_hosts() -> None:
    with Network() as net:
        proc = serve(net.add_host("a"))
    assert proc.wait(timeout=WAIT_S) == -9
    assert names_with(net.prefix) == []


def test_what_a_sigkilled_run_left_behind_is_removed_by_the_next_one() -> None:
    maker = subprocess.Popen(
        [sys.executable, "-c", MAKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=subprocess_env(),
    )
    assert maker.stdout is not None
    prefix = maker.stdout.readline().strip()
    assert prefix and names_with(prefix), "the run made no host"
    maker.kill()
    maker.wait(timeout=WAIT_S)
    assert names_with(prefix), "the SIGKILLed run's names should still be there"
    with Network():
        wait_until(lambda: names_with(prefix) == [], WAIT_S, message=f"stale {prefix} names removed")


def test_a_subnet_already_routed_here_is_refused_with_its_route() -> None:
    routes = netns.ip("-o", "-4", "route", "show").splitlines()
    taken = next((line.split()[0] for line in routes if line.split() and "/" in line.split()[0]), None)
    if taken is None:
        pytest.skip("this machine routes no subnet besides the default one")
    with pytest.raises(SubnetTaken, match=rf"overlaps route '{taken}"):
        netns.check_subnet_free(ipaddress.ip_network(taken))
