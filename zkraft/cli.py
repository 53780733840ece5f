"""The `zkraft` command: one entry point, subcommands per process or tool.

    zkraft quorum start --id 1 --data-dir DIR --listen H:P --peers 1=H:P,2=H:P,3=H:P
    zkraft quorum status --server H:P[,H:P...] [--json]
    zkraft quorum add --server H:P --id N --address H:P [--observer]
    zkraft quorum remove --server H:P --id N
    zkraft quorum transfer-leadership --server H:P --to N
    zkraft up --data-dir DIR
    zkraft zk --server H:P[,H:P...] [--json] [--timeout S] [CMD ARGS...]
    zkraft dump-log-segments --files F[,F...] [--print-data-log] [--deep-iteration]
        [--verify-index-only] [--index-sanity-check] [--max-message-size N]
    zkraft topics (--zookeeper H:P | --bootstrap-server H:P) --create|--list|--describe|--alter|--delete ...
    zkraft console-producer --bootstrap-server H:P --topic T [--property K=V ...]
    zkraft console-consumer --bootstrap-server H:P --topic T [--from-beginning] [--max-messages N] ...
    zkraft producer-perf-test --topic T --num-records N --record-size S --throughput T --producer-props K=V ...
    zkraft consumer-perf-test --bootstrap-server H:P --topic T --messages N [--timeout MS]
    zkraft consumer-groups --bootstrap-server H:P --list|--describe|--delete|--reset-offsets [--group G] ...
    zkraft reassign-partitions (--zookeeper H:P | --bootstrap-server H:P) --generate|--execute|--verify|--cancel|--list
    zkraft preferred-replica-election --zookeeper H:P [--path-to-json-file F]
    zkraft delete-records --bootstrap-server H:P --offset-json-file F
    zkraft leader-election --bootstrap-server H:P --election-type preferred|unclean
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file F)
    zkraft replica-verification --broker-list H:P[,...] [--topic-white-list REGEX] [--time-limit-ms N]
    zkraft configs --zookeeper H:P|--bootstrap-server H:P --entity-type topics|brokers [--entity-name N] ....
    zkraft state-change-log-merger --logs F1,F2 | --logs-regex R [--topic T] [--partitions 0,1]
    zkraft acls --bootstrap-server H:P|--authorizer-properties zookeeper.connect=H:P --add|--remove|--list ...
    zkraft console --bootstrap-server H:P [--zookeeper H:P] [--metrics-server H:P,...] [--port N]

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


def check_event_loop_choice() -> None:
    """A ZKRAFT_EVENT_LOOP the servers and clients cannot honour is a usage error, said before anything starts."""
    from runtime.event_loop import loop_factory

    try:
        loop_factory()
    except ValueError as error:
        raise UsageError(str(error)) from None


def check_failpoints() -> None:
    """A ZKRAFT_FAILPOINTS the servers cannot parse is a usage error (runtime.failpoints), said at once."""
    from runtime import failpoints

    if failpoints.CONFIG_ERROR is not None:
        raise UsageError(failpoints.CONFIG_ERROR)


def _quorum_start(options: argparse.Namespace) -> int:
    from quorum.settings import SettingsError, load_node_settings
    from runtime.jaas import login_config_from_jvm_flags

    if options.jaas_config is None:
        # zkServer.sh passes SERVER_JVMFLAGS to the JVM: the JAAS file is a system property there.
        from_flags = login_config_from_jvm_flags(os.environ.get("SERVER_JVMFLAGS", ""))
        options.jaas_config = str(from_flags) if from_flags is not None else None
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
    from runtime.client_config import zookeeper_client_tls_file
    from runtime.tls import TlsConfigError
    from zkraft.tools import quorum_status

    try:
        tls = zookeeper_client_tls_file(options.client_configuration)
    except TlsConfigError as error:
        raise UsageError(f"-client-configuration: {error}") from None
    try:
        return quorum_status.run(options.server, json_output=options.json, timeout_s=options.timeout, tls=tls)
    except quorum_status.ServerListError as error:
        raise UsageError(str(error)) from None
    except quorum_status.QuorumStatusError as error:
        raise CommandError(str(error)) from None


def _quorum_members(options: argparse.Namespace) -> int:
    from runtime.client_config import zookeeper_client_tls_file
    from runtime.tls import TlsConfigError
    from zkraft.tools import quorum_members

    try:
        tls = zookeeper_client_tls_file(options.client_configuration)
    except TlsConfigError as error:
        raise UsageError(f"-client-configuration: {error}") from None
    try:
        if options.quorum_command == "add":
            return quorum_members.add(
                options.server, options.id, options.address, observer=options.observer, timeout_s=options.timeout,
                catch_up_timeout_s=options.catch_up_timeout, out=sys.stdout, tls=tls,
            )  # fmt: skip
        if options.quorum_command == "remove":
            return quorum_members.remove(options.server, options.id, timeout_s=options.timeout, out=sys.stdout, tls=tls)
        return quorum_members.transfer_leadership(
            options.server, options.to, timeout_s=options.timeout, out=sys.stdout, tls=tls
        )
    except quorum_members.ServerListError as error:
        raise UsageError(str(error)) from None
    except quorum_members.QuorumStatusError as error:
        raise CommandError(str(error)) from None


def _broker_start(options: argparse.Namespace) -> int:
    from broker.config import BrokerConfigError, load_broker_config
    from runtime.jaas import login_config_from_jvm_flags

    # kafka-run-class.sh passes KAFKA_OPTS to the JVM: the JAAS file is a system property there.
    jaas = (
        Path(options.jaas_config)
        if options.jaas_config
        else login_config_from_jvm_flags(os.environ.get("KAFKA_OPTS", ""))
    )
    try:
        config = load_broker_config(options.config, options.override, jaas)
    except BrokerConfigError as error:
        raise UsageError(str(error)) from None
    from broker.server import BrokerStartupError, serve

    try:
        return serve(config)
    except BrokerStartupError as error:
        raise CommandError(str(error)) from None


def _up(options: argparse.Namespace) -> int:
    from zkraft import up

    try:
        return up.run(
            data_dir=options.data_dir,
            brokers=options.brokers,
            overrides=options.override,
            base_port=options.base_port,
            broker_base_port=options.broker_base_port,
            zk_base_port=options.zk_base_port,
            kafka_base_port=options.kafka_base_port,
            secure=options.secure,
            console_port=options.console_port,
        )
    except up.UpUsageError as error:
        raise UsageError(str(error)) from None
    except up.UpError as error:
        raise CommandError(str(error)) from None


def _zk(options: argparse.Namespace) -> int:
    from zkraft.tools import zk_shell

    try:
        return zk_shell.run(
            options.server,
            options.zk_command,
            json_output=options.json,
            timeout_s=options.timeout,
            client_configuration=options.client_configuration,
        )
    except zk_shell.ShellUsageError as error:
        raise UsageError(str(error)) from None
    except zk_shell.ShellError as error:
        raise CommandError(str(error)) from None


def _dump_log_segments(options: argparse.Namespace) -> int:
    from zkraft.tools import dump_log_segments

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


def _topics(options: argparse.Namespace) -> int:
    from zkraft.tools import topics

    try:
        return topics.run(topics.options_from_namespace(options))
    except topics.TopicsUsageError as error:
        raise UsageError(str(error)) from None
    except topics.TopicsError as error:
        raise CommandError(str(error)) from None


def _configure_if_chosen(
    parser: argparse.ArgumentParser, name: str, chosen: str | None, module: str, configure: str = "configure_parser"
) -> None:
    """Give `parser` its options (`module`.`configure`) only when `name` is the command being run: the tools'
    modules import Kafka's protocol library, the console's its web framework (a second and more), and every
    quorum node and broker is a `zkraft` process too. `zkraft --help` lists the commands without them."""
    if name == chosen:
        import importlib

        getattr(importlib.import_module(module), configure)(parser)


def _add_kafka_tools(commands: argparse._SubParsersAction, chosen: str | None) -> None:  # type: ignore[type-arg]
    topics_parser = commands.add_parser(
        "topics",
        help="create, list, describe, alter or delete topics (kafka-topics.sh)",
        description="Kafka's kafka-topics.sh: --zookeeper writes the znodes, --bootstrap-server asks a broker.",
    )
    _configure_if_chosen(topics_parser, "topics", chosen, "zkraft.tools.topics")
    topics_parser.set_defaults(handler=_topics)
    tools = (
        ("console-producer", "console_producer", "send stdin lines as records"),
        ("console-consumer", "console_consumer", "print records of a topic"),
        ("producer-perf-test", "perf_test", "measure producer throughput and latency"),
        ("consumer-perf-test", "perf_test", "measure consumer throughput"),
        ("consumer-groups", "consumer_groups", "list, describe and delete groups, reset offsets"),
    )
    for name, module_name, summary in tools:
        tool_parser = commands.add_parser(name, help=summary, description=f"Kafka's kafka-{name}.sh: {summary}.")
        configurer = "configure_consumer_parser" if name == "consumer-perf-test" else "configure_parser"
        _configure_if_chosen(tool_parser, name, chosen, f"zkraft.tools.{module_name}", configurer)
        handler = "run_consumer" if name == "consumer-perf-test" else "run"
        tool_parser.set_defaults(handler=_kafka_tool_entry(module_name, handler))
    _add_replication_tools(commands, chosen)


def _add_replication_tools(commands: argparse._SubParsersAction, chosen: str | None) -> None:  # type: ignore[type-arg]
    """Reassignment, preferred election and the two replication tools: `configure_parser` + `run(options)` each."""

    tools = (
        ("reassign-partitions", "reassign_partitions", "Kafka's kafka-reassign-partitions.sh",
         "generate, execute, verify, cancel or list partition reassignments"),
        ("preferred-replica-election", "preferred_replica_election", "Kafka's kafka-preferred-replica-election.sh",
         "move partition leadership back to preferred replicas"),
        ("leader-election", "leader_election", "Kafka's kafka-leader-election.sh",
         "elect partition leaders: preferred replicas, or unclean from outside the ISR"),
        ("delete-records", "delete_records", "Kafka's kafka-delete-records.sh",
         "delete a partition's records below an offset"),
        ("replica-verification", "replica_verification", "Kafka's kafka-replica-verification.sh",
         "check that all replicas of partitions hold the same records"),
        ("state-change-log-merger", "state_change_log_merger", "Kafka's kafka.tools.StateChangeLogMerger",
         "merge brokers' state-change.log files in time order"),
        ("configs", "configs", "Kafka's kafka-configs.sh",
         "describe or change topic and broker configs at run time"),
        ("acls", "acls", "Kafka's kafka-acls.sh",
         "add, remove or list the ACLs the brokers' authorizer enforces"),
    )  # fmt: skip
    console_parser = commands.add_parser(
        "console",
        help="serve the web console: topics, groups, lag, messages, znodes, reassignment, charts",
        description="A web console (CMAK's, AKHQ's pages) on the SDK, the quorum and the brokers' /metrics.",
    )
    _configure_if_chosen(console_parser, "console", chosen, "zkraft.console.server")
    console_parser.set_defaults(handler=_kafka_tool_entry("console", "run", package="zkraft.console.server"))
    for name, module_name, origin, summary in tools:
        tool_parser = commands.add_parser(name, help=summary, description=f"{origin}: {summary}.")
        _configure_if_chosen(tool_parser, name, chosen, f"zkraft.tools.{module_name}")
        tool_parser.set_defaults(handler=_kafka_tool_entry(module_name, "run"))


def _kafka_tool_entry(
    module_name: str, function: str, package: str | None = None
) -> Callable[[argparse.Namespace], int]:
    def handler(options: argparse.Namespace) -> int:
        import importlib

        from zkraft.tools.topics import ToolError, ToolUsageError

        module = importlib.import_module(package or f"zkraft.tools.{module_name}")
        try:
            return int(getattr(module, function)(options))
        except ToolUsageError as error:
            raise UsageError(str(error)) from None
        except ToolError as error:
            raise CommandError(str(error)) from None

    return handler


def _add_client_configuration(parser: argparse.ArgumentParser) -> None:
    """zkCli's `-client-configuration FILE` (also `--client-configuration`): ZooKeeper client properties."""
    parser.add_argument(
        "-client-configuration",
        "--client-configuration",
        dest="client_configuration",
        type=Path,
        metavar="FILE",
        help="ZooKeeper client properties, as zkCli takes them (zookeeper.client.secure=true, zookeeper.ssl.*)",
    )


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


