"""Network partitions on one machine (root only): each broker in a network namespace of its own.

    with BrokerNetwork(brokers=3) as net:          # namespaces knf<n>n0.., one bridge knf<n>br
        net.host_ip                                # 10.77.<n>.1, the host's side: ZooKeeper, clients
        net.broker_ip(0), net.command_prefix(0)    # 10.77.<n>.10, ["ip", "netns", "exec", "knf<n>n0"]
        with net.partition(0, zookeeper_port=zk.port, brokers=[1, 2]):
            ...                                    # broker 0 reaches neither ZooKeeper nor 1 and 2;
                                                   # the host's clients still reach broker 0
        # healed here: exactly the rules the partition added are gone

Layout: a Linux bridge on the host with address 10.77.<n>.1/24 and, per broker, a veth pair whose
host end is a bridge port and whose other end, in namespace knf<n>n<i>, has 10.77.<n>.(10+i)/24.
Everything stays on that bridge: the namespaces have no default route, the bridge is connected to
no other interface and nothing is forwarded, so no packet of a test leaves the machine.

A partition is a set of iptables DROP rules *inside the victim's namespace* (INPUT and OUTPUT, so
both directions; DROP, not REJECT, so the victim's connections hang as on a real cut): from and to
each other broker's address, and from and to ZooKeeper's port on the host address. The host's
clients reach the victim's listener (another port) as before. Each rule carries a comment naming
the partition; heal() deletes exactly those rules.

Cleanup: close() (the context manager, the fixtures) deletes the veths (their peers go with them),
the namespaces and the bridge. A run holds an flock on /run/kafkalite-netfaults/<n>.lock for its
subnet <n> while it lives; a new run first sweeps every knf<n>* namespace and link whose lock nobody
holds (left by a crashed or killed run), then takes the lowest free <n>.
"""
from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

import pytest

PREFIX = "knf"                              # every name this module creates starts with it
SUBNET = "10.77"                            # 10.77.<n>.0/24, n in 1..254, one per live run
LOCK_DIR = Path("/run/kafkalite-netfaults") if Path("/run").is_dir() else Path("/tmp/kafkalite-netfaults")
_NAME_RE = re.compile(rf"^{PREFIX}(\d+)(?:br|h\d+|n\d+)$")


class NetFaultsError(RuntimeError):
    """A namespace, link or rule could not be made or removed; the message has the command's output."""


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise NetFaultsError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def require_root_tools() -> None:
    """Fails (never skips) with what is missing: root, `ip`, an iptables."""
    if os.geteuid() != 0:
        raise NetFaultsError("network partitions need root (network namespaces, iptables)")
    for tool in ("ip",):
        if shutil.which(tool) is None:
            raise NetFaultsError(f"{tool} not found (Debian's iproute2)")
    if not any(shutil.which(t) for t in ("iptables-nft", "iptables-legacy", "iptables")):
        raise NetFaultsError("iptables not found (Debian's iptables package; scripts/test.sh installs it)")


