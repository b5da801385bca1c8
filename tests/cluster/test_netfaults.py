"""tests/support/netfaults.py proves itself: namespaces, rules that cut exactly what they say and
heal that removes exactly them; then a real partition of a 3-broker cluster's controller (cut off
from ZooKeeper and the other brokers, still reachable from the host's clients): its ZooKeeper
session expires, another broker becomes controller (epoch + 1); after the heal it registers again
with a new session and follows the new controller."""
from __future__ import annotations

import socket
import subprocess
import time
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from tests.cluster.util import (FAST_EXPIRY, FAST_EXPIRY_MS, broker_czxid, broker_ids, controller_epoch, controller_seen_by, controller_znode,
                                request, wait_until, zookeeper)
from tests.support.netfaults import PREFIX, BrokerNetwork, NetFaultsError, _netns_names, _link_names
from tests.support.netfaults import make_net_cluster  # noqa: F401 - the fixture

pytestmark = pytest.mark.cluster

SESSION_TIMEOUT_S = FAST_EXPIRY_MS / 1000   # the isolated controller's session


def _probe(net: BrokerNetwork, source: int, host: str, port: int) -> str:
    """'ok' or the exception name of a TCP connect from broker `source`'s namespace (1 s)."""
    code = ("import socket\ntry:\n    socket.create_connection((%r, %d), timeout=1).close(); print('ok')\n"
            "except Exception as e:\n    print(type(e).__name__)" % (host, port))
    return subprocess.run(net.command_prefix(source) + ["python3", "-c", code], capture_output=True, text=True,
                          timeout=20).stdout.strip()


def _host_probe(host: str, port: int) -> str:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return "ok"
    except OSError as e:
        return type(e).__name__


