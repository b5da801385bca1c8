"""`kafkalite cluster`: a local N-broker kafkalite cluster in ZooKeeper mode, in the foreground.

    kafkalite cluster [--dir DIR] [--brokers N] [--base-port P] [--zookeeper HOST:PORT[/CHROOT]]
                      [--zookeeper-port P] [--override KEY=VALUE ...] [--start-timeout-s S]

Starts a local ZooKeeper (Debian's, as `kafkalite zookeeper` does; data in DIR/zookeeper) unless
`--zookeeper` names a running one, then brokers 0..N-1 (`kafkalite serve` processes with
`broker.id` and `zookeeper.connect`) in parallel on 127.0.0.1, on ports the OS picks or on P, P+1,
...; broker i keeps its log in DIR/broker-i and its own log lines in DIR/broker-i.log. DIR
(default ./kafkalite-cluster) is kept, so the next run finds the cluster's topics and data again.
Once a controller is elected and every broker knows every other, it prints

    kafkalite cluster: zookeeper ready on 127.0.0.1:40123 (pid 1230, data in /abs/DIR/zookeeper)
    kafkalite cluster: broker 0 ready on 127.0.0.1:40125 (pid 1234, log dir /abs/DIR/broker-0)
    ...
    kafkalite cluster ready: bootstrap servers 127.0.0.1:40125,127.0.0.1:40127,127.0.0.1:40129 (controller:
        broker 1, zookeeper.connect 127.0.0.1:40123)

and runs until SIGTERM or SIGINT (Ctrl-C): then it stops the brokers one at a time (each with
controlled shutdown, the controller last), then ZooKeeper, and exits 0. A broker that exits on
its own meanwhile (killed to try a failover, say) is reported in one line on stderr and the rest
keep running. A broker or ZooKeeper that fails to start stops the others; the reason is one line
on stderr and the exit code 1.

The brokers get kafkalite.testing's test-friendly defaults (CLUSTER_TEST_DEFAULTS: 6 s ZooKeeper
sessions, 0.5 s controlled-shutdown backoff, no automatic leader rebalance, ...); `--override`
changes them and any other broker property. Only the standard library is imported: the
`kafkalite` parser imports every tool module.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Optional

from kafkalite.tools.common import add_version_arg, port_number, positive_int
from kafkalite.tools.local_zookeeper import lock_dir

if TYPE_CHECKING:
    from kafkalite.testing import Cluster

TOOL = "cluster"
DEFAULT_DIR = "kafkalite-cluster"
DEFAULT_BROKERS = 3


class _Stopped(Exception):
    """SIGTERM/SIGINT arrived while the cluster was starting."""




def split_zookeeper(connect: str) -> tuple[str, str]:
    """"host:port/chroot" -> ("host:port", "/chroot"); ("host:port", "") without a chroot."""
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    return connect[:slash], connect[slash:].rstrip("/")


# Properties the command sets for each broker, and the option that decides them instead.
SET_BY_THE_COMMAND = {"broker.id": "the brokers are 0..N-1 (--brokers N)",
                      "zookeeper.connect": "use --zookeeper", "listeners": "use --base-port",
                      "log.dirs": "broker i logs to DIR/broker-i (--dir)",
                      "log.dir": "broker i logs to DIR/broker-i (--dir)"}


def parse_overrides(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"--override: expected KEY=VALUE, got {item!r}")
        if key in SET_BY_THE_COMMAND:
            raise ValueError(f"--override {key}: set by kafkalite {TOOL}; {SET_BY_THE_COMMAND[key]}")
        out[key] = value.strip()
    return out


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(TOOL, help="run a local N-broker kafkalite cluster with ZooKeeper (foreground)",
                       description="Run a local ZooKeeper and N kafkalite brokers in ZooKeeper mode on "
                                   "127.0.0.1 in the foreground, their data in --dir; stop with SIGTERM or "
                                   "Ctrl-C (controlled shutdown of each broker, then ZooKeeper).")
    p.add_argument("--dir", default=DEFAULT_DIR, metavar="DIR",
                   help=f"directory for the brokers' logs and ZooKeeper's data, kept after exit "
                        f"(default ./{DEFAULT_DIR})")
    p.add_argument("--brokers", type=positive_int, default=DEFAULT_BROKERS, metavar="N",
                   help=f"number of brokers, ids 0..N-1 (default {DEFAULT_BROKERS})")
    p.add_argument("--base-port", type=port_number, default=0, metavar="P",
                   help="broker i listens on P+i (default: ports the OS picks)")
    p.add_argument("--zookeeper", default=None, metavar="HOST:PORT[/CHROOT]",
                   help="use this running ZooKeeper instead of starting one")
    p.add_argument("--zookeeper-port", type=port_number, default=0, metavar="P",
                   help="client port of the ZooKeeper it starts (default: a free port)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="a broker property for every broker (repeatable)")
    p.add_argument("--start-timeout-s", type=positive_int, default=60, metavar="S",
                   help="how long to wait for ZooKeeper and the brokers (default 60)")
    add_version_arg(p)
    p.set_defaults(func=run, parser=p)


def _fail(message: str) -> int:
    sys.stdout.flush()
    print(f"kafkalite {TOOL}: {message}", file=sys.stderr, flush=True)
    return 1




def run(args: argparse.Namespace) -> int:
    stop_signal: list[int] = []
    starting = [True]

    def on_signal(signum: int, _frame: Optional[FrameType]) -> None:
        first = not stop_signal
        stop_signal.append(signum)
        if first and starting[0]:
            raise _Stopped()   # out of Cluster.start(), which stops what it started

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _run(args, stop_signal, starting)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(args: argparse.Namespace, stop_signal: list[int], starting: list[bool]) -> int:
    from kafkalite.testing import Cluster, ClusterError
    from kafkalite.tools.local_zookeeper import check_installed, port_in_use, zookeeper_jar, ZooKeeperError

    try:
        overrides = parse_overrides(args.override)
    except ValueError as e:
        return _fail(str(e))
    zookeeper, chroot = split_zookeeper(args.zookeeper) if args.zookeeper else (None, "")
    if zookeeper is None:
        try:
            check_installed(zookeeper_jar())
        except ZooKeeperError as e:
            return _fail(str(e))
    if args.base_port:
        if args.base_port + args.brokers - 1 > 65535:
            return _fail(f"--base-port {args.base_port} leaves no room for {args.brokers} brokers")
        busy = [p for p in range(args.base_port, args.base_port + args.brokers) if port_in_use("127.0.0.1", p)]
        if busy:
            return _fail(f"port {busy[0]} on 127.0.0.1 is already in use")
    work_dir = Path(args.dir).expanduser().resolve()
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return _fail(f"cannot create {work_dir}: {e.strerror}")
    lock = lock_dir(work_dir)
    if lock is None:
        return _fail(f"{work_dir} is in use by another kafkalite cluster")
    cluster: Optional[Cluster] = None
    try:
        try:
            cluster = Cluster(args.brokers, overrides, zookeeper=zookeeper, chroot=chroot,
                              start_timeout=float(args.start_timeout_s), base_dir=work_dir,
                              base_port=args.base_port, zookeeper_port=args.zookeeper_port)
            cluster.start()
            starting[0] = False
        except _Stopped:
            return 0
        except ValueError as e:
            return _fail(str(e))
        except ClusterError as e:
            starting[0] = False
            if stop_signal:
                return 0
            zk = cluster.zookeeper_server if cluster is not None else None
            log = (work_dir / f"broker-{e.broker_id}.log" if e.broker_id is not None
                   else zk.log_path if zk is not None and e.summary.startswith("ZooKeeper") else None)
            return _fail(e.summary + (f" (log: {log})" if log is not None else ""))
        if stop_signal:   # arrived between start() returning and the flag above
            return 0
        zk = cluster.zookeeper_server
        if zk is not None:
            pid = zk.proc.pid if zk.proc is not None else None
            print(f"kafkalite {TOOL}: zookeeper ready on {zk.connect_string} (pid {pid}, data in {zk.work_dir})",
                  flush=True)
        for broker_id, broker in cluster.brokers.items():
            print(f"kafkalite {TOOL}: broker {broker_id} ready on {broker.bootstrap_servers} "
                  f"(pid {broker.pid}, log dir {broker.log_dir})", flush=True)
        try:
            controller = f"broker {cluster.controller_id(timeout=5.0)}"
        except ClusterError:
            controller = "none yet"
        print(f"kafkalite {TOOL} ready: bootstrap servers {cluster.bootstrap_servers} "
              f"(controller: {controller}, zookeeper.connect {cluster.zookeeper_connect})", flush=True)
        return _watch(cluster, stop_signal)
    finally:
        starting[0] = False
        if cluster is not None:
            try:
                cluster.stop()
            except ClusterError as e:
                print(f"kafkalite {TOOL}: {e}", file=sys.stderr, flush=True)
            cluster.close()
        os.close(lock)


def _watch(cluster: "Cluster", stop_signal: list[int]) -> int:
    """Until a stop signal: report brokers that exit on their own; ZooKeeper's exit ends the run."""
    reported: set[tuple[int, int]] = set()
    while not stop_signal:
        time.sleep(0.2)
        for broker_id, broker in cluster.brokers.items():
            code = broker.exit_code
            if code is not None and (broker_id, broker.starts) not in reported:
                reported.add((broker_id, broker.starts))
                print(f"kafkalite {TOOL}: broker {broker_id} exited with code {code} "
                      f"(log: {broker.stderr_path})", file=sys.stderr, flush=True)
        zk = cluster.zookeeper_server
        if zk is not None and zk.proc is not None and zk.proc.poll() is not None:
            code = zk.proc.returncode
            zk.proc = None
            return _fail(f"ZooKeeper exited unexpectedly with {code} (log: {zk.log_path})")
    return 0