def _netns_names() -> list[str]:
    out = _run("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _link_names() -> list[str]:
    out = _run("ip", "-o", "link", "show", check=False).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@", 1)[0])
    return names


def _subnets_in_use() -> set[int]:
    """Third octets of 10.77.x.y addresses on the host (ours or anybody's)."""
    out = _run("ip", "-4", "-o", "addr", "show", check=False).stdout
    return {int(m.group(1)) for m in re.finditer(rf"inet {re.escape(SUBNET)}\.(\d+)\.\d+/", out)}


def _ours(n: int) -> tuple[list[str], list[str]]:
    """(namespaces, links) named for subnet n."""
    def mine(name: str) -> bool:
        m = _NAME_RE.match(name)
        return m is not None and int(m.group(1)) == n
    return [ns for ns in _netns_names() if mine(ns)], [link for link in _link_names() if mine(link)]


def _remove(n: int) -> None:
    """Everything named for subnet n: host-side veths (their peers go too), namespaces, bridge."""
    namespaces, links = _ours(n)
    for link in sorted(links, key=lambda name: name.endswith("br")):   # the bridge last
        _run("ip", "link", "del", link, check=False)
    for ns in namespaces:
        _run("ip", "netns", "del", ns, check=False)


class _SubnetLock:
    """An flock on LOCK_DIR/<n>.lock: held while a run uses subnet n, released when it dies."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.fd: Optional[int] = None

    def try_acquire(self) -> bool:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        fd = os.open(LOCK_DIR / f"{self.n}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def sweep_stale() -> list[int]:
    """Removes the namespaces and links of every subnet whose run is gone (its lock is free);
    returns those subnets."""
    stale = set()
    for name in _netns_names() + _link_names():
        m = _NAME_RE.match(name)
        if m:
            stale.add(int(m.group(1)))
    swept = []
    for n in sorted(stale):
        lock = _SubnetLock(n)
        if lock.try_acquire():
            try:
                _remove(n)
                swept.append(n)
            finally:
                lock.release()
    return swept


def iptables_command(netns: str) -> str:
    """The first iptables that works in `netns`: iptables-nft, iptables-legacy, then plain iptables."""
    errors = []
    for tool in ("iptables-nft", "iptables-legacy", "iptables"):
        if shutil.which(tool) is None:
            continue
        proc = _run("ip", "netns", "exec", netns, tool, "-w", "-S", check=False)
        if proc.returncode == 0:
            return tool
        errors.append(f"{tool}: {proc.stderr.strip()}")
    raise NetFaultsError("no iptables works in a network namespace here: " + "; ".join(errors))


@dataclass
class Partition:
    """DROP rules in one namespace, added by apply(), deleted (exactly those) by heal()."""

    netns: str
    iptables: str
    tag: str
    rules: list[list[str]]          # e.g. ["INPUT", "-s", "10.77.3.11", "-j", "DROP"], without the comment
    applied: list[list[str]] = field(default_factory=list)

    def _spec(self, rule: list[str]) -> list[str]:
        chain, *match = rule
        return [chain, *match[:-2], "-m", "comment", "--comment", self.tag, *match[-2:]]

    def apply(self) -> "Partition":
        try:
            for rule in self.rules:
                _run("ip", "netns", "exec", self.netns, self.iptables, "-w", "-A", *self._spec(rule))
                self.applied.append(rule)
        except BaseException:
            self.heal()
            raise
        return self

    def heal(self) -> None:
        """Deletes the rules this partition added, newest first; idempotent."""
        errors = []
        while self.applied:
            rule = self.applied.pop()
            proc = _run("ip", "netns", "exec", self.netns, self.iptables, "-w", "-D", *self._spec(rule), check=False)
            if proc.returncode != 0:
                errors.append(f"{rule}: {proc.stderr.strip()}")
        if errors:
            raise NetFaultsError(f"heal of {self.tag} in {self.netns} left rules: " + "; ".join(errors))

    @property
    def active(self) -> bool:
        return bool(self.applied)

    def __enter__(self) -> "Partition":
        return self

    def __exit__(self, *exc: object) -> None:
        self.heal()


class BrokerNetwork:
    """A bridge on the host and one network namespace per broker (see the module docstring)."""

    def __init__(self, brokers: int) -> None:
        if not 1 <= brokers <= 200:
            raise ValueError(f"1..200 brokers, not {brokers}")
        self.brokers = brokers
        self.n: Optional[int] = None
        self._lock: Optional[_SubnetLock] = None
        self._iptables: Optional[str] = None
        self._partitions: list[Partition] = []
        self._count = 0

    # -- names and addresses ------------------------------------------------------------------
    def _need(self) -> int:
        if self.n is None:
            raise NetFaultsError("BrokerNetwork not set up (use it as a context manager or call setup())")
        return self.n

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self._need()}br"

    @property
    def host_ip(self) -> str:
        return f"{SUBNET}.{self._need()}.1"

    def netns(self, broker_id: int) -> str:
        return f"{PREFIX}{self._need()}n{broker_id}"

    def _host_veth(self, broker_id: int) -> str:
        return f"{PREFIX}{self._need()}h{broker_id}"

    def broker_ip(self, broker_id: int) -> str:
        return f"{SUBNET}.{self._need()}.{10 + broker_id}"

    @property
    def iptables(self) -> str:
        """The iptables binary that works in the namespaces (iptables-nft where it does)."""
        if self._iptables is None:
            raise NetFaultsError("BrokerNetwork not set up")
        return self._iptables

    def command_prefix(self, broker_id: int) -> list[str]:
        """Runs a command in the broker's namespace; `ip netns exec` execs it (same pid)."""
        return ["ip", "netns", "exec", self.netns(broker_id)]

    # -- life cycle ---------------------------------------------------------------------------
    def setup(self) -> "BrokerNetwork":
        require_root_tools()
        sweep_stale()
        in_use = _subnets_in_use()
        for n in range(1, 255):
            if n in in_use:
                continue
            lock = _SubnetLock(n)
            if lock.try_acquire():
                self.n, self._lock = n, lock
                break
        else:
            raise NetFaultsError(f"no free subnet {SUBNET}.<n>.0/24")
        try:
            _remove(self.n)   # nothing should be there; a run that died between sweep and lock
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            _run("ip", "addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
            _run("ip", "link", "set", self.bridge, "up")
            for i in range(self.brokers):
                ns, host_end, ns_end = self.netns(i), self._host_veth(i), f"{PREFIX}{self.n}n{i}"
                _run("ip", "netns", "add", ns)
                _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end, "netns", ns)
                _run("ip", "link", "set", host_end, "master", self.bridge, "up")
                _run("ip", "-n", ns, "addr", "add", f"{self.broker_ip(i)}/24", "dev", ns_end)
                _run("ip", "-n", ns, "link", "set", ns_end, "up")
                _run("ip", "-n", ns, "link", "set", "lo", "up")
            self._iptables = iptables_command(self.netns(0))
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Heals every partition, then removes the veths, namespaces and bridge; idempotent."""
        if self.n is None:
            return
        try:
            for p in self._partitions:
                try:
                    p.heal()
                except NetFaultsError:
                    pass   # its namespace goes next anyway
            _remove(self.n)
            left = _ours(self.n)
            if left[0] or left[1]:
                raise NetFaultsError(f"left behind: namespaces {left[0]}, links {left[1]}")
        finally:
            if self._lock is not None:
                self._lock.release()
            self.n, self._lock = None, None

    def __enter__(self) -> "BrokerNetwork":
        return self.setup()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- faults -------------------------------------------------------------------------------
    def partition(self, victim: int, *, zookeeper_port: Optional[int] = None,
                  brokers: Iterable[int] = ()) -> Partition:
        """Cuts `victim` off from ZooKeeper's port on the host address (if given) and from each of
        `brokers`, both ways; applied at once; a context manager that heals on exit."""
        self._count += 1
        tag = f"{PREFIX}{self._need()}p{self._count}"
        rules: list[list[str]] = []
        if zookeeper_port is not None:
            rules += [["OUTPUT", "-p", "tcp", "-d", self.host_ip, "--dport", str(zookeeper_port), "-j", "DROP"],
                      ["INPUT", "-p", "tcp", "-s", self.host_ip, "--sport", str(zookeeper_port), "-j", "DROP"]]
        for other in brokers:
            if other == victim:
                raise ValueError(f"broker {victim} cannot be partitioned from itself")
            rules += [["OUTPUT", "-d", self.broker_ip(other), "-j", "DROP"],
                      ["INPUT", "-s", self.broker_ip(other), "-j", "DROP"]]
        assert self._iptables is not None
        p = Partition(self.netns(victim), self._iptables, tag, rules)
        self._partitions.append(p)
        return p.apply()

    def isolate(self, victim: int, zookeeper_port: int) -> Partition:
        """`victim` cut off from ZooKeeper and every other broker; the host's clients still reach it."""
        return self.partition(victim, zookeeper_port=zookeeper_port,
                              brokers=[b for b in range(self.brokers) if b != victim])

    def rules(self, broker_id: int) -> list[str]:
        """The iptables rules this module added in the broker's namespace (`-S` lines)."""
        assert self._iptables is not None
        out = _run("ip", "netns", "exec", self.netns(broker_id), self._iptables, "-w", "-S").stdout
        return [line for line in out.splitlines() if f"{PREFIX}{self._need()}p" in line]


# -- a cluster of brokers in namespaces -----------------------------------------------------------

@dataclass
class NetCluster:
    """A kafkalite.testing.Cluster whose brokers live in `net`'s namespaces, on a ZooKeeper of its
    own listening on the host address (the session's ZooKeeper listens on 127.0.0.1, which the
    namespaces cannot reach)."""

    net: BrokerNetwork
    zookeeper: Any          # kafkalite.tools.local_zookeeper.ZooKeeperServer
    cluster: Any            # kafkalite.testing.Cluster

    @property
    def zookeeper_port(self) -> int:
        return int(self.zookeeper.port)

    def isolate(self, victim: int) -> Partition:
        return self.net.isolate(victim, self.zookeeper_port)

    def close(self) -> None:
        try:
            for b in self.cluster.brokers.values():
                b.kill()   # SIGKILL: a clean stop behind a partition would only wait
            self.cluster.close()
        finally:
            try:
                self.zookeeper.close()
            finally:
                self.net.close()


@contextmanager
def net_cluster(brokers: int = 3, overrides: Optional[dict[str, Any]] = None,
                **cluster_kwargs: Any) -> Iterator[NetCluster]:
    """A started NetCluster; everything (brokers, ZooKeeper, namespaces, rules) gone on exit."""
    from kafkalite.testing import Cluster
    from kafkalite.tools.local_zookeeper import ZooKeeperServer

    net = BrokerNetwork(brokers).setup()
    zk = None
    nc = None
    try:
        zk = ZooKeeperServer()
        zk.host = net.host_ip    # clientPortAddress: reachable from the namespaces through the bridge
        zk.start()
        cluster = Cluster(brokers, overrides, zookeeper=zk.connect_string,
                          broker_hosts={i: net.broker_ip(i) for i in range(brokers)},
                          broker_command_prefixes={i: net.command_prefix(i) for i in range(brokers)},
                          **cluster_kwargs)
        nc = NetCluster(net, zk, cluster)
        cluster.start()
        yield nc
    finally:
        if nc is not None:
            nc.close()
        else:
            try:
                if zk is not None:
                    zk.close()
            finally:
                net.close()


@pytest.fixture
def make_net_cluster(request: pytest.FixtureRequest) -> Iterator[Callable[..., NetCluster]]:
    """`make_net_cluster(brokers=3, overrides={...})` -> a started NetCluster; all of it torn
    down at teardown (a failed test's broker logs kept as tests/cluster's make_cluster keeps them)."""
    made: list[Any] = []
    stack: list[Any] = []

    def make(brokers: int = 3, overrides: Optional[dict[str, Any]] = None, **kwargs: Any) -> NetCluster:
        cm = net_cluster(brokers, overrides, **kwargs)
        nc = cm.__enter__()
        stack.append(cm)
        made.append(nc)
        return nc

    try:
        yield make
    finally:
        if _call_failed(request):
            _keep_logs(request, [nc.cluster for nc in made])
        while stack:
            stack.pop().__exit__(None, None, None)


def _call_failed(request: pytest.FixtureRequest) -> bool:
    try:
        from tests.cluster.conftest import _CALL_FAILED
    except ImportError:
        return False
    return bool(request.node.stash.get(_CALL_FAILED, False))


def _keep_logs(request: pytest.FixtureRequest, clusters: list[Any]) -> None:
    from tests.cluster.conftest import FAILED_LOGS_DIR
    where = FAILED_LOGS_DIR / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)
    where.mkdir(parents=True, exist_ok=True)
    for i, c in enumerate(clusters):
        for broker_id, b in c.brokers.items():
            (where / f"cluster{i}-broker{broker_id}.log").write_text(b.output())
    print(f"broker logs of the failed test kept in {where}")
