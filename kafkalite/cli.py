"""`kafkalite` command line: `kafkalite serve [--config FILE] [--override key=value ...]`, and the
client tools `kafkalite topics|configs|console-producer|console-consumer|groups|records`
(kafkalite/tools/, docs/operations.md)."""
from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
import time
from importlib import resources
from pathlib import Path
from typing import NoReturn, Optional, Sequence

log = logging.getLogger("kafkalite")


def default_config_file() -> Path:
    """The packaged server.properties (the same file as the repository's config/server.properties)."""
    return Path(str(resources.files("kafkalite.config").joinpath("server.properties")))


# Kafka's (log4j) level names, and Python's for the same levels
LOG_LEVELS: dict[str, int] = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
                              "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL,
                              "CRITICAL": logging.CRITICAL}


def startup_failure_cause(e: BaseException) -> str:
    """The one line naming why the broker could not start. The broker's own start-up errors
    (log dirs, listeners, ZooKeeper, configs) carry a sentence already; a bare system error gets
    its message and file; anything else (a bug) its type as well."""
    from kafkalite.log.errors import LogError
    from kafkalite.network.socket_server import SocketBindError
    from kafkalite.server.cluster_member import ClusterStartupError
    from kafkalite.server.meta_properties import MetaPropertiesError
    from kafkalite.replica.replica_selector import ClassNotFoundException
    if isinstance(e, (LogError, SocketBindError, ClusterStartupError, MetaPropertiesError, ClassNotFoundException)):
        return str(e)
    if isinstance(e, OSError):
        if e.strerror and e.filename:
            return f"{e.strerror}: {e.filename}"
        return e.strerror or str(e)   # e.g. DescriptorLimitError: its sentence
    return f"{type(e).__name__}: {e}"


def _serve(args: argparse.Namespace, *, exit_after: bool = True) -> int:
    # The cyclic GC stays off until the broker is ready (_run_broker): the start-up builds a heap
    # that lives as long as the process (modules, the metadata tree, every log, partition and
    # metadata entry) and makes next to no cyclic garbage, but each full pass over that growing
    # heap cost 0.2-0.4 s at 10,000 partitions, charged to whatever allocation triggered it.
    gc.disable()
    # The broker needs kafka-python's protocol engine, not its clients (kafka_python_package).
    from kafkalite.protocol.kafka_python_package import defer_package_init, defer_protocol_package_inits
    defer_package_init()
    # ... and each API's protocol classes when it is first used (kafkalite.protocol.messages)
    defer_protocol_package_inits()
    # Imported here so that the client tools, which share this parser, do not load the broker's config
    # model; before `started`, so the reported start-up time means what it meant before.
    from kafkalite.config.server_config import ConfigError, load_config

    started = time.monotonic()
    level = LOG_LEVELS.get(args.log_level.upper())
    if level is None:
        # argparse's wording and exit code, in one line (no usage block before it)
        print(f"kafkalite serve: error: argument --log-level: invalid choice: {args.log_level!r} "
              f"(choose from {', '.join(LOG_LEVELS)})", file=sys.stderr)
        return 2
    config_file = Path(args.config) if args.config else default_config_file()
    try:
        loaded = load_config(config_file, args.override or [])
    except ConfigError as e:
        print(f"kafkalite: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"kafkalite: cannot read config file {config_file}: {e.strerror}", file=sys.stderr)
        return 2
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    for w in loaded.warnings:
        log.warning(w)
    from kafkalite.log.descriptor_limit import raise_open_file_limit
    raised = raise_open_file_limit()
    if raised is not None:
        log.info("Raised the open file limit (RLIMIT_NOFILE) from %d to the hard limit %d", *raised)
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency; stay usable without it
        runner = asyncio.run
    code = runner(_run_broker(loaded.config, started))
    if exit_after:
        exit_without_teardown(code)
    return code


def exit_without_teardown(code: int) -> NoReturn:
    """End the process once the broker has shut down (logs closed and synced, checkpoints and
    the clean-shutdown marker written, its threads joined): the interpreter's teardown would
    only free, one by one, the objects of every partition (1.1 s at 10,000 partitions). Kafka's
    JVM exits the same way, without collecting its heap."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


async def _run_broker(config, started: float) -> int:
    from kafkalite.server.broker import KafkaServer

    server = KafkaServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    from kafkalite.replica.replica_selector import STARTUP_FAILURE
    try:
        bound = await server.startup()
    except Exception as e:  # noqa: BLE001 - every start-up failure ends in one line
        # Kafka's "Fatal error during KafkaServer startup. Prepare to shutdown", with the
        # traceback for whoever runs at DEBUG
        log.debug(STARTUP_FAILURE, exc_info=True)
        try:
            await server.shutdown()
        except Exception:  # noqa: BLE001 - half-started parts may fail; the cause is what counts
            log.debug("Error shutting down after the failed start-up", exc_info=True)
        # last, after whatever the shutdown logged: the line an operator reads
        print(f"kafkalite: cannot start: {startup_failure_cause(e)}", file=sys.stderr, flush=True)
        return 1
    # What the start-up built is moved out of the collector's generations (never scanned again:
    # a full pass over it would stall the loop as it did the start-up), then the GC runs for
    # what serving allocates. Cyclic garbage made before this point stays until exit.
    gc.freeze()
    gc.enable()
    listeners = ", ".join(f"{ep.listener_name}://{ep.host}:{ep.port}" for ep in bound)
    if server.metrics_address is not None:   # before the ready line: tests read the port from it
        print(f"kafkalite metrics: Prometheus endpoint on http://{server.metrics_address[0]}:"
              f"{server.metrics_address[1]}/metrics", flush=True)
    print(f"kafkalite ready: broker {server.broker_id} listening on {listeners} "
          f"(started in {time.monotonic() - started:.3f} s)", flush=True)
    await stop.wait()
    log.info("shutting down")
    await server.shutdown()
    log.info("shut down cleanly")
    return 0


def _command_of(argv: Sequence[str]) -> Optional[str]:
    """The sub-command named on the command line (the top level takes no option with a value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Optional[Sequence[str]] = None, *, exit_after_serve: bool = True) -> int:
    """The `kafkalite` command. ``serve`` ends the process when the broker has shut down
    (:func:`exit_without_teardown`) unless ``exit_after_serve`` is false."""
    from kafkalite.tools.common import add_version_arg

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="kafkalite", description="A Kafka-compatible broker in Python")
    add_version_arg(parser, prefix="kafkalite ")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a broker")
    serve.add_argument("--config", help="server.properties file (default: the packaged one)")
    serve.add_argument("--override", action="append", metavar="KEY=VALUE",
                       help="override a property of the config file (repeatable)")
    serve.add_argument("--log-level", default="INFO",
                       help="logging level: DEBUG (one line per request), INFO, WARN, ERROR (default INFO)")
    add_version_arg(serve)
    serve.set_defaults(func=lambda a: _serve(a, exit_after=exit_after_serve))
    # `kafkalite serve` builds its own parser only: the tools' modules and parsers were 55-60 ms
    # of every broker start-up. Any other command line (a tool, --help, a typo) gets them all.
    if _command_of(argv) != "serve":
        from kafkalite.tools import register_all  # stdlib-only at import; the client library loads when a tool runs
        register_all(sub)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # reported with the sub-command's usage, not the top-level one
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