def _listener(host: str, port: int, prefix: list[str]) -> subprocess.Popen[str]:
    """An accept-and-close TCP server at host:port in a namespace (prefix) or on the host ([])."""
    code = ("import socket\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind((%r, %d)); s.listen(); print('ready', flush=True)\n"
            "while True:\n    s.accept()[0].close()" % (host, port))
    p = subprocess.Popen(prefix + ["python3", "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def test_partition_rules_and_heal() -> None:
    net = BrokerNetwork(3)
    with net:
        n = net.n
        names = [net.netns(i) for i in range(3)]
        assert set(names) <= set(_netns_names())
        assert {net.bridge, *(f"{PREFIX}{n}h{i}" for i in range(3))} <= set(_link_names())
        assert [net.broker_ip(i) for i in range(3)] == [f"10.77.{n}.10", f"10.77.{n}.11", f"10.77.{n}.12"]
        zk_port, other_port, broker_port = 47001, 47002, 47003
        servers = [_listener(net.host_ip, zk_port, []), _listener(net.host_ip, other_port, [])]
        servers += [_listener(net.broker_ip(i), broker_port, net.command_prefix(i)) for i in range(3)]
        try:
            def reachability() -> dict[str, str]:
                return {
                    "0->zk": _probe(net, 0, net.host_ip, zk_port),
                    "0->host other port": _probe(net, 0, net.host_ip, other_port),
                    "0->1": _probe(net, 0, net.broker_ip(1), broker_port),
                    "2->0": _probe(net, 2, net.broker_ip(0), broker_port),
                    "1->2": _probe(net, 1, net.broker_ip(2), broker_port),
                    "1->zk": _probe(net, 1, net.host_ip, zk_port),
                    "host->0": _host_probe(net.broker_ip(0), broker_port),
                }
            everything = {k: "ok" for k in reachability()}
            assert reachability() == everything
            # a rule of somebody else's in the victim's namespace survives the heal
            foreign = ["OUTPUT", "-d", "10.77.250.250", "-j", "DROP"]
            subprocess.run(net.command_prefix(0) + [net.iptables, "-w", "-A", *foreign], check=True)
            with net.isolate(0, zk_port) as p:
                assert p.active and len(net.rules(0)) == 6 and net.rules(1) == net.rules(2) == []
                assert reachability() == {**everything, "0->zk": "TimeoutError", "0->1": "TimeoutError",
                                          "2->0": "TimeoutError"}
            assert not p.active and net.rules(0) == []
            p.heal()   # idempotent
            assert reachability() == everything
            listed = subprocess.run(net.command_prefix(0) + [net.iptables, "-w", "-S", "OUTPUT"],
                                    capture_output=True, text=True, check=True).stdout
            assert "-A OUTPUT -d 10.77.250.250/32 -j DROP" in listed.splitlines()
            # a partition from one broker only
            with net.partition(1, brokers=[2]):
                assert _probe(net, 1, net.broker_ip(2), broker_port) == "TimeoutError"
                assert _probe(net, 1, net.broker_ip(0), broker_port) == "ok"
                assert _probe(net, 1, net.host_ip, zk_port) == "ok"
            with pytest.raises(ValueError):
                net.partition(1, brokers=[1])
        finally:
            for s in servers:
                s.kill()
                s.wait()
    assert net.n is None
    assert not [x for x in _netns_names() + _link_names() if x.startswith(f"{PREFIX}{n}")]
    with pytest.raises(NetFaultsError):
        net.host_ip


def test_stale_namespaces_of_a_killed_run_are_swept() -> None:
    # a run SIGKILLed with its namespaces up leaves them behind, lock released; the next run sweeps them
    code = ("import os\nfrom tests.support.netfaults import BrokerNetwork\n"
            "net = BrokerNetwork(2).setup(); print(net.n, flush=True); os.kill(os.getpid(), 9)")
    out = subprocess.run(["python3", "-c", code], capture_output=True, text=True, timeout=60, cwd=_repo_root())
    n = int(out.stdout.split()[0])
    assert f"{PREFIX}{n}n0" in _netns_names() and f"{PREFIX}{n}br" in _link_names()
    with BrokerNetwork(1) as net:
        assert not [x for x in _netns_names() + _link_names() if x.startswith(f"{PREFIX}{n}") and
                    (net.n != n or x.endswith(("n1", "h1")))]


def _repo_root() -> str:
    import os
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _api_versions_ok(broker: Any) -> bool:
    resp = request(broker, ApiVersionsRequest(), 0, timeout_ms=3000)
    return resp.error_code == 0 and len(resp.api_keys) > 0


def test_isolated_controller_loses_its_session_and_rejoins(make_net_cluster: Any) -> None:
    nc = make_net_cluster(3, FAST_EXPIRY)
    cluster = nc.cluster
    ids = [0, 1, 2]
    wait_until(lambda: all(broker_ids(cluster.broker(b)) == ids for b in ids), 30, "every broker knows every broker")
    with zookeeper(cluster) as zk:
        controller = cluster.controller_id()
        assert controller_znode(zk) == controller
        others = [b for b in ids if b != controller]
        epoch, epoch_version = controller_epoch(zk)
        old_czxid = broker_czxid(zk, controller)
        victim = cluster.broker(controller)
        with nc.isolate(controller):
            cut_at = time.monotonic()
            # the host's client still talks to it, throughout
            assert _api_versions_ok(victim)
            expired = wait_until(lambda: zk.exists(f"/brokers/ids/{controller}") is None, SESSION_TIMEOUT_S + 10,
                                 f"/brokers/ids/{controller} deleted by the session expiry")
            wait_until(lambda: controller_znode(zk) in others, 15, "another broker holds /controller")
            new_controller = controller_znode(zk)
            assert controller_epoch(zk) == (epoch + 1, epoch_version + 1)
            wait_until(lambda: all(controller_seen_by(cluster.broker(b)) == new_controller for b in others), 15,
                       f"brokers {others} name controller {new_controller}")
            wait_until(lambda: all(broker_ids(cluster.broker(b)) == others for b in others), 15,
                       f"brokers {others} list only {others}")
            assert _api_versions_ok(victim)
            # cut off, it cannot know yet: it still names itself (its session is lost, not yet seen)
            assert victim.running
            print(f"session gone {expired + 0.0:.1f} s after the cut; controller {controller} -> {new_controller}")
            assert time.monotonic() - cut_at >= SESSION_TIMEOUT_S * 0.5
        # healed: it learns its session expired, registers with a new one, follows the new controller
        wait_until(lambda: (broker_czxid(zk, controller) or 0) > old_czxid, 30, f"broker {controller} registered again")
        wait_until(lambda: all(broker_ids(cluster.broker(b)) == ids and controller_seen_by(cluster.broker(b))
                               == new_controller for b in ids), 30,
                   f"every broker lists all three and names controller {new_controller}")
        assert controller_znode(zk) == new_controller
        assert controller_epoch(zk) == (epoch + 1, epoch_version + 1)
        assert nc.net.rules(controller) == []
