"""The `zkraft` command: one entry point, subcommands per process or tool.

    zkraft quorum start --id 1 --data-dir DIR --listen H:P --peers 1=H:P,2=H:P,3=H:P
    zkraft quorum status --server H:P[,H:P...] [--json]
    zkraft up --data-dir DIR
    zkraft zk --server H:P[,H:P...] [--json] [--timeout S] [CMD ARGS...]
    zkraft dump-log-segments --files F[,F...] [--print-data-log] [--deep-iteration]
        [--verify-index-only] [--index-sanity-check] [--max-message-size N]

A user's mistake prints one line `zkraft: error: ...` on stderr and exits
non-zero (2 for a usage error); it never prints a traceback. An unexpected
failure prints one line and exits 1; `ZKRAFT_DEBUG=1` adds the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

PROG = "zkraft"
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad command-line arguments; exits 2."""


class CommandError(Exception):
    """A failure the user can act on, reported as one line; exits 1."""


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing the usage block and exiting, so every error is one line."""

    def error(self, message: str) -> NoReturn:
        hint = f" (see '{self.prog} --help')"
        raise UsageError(message + hint)


def _quorum_start(options: argparse.Namespace) -> int:
    from quorum.settings import SettingsError, load_node_settings

    try:
        settings = load_node_settings(options, options.config)
    except SettingsError as error:
        raise UsageError(str(error)) from None
    # Imported here: the node server pulls in the whole quorum package (grpc,
    # lmdb), which the other subcommands have no need of.
    from quorum.errors import StartupError

    if settings.state_machine == "zookeeper":
        from zkemu.server import serve
    else:
        from quorum.server import serve

    try:
        return serve(settings)
    except StartupError as error:
        raise CommandError(str(error)) from None


def _quorum_status(options: argparse.Namespace) -> int:
    from client.tools import quorum_status

    try:
        return quorum_status.run(options.server, json_output=options.json, timeout_s=options.timeout)
    except quorum_status.ServerListError as error:
        raise UsageError(str(error)) from None
    except quorum_status.QuorumStatusError as error:
        raise CommandError(str(error)) from None


def _up(options: argparse.Namespace) -> int:
    from zkraft import up

    try:
        return up.run(
            data_dir=options.data_dir,
            brokers=options.brokers,
            overrides=options.override,
            base_port=options.base_port,
        )
    except up.UpUsageError as error:
        raise UsageError(str(error)) from None
    except up.UpError as error:
        raise CommandError(str(error)) from None


def _zk(options: argparse.Namespace) -> int:
    from client.tools import zk_shell

    try:
        return zk_shell.run(options.server, options.zk_command, json_output=options.json, timeout_s=options.timeout)
    except zk_shell.ShellUsageError as error:
        raise UsageError(str(error)) from None
    except zk_shell.ShellError as error:
        raise CommandError(str(error)) from None


def _dump_log_segments(options: argparse.Namespace) -> int:
    from client.tools import dump_log_segments

    dump_options = dump_log_segments.DumpOptions(
        print_data_log=options.print_data_log,
        deep_iteration=options.deep_iteration,
        verify_index_only=options.verify_index_only,
        index_sanity_check=options.index_sanity_check,
        max_message_size_bytes=options.max_message_size,
    )
    try:
        return dump_log_segments.run(options.files, dump_options)
    except dump_log_segments.DumpError as error:
        raise CommandError(str(error)) from None


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


def _missing_command(prog: str, choices: str) -> Callable[[argparse.Namespace], int]:
    def handler(_options: argparse.Namespace) -> int:
        raise UsageError(f"missing command after '{prog}': {choices} (see '{prog} --help')")

    return handler


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="ZooKeeper-era Kafka on a Raft quorum.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parser.set_defaults(handler=_missing_command("zkraft", "quorum, up, zk or dump-log-segments"))

    quorum = commands.add_parser("quorum", help="run or inspect a quorum node")
    quorum_commands = quorum.add_subparsers(dest="quorum_command", metavar="COMMAND", parser_class=_Parser)
    quorum.set_defaults(handler=_missing_command("zkraft quorum", "start or status"))

    start = quorum_commands.add_parser(
        "start",
        help="run one quorum node in the foreground",
        description="Run one quorum node. Command-line options override the --config properties file.",
    )
    start.add_argument("--id", type=int, help="this node's id (property id / myid)")
    start.add_argument("--data-dir", help="where the log, hard state and snapshots live (property dataDir)")
    start.add_argument("--listen", help="host:port to serve on; its port must be this node's port in --peers")
    start.add_argument("--peers", help="every voter: 1=host:port,2=host:port,3=host:port (property server.N)")
    start.add_argument("--cluster-id", help="name shared by all nodes of one cluster (property cluster.id)")
    start.add_argument("--config", type=Path, help="Java-style .properties file")
    start.set_defaults(handler=_quorum_start)

    status = quorum_commands.add_parser("status", help="show every node's role, term, commit index and lag")
    status.add_argument("--server", required=True, help="host:port[,host:port...] of quorum nodes")
    status.add_argument("--json", action="store_true", help="print one JSON list instead of a table")
    status.add_argument(
        "--timeout", type=_positive_float, default=2.0, help="seconds to wait for each server (default 2)"
    )
    status.set_defaults(handler=_quorum_status)

    up = commands.add_parser(
        "up",
        help="run a local cluster in the foreground",
        description="Start a local 3-node quorum with all data under one directory; Ctrl-C stops it.",
    )
    up.add_argument("--data-dir", type=Path, required=True, help="directory holding the whole cluster")
    up.add_argument("--brokers", type=_non_negative_int, default=0, help="number of brokers (default 0)")
    up.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="quorum node property for every node, e.g. raft.tick.ms=20 (repeatable)",
    )
    up.add_argument("--base-port", type=int, default=None, help="first of 3 consecutive quorum ports (default 7001)")
    up.set_defaults(handler=_up)

    zk = commands.add_parser(
        "zk",
        help="zkCli-compatible shell on the ZooKeeper service",
        description="Run one zkCli command (ls, get, stat, create, set, delete, ...) or, without one, a shell.",
    )
    zk.add_argument(
        "--server", default="127.0.0.1:7001", help="host:port[,host:port...][/chroot] (default 127.0.0.1:7001)"
    )
    zk.add_argument("--json", action="store_true", help="print each command's result as one JSON document")
    zk.add_argument(
        "--timeout", type=_positive_float, default=10.0, help="seconds to wait for a connection (default 10)"
    )
    zk.add_argument("zk_command", nargs=argparse.REMAINDER, metavar="CMD ARGS", help="zkCli command; none: a shell")
    zk.set_defaults(handler=_zk)

    dump = commands.add_parser(
        "dump-log-segments",
        help="print the batches, records and index entries of partition log files",
        description="Kafka's DumpLogSegments: dump .log, .index and .timeindex files of a partition directory.",
    )
    dump.add_argument("--files", required=True, help="comma-separated .log, .index and .timeindex files")
    dump.add_argument("--print-data-log", action="store_true", help="print each record's key and value")
    dump.add_argument("--deep-iteration", action="store_true", help="print one line per record, not only per batch")
    dump.add_argument("--verify-index-only", action="store_true", help="check index entries without printing them")
    dump.add_argument("--index-sanity-check", action="store_true", help="run the start-up sanity check of indexes")
    dump.add_argument(
        "--max-message-size",
        type=_non_negative_int,
        default=5 * 1024 * 1024,
        help="largest batch in bytes; a larger size is reported as corrupt (default 5242880)",
    )
    dump.set_defaults(handler=_dump_log_segments)
    return parser


def _print_error(message: str) -> None:
    line = " ".join(str(message).split()) or "failed"
    print(f"{PROG}: error: {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    # gRPC's C core logs its own copy of errors we already report in one line
    # (a port in use, an unreachable peer); ZKRAFT users get ours only.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    parser = build_parser()
    try:
        options = parser.parse_args(argv)
    except UsageError as error:
        _print_error(str(error))
        return EXIT_USAGE
    except SystemExit as exit_request:  # --help
        return exit_request.code if isinstance(exit_request.code, int) else EXIT_OK
    handler: Callable[[argparse.Namespace], int] = options.handler
    try:
        return handler(options)
    except UsageError as error:
        _print_error(str(error))
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except CommandError as error:
        _print_error(str(error))
        return EXIT_FAILURE
    except Exception as error:  # the process boundary: one line, the traceback only on request
        if os.environ.get("ZKRAFT_DEBUG") == "1":
            traceback.print_exc()
            _print_error(f"unexpected {type(error).__name__}: {error}")
        else:
            _print_error(f"unexpected {type(error).__name__}: {error} (set ZKRAFT_DEBUG=1 for the traceback)")
        return EXIT_FAILURE