def build_parser(chosen: str | None = None) -> argparse.ArgumentParser:
    """zkraft's parser; only the `chosen` command (the first word of the command line) gets a Kafka tool's or
    the console's options (_configure_if_chosen)."""
    parser = _Parser(prog=PROG, description="ZooKeeper-era Kafka on a Raft quorum.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parser.set_defaults(
        handler=_missing_command(
            "zkraft",
            "quorum, up, zk, dump-log-segments, topics, console-producer, console-consumer, "
            "producer-perf-test, consumer-perf-test, consumer-groups, reassign-partitions, preferred-replica-election, "
            "leader-election, delete-records, replica-verification, state-change-log-merger, configs, acls or console",
        )
    )

    quorum = commands.add_parser("quorum", help="run or inspect a quorum node")
    quorum_commands = quorum.add_subparsers(dest="quorum_command", metavar="COMMAND", parser_class=_Parser)
    quorum.set_defaults(handler=_missing_command("zkraft quorum", "start, status, add, remove or transfer-leadership"))

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
    start.add_argument(
        "--join",
        metavar="HOST:PORT",
        help="join the running cluster a member of which listens there, without --peers (property quorum.join); "
        "then `zkraft quorum add` adds this node",
    )
    start.add_argument(
        "--client-port",
        help="port serving ZooKeeper clients (kazoo, zkCli), 0: none (property clientPort, default 2181)",
    )
    start.add_argument(
        "--client-port-address", help="address the client port binds (property clientPortAddress, default 0.0.0.0)"
    )
    start.add_argument(
        "--cpu-placement",
        metavar="auto|off",
        help="auto: when every voter is on this machine, the leader's event loop runs on one CPU and the followers' "
        "on the others, as `zkraft up` runs them; off: the scheduler decides (property quorum.cpu.placement, "
        "default off)",
    )
    start.add_argument(
        "--jaas-config",
        metavar="FILE",
        help='JAAS file whose Server section lists the SASL DIGEST-MD5 users (user_<name>="<password>"); '
        "also taken from -Djava.security.auth.login.config=FILE in SERVER_JVMFLAGS, as ZooKeeper takes it "
        "(property java.security.auth.login.config)",
    )
    start.add_argument("--config", type=Path, help="Java-style .properties file")
    start.set_defaults(handler=_quorum_start)

    status = quorum_commands.add_parser("status", help="show every node's role, term, commit index and lag")
    status.add_argument("--server", required=True, help="host:port[,host:port...] of quorum nodes")
    status.add_argument("--json", action="store_true", help="print one JSON list instead of a table")
    status.add_argument(
        "--timeout", type=_positive_float, default=2.0, help="seconds to wait for each server (default 2)"
    )
    _add_client_configuration(status)
    status.set_defaults(handler=_quorum_status)

    add = quorum_commands.add_parser(
        "add", help="add a node: as a learner, promoted to voter once caught up (or as an observer)"
    )
    add.add_argument("--id", type=int, required=True, help="the new node's id, never used in this cluster")
    add.add_argument("--address", required=True, help="host:port the other nodes dial to reach it")
    add.add_argument("--observer", action="store_true", help="a non-voting member for good (ZooKeeper observer)")
    add.add_argument(
        "--catch-up-timeout", type=_positive_float, default=120.0,
        help="seconds the new node may take to catch up before its promotion (default 120)",
    )  # fmt: skip
    remove = quorum_commands.add_parser("remove", help="remove a node from the quorum (the leader too)")
    remove.add_argument("--id", type=int, required=True, help="the node to remove")
    transfer = quorum_commands.add_parser("transfer-leadership", help="hand leadership to a named voter")
    transfer.add_argument("--to", type=int, required=True, help="the voter to lead")
    for sub in (add, remove, transfer):
        sub.add_argument("--server", required=True, help="host:port[,host:port...] of quorum nodes")
        sub.add_argument(
            "--timeout", type=_positive_float, default=10.0, help="seconds to wait for each change (default 10)"
        )
        _add_client_configuration(sub)
        sub.set_defaults(handler=_quorum_members)

    broker = commands.add_parser("broker", help="run a Kafka broker")
    broker_commands = broker.add_subparsers(dest="broker_command", metavar="COMMAND", parser_class=_Parser)
    broker.set_defaults(handler=_missing_command("zkraft broker", "start"))
    broker_start = broker_commands.add_parser(
        "start",
        help="run one broker in the foreground",
        description="Run one broker. Properties use Kafka's names (broker.id, log.dirs, zookeeper.connect, ...).",
    )
    broker_start.add_argument("--config", type=Path, help="server.properties file")
    broker_start.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="a property, over the file (repeatable)"
    )
    broker_start.add_argument(
        "--jaas-config",
        metavar="FILE",
        help="JAAS file whose Client section (DigestLoginModule username/password) logs the broker in to the quorum "
        "with SASL DIGEST-MD5, needed by zookeeper.set.acl=true; also taken from "
        "-Djava.security.auth.login.config=FILE in KAFKA_OPTS, as Kafka takes it",
    )
    broker_start.set_defaults(handler=_broker_start)

    up = commands.add_parser(
        "up",
        help="run a local cluster in the foreground",
        description="Start a local 3-node quorum and N brokers with all data under one directory; Ctrl-C stops it.",
    )
    up.add_argument("--data-dir", type=Path, required=True, help="directory holding the whole cluster")
    up.add_argument("--brokers", type=_non_negative_int, default=3, help="brokers to run, 0: none (default 3)")
    up.add_argument(
        "--secure",
        action="store_true",
        help="a local CA and a certificate per process, TLS on every port; writes client.properties and "
        "zookeeper-client.properties in the data dir",
    )
    up.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="quorum node or broker property for every node or broker, e.g. raft.tick.ms=20 (repeatable)",
    )
    up.add_argument("--base-port", type=int, default=None, help="first of 3 consecutive quorum ports (default 7001)")
    up.add_argument(
        "--broker-base-port",
        type=int,
        default=None,
        help="first of N consecutive broker gRPC ports (default 9192)",
    )
    up.add_argument(
        "--kafka-base-port",
        type=int,
        default=None,
        help="first of N consecutive Kafka listener ports: the bootstrap servers (default 9092, else the next free)",
    )
    up.add_argument(
        "--zk-base-port",
        type=int,
        default=None,
        help="first of 3 consecutive ZooKeeper client ports, for kazoo, zkCli, Curator (default 2181)",
    )
    up.add_argument(
        "--console-port",
        type=_non_negative_int,
        default=None,
        help="port of the web console (`zkraft console`), 0: none (default 8080, else the next free)",
    )
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
    _add_client_configuration(zk)
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
    _add_kafka_tools(commands, chosen)
    return parser


def _print_error(message: str) -> None:
    line = " ".join(str(message).split()) or "failed"
    print(f"{PROG}: error: {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    # gRPC's C core logs its own copy of errors we already report in one line
    # (a port in use, an unreachable peer); ZKRAFT users get ours only.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    # Before any subcommand imports grpc: gRPC reads its poller choice on import (runtime/grpc_tuning.py).
    from runtime.grpc_tuning import prefer_legacy_poller

    prefer_legacy_poller()

    words = list(sys.argv[1:] if argv is None else argv)
    # zkraft's own options take no value, so the first word that is no option names the command.
    parser = build_parser(chosen=next((word for word in words if not word.startswith("-")), None))
    try:
        options = parser.parse_args(words)
    except UsageError as error:
        _print_error(str(error))
        return EXIT_USAGE
    except SystemExit as exit_request:  # --help
        return exit_request.code if isinstance(exit_request.code, int) else EXIT_OK
    handler: Callable[[argparse.Namespace], int] = options.handler
    try:
        check_event_loop_choice()  # before any process of `up` or a server starts on a setting it cannot use
        check_failpoints()
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
