"""`zkraft console`: serve the web console in the foreground until SIGINT or SIGTERM.

    zkraft console --bootstrap-server H:P[,...] [--zookeeper H:P[,...]] [--port 8080]
        [--metrics-server H:P[,...]] [--command-config F] [--zk-tls-config-file F] [--require-login]

uvicorn serves the Starlette application (zkraft/console/app.py) on one process; pages run the blocking SDK on
its worker threads.
"""

from __future__ import annotations

import argparse
import re
import socket
from typing import Any

PORT_DEFAULT = 8080
HOST_DEFAULT = "127.0.0.1"
_HOST_PORT = re.compile(r"^[^\s,]+:(\d{1,5})$")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    from zkraft.tools import command_config

    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,...]", help="the Kafka brokers")
    parser.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[,...]",
        help="the quorum nodes (zookeeper.connect): the quorum on the overview, the znode tree, logins",
    )
    parser.add_argument(
        "--metrics-server",
        metavar="HOST:PORT[,...]",
        help="each broker's /metrics address (cluster.json metrics_address): topic sizes, rates and charts",
    )
    parser.add_argument("--host", default=HOST_DEFAULT, help=f"address to serve on (default {HOST_DEFAULT})")
    parser.add_argument("--port", type=int, default=PORT_DEFAULT, help=f"port to serve on (default {PORT_DEFAULT})")
    parser.add_argument(
        "--require-login",
        action="store_true",
        help="ask for a user and password checked against the SCRAM users in /config/users (needs --zookeeper)",
    )
    command_config.add_argument(parser)
    command_config.add_zk_tls_argument(parser)


def host_ports(text: str | None, flag: str) -> tuple[str, ...]:
    from zkraft.tools.topics import ToolUsageError

    if not text:
        return ()
    items = tuple(item.strip() for item in text.split(",") if item.strip())
    for item in items:
        match = _HOST_PORT.match(item)
        if match is None or not 1 <= int(match.group(1)) <= 65535:
            raise ToolUsageError(f"{flag}: {item!r} is not host:port")
    return items


def build(ns: argparse.Namespace) -> tuple[Any, Any]:
    """(the Starlette app, its state) from the command line; ToolUsageError for a bad option."""
    from zkraft.console.app import ConsoleState, build_app
    from zkraft.console.clients import ConsoleClients, ConsoleTargets
    from zkraft.console.login import LoginGate, verifier_for
    from zkraft.console.rates import RateSampler
    from zkraft.tools import command_config
    from zkraft.tools.topics import ToolUsageError

    bootstrap = ",".join(host_ports(ns.bootstrap_server, "--bootstrap-server"))
    zookeeper = ns.zookeeper.strip() if ns.zookeeper else None
    if zookeeper:
        host_ports(zookeeper.split("/", 1)[0], "--zookeeper")
    if ns.require_login and not zookeeper:
        raise ToolUsageError("--require-login needs --zookeeper (the users' SCRAM credentials are in /config/users)")
    if not 0 <= ns.port <= 65535:
        raise ToolUsageError(f"--port: {ns.port} is out of range 0-65535")
    targets = ConsoleTargets(
        bootstrap_servers=bootstrap,
        zookeeper=zookeeper,
        metrics_servers=host_ports(ns.metrics_server, "--metrics-server"),
        kafka_security=command_config.security_of(ns),
        zk_tls=command_config.zk_tls_of(ns.zk_tls_config_file),
    )
    clients = ConsoleClients(targets)
    sampler = RateSampler(targets.metrics_servers) if targets.metrics_servers else None
    gate = LoginGate(verifier_for(clients)) if ns.require_login else None
    state = ConsoleState(clients, sampler, gate)
    return build_app(state), state


def run(ns: argparse.Namespace) -> int:
    import logging

    import structlog
    import uvicorn

    from runtime.json_logging import configure_logging
    from zkraft.tools.topics import ToolError

    logging.getLogger("zkraft.client").addHandler(logging.NullHandler())
    app, state = build(ns)
    configure_logging()  # JSON lines on stderr (the console's log under `zkraft up`), as every zkraft server
    # Bound here, not by uvicorn, so that a port in use is one line naming it (uvicorn logs and exits).
    try:
        listener = socket.create_server((ns.host, ns.port), reuse_port=False)
    except OSError as error:
        raise ToolError(f"the console cannot serve on {ns.host}:{ns.port}: {error.strerror or error}") from None
    port = listener.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    if state.sampler is not None:
        state.sampler.start()
    print(f"zkraft console: http://{ns.host}:{port}/", flush=True)
    structlog.get_logger("zkraft.console").info(
        "console_started",
        address=f"{ns.host}:{port}",
        login=state.gate is not None,
        metrics_servers=len(state.clients.targets.metrics_servers),
    )
    try:
        server.run(sockets=[listener])
    finally:
        if state.sampler is not None:
            state.sampler.stop()
        state.clients.close()
        listener.close()
    return 0
