"""Exactly-once consume-transform-produce (scripts/eos_transform.py) survives SIGKILL.

M input records on three partitions; the transformer runs as a subprocess, is SIGKILLed after
some committed transactions while another one is open (its first half written and flushed), and
is restarted with the same transactional.id and group. At the end the output topic read with
read_committed holds every input exactly once, in input order per partition; the group's
committed offsets are the input's end offsets; and the killed instance's open transaction was
aborted (its records are in the log, invisible to read_committed).
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator, Optional

import confluent_kafka as ck
import pytest

from tests.harness import BrokerProcess
from tests.integration.test_transactions_confluent import (PARTITIONS, TXN_BROKER_OVERRIDES,
                                                           by_partition, consume_all, group_offsets,
                                                           unique)
from tests.integration.util import create_topic, wait_until

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "eos_transform.py"


@pytest.fixture(scope="module")
def eos_broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(overrides=TXN_BROKER_OVERRIDES) as b:
        yield b


class Transformer:
    """scripts/eos_transform.py as a subprocess; its JSON progress lines collected by a thread."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(SCRIPT), *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                self.stderr.append("stdout: " + line.rstrip())

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in list(self.events) if e.get("event") == event]

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("transformer did not finish:\n" + self.report())

    def report(self) -> str:
        return (f"events (last 10): {self.events[-10:]}\nstderr (last 20):\n"
                + "\n".join(self.stderr[-20:]))


def feed(bootstrap: str, topic: str, m: int) -> dict[int, list[bytes]]:
    """M input records, i to partition i % 3; returns the values per partition in order."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    expect: dict[int, list[bytes]] = {q: [] for q in range(PARTITIONS)}
    for i in range(m):
        v = f"in-{i}".encode()
        p.produce(topic, key=f"k{i}".encode(), value=v, partition=i % PARTITIONS)
        expect[i % PARTITIONS].append(v)
    assert p.flush(30) == 0
    return expect


def transformer_args(bootstrap: str, src: str, dst: str, group: str, tid: str, commit_every: int,
                     delay_ms: float, idle_exit_s: float, pause_open_ms: float = 0) -> list[str]:
    return ["--bootstrap", bootstrap, "--input", src, "--output", dst, "--group", group,
            "--transactional-id", tid, "--commit-every", str(commit_every),
            "--delay-ms", str(delay_ms), "--idle-exit-s", str(idle_exit_s),
            "--pause-open-ms", str(pause_open_ms)]


def kill_while_open(t: Transformer, min_commits: int, timeout: float = 30.0) -> int:
    """SIGKILL once `min_commits` transactions committed and a later one is open; returns the
    number of input records committed before the kill."""
    def open_after_commits() -> Optional[int]:
        ev = list(t.events)
        commits = [i for i, e in enumerate(ev) if e["event"] == "committed"]
        if len(commits) >= min_commits and ev[-1]["event"] == "open":
            return ev[commits[-1]]["total"]
        return None
    if t.proc.poll() is not None:
        raise AssertionError("transformer exited early:\n" + t.report())
    total = wait_until(open_after_commits, timeout=timeout, interval=0.002,
                       what="an open transaction after some commits")
    t.kill()
    # The kill may have landed just after the commit call was made; what counts is the log.
    return int(total)


def run_loop(broker: BrokerProcess, m: int, kills: int, commit_every: int, delay_ms: float,
             seed: int) -> None:
    bs = broker.bootstrap_servers
    src, dst, group, tid = unique("eos-in"), unique("eos-out"), unique("eos-g"), unique("eos-tid")
    create_topic(bs, src, PARTITIONS)
    create_topic(bs, dst, PARTITIONS)
    expect = feed(bs, src, m)
    rnd = random.Random(seed)
    killed_totals = []
    for _ in range(kills):
        # A pause after each half-written transaction leaves the kill a wide window inside it.
        t = Transformer(transformer_args(bs, src, dst, group, tid, commit_every, delay_ms, 0,
                                         pause_open_ms=300))
        try:
            killed_totals.append(kill_while_open(t, min_commits=rnd.randint(1, 3)))
        finally:
            t.kill()
    assert killed_totals and killed_totals[-1] < m, "the input was consumed before any kill"

    final = Transformer(transformer_args(bs, src, dst, group, tid, commit_every, 0, 2.0))
    rc = final.wait(60)
    assert rc == 0, final.report()
    (done,) = final.of("done")
    assert done["aborts"] == 0, final.report()

    out = consume_all(bs, dst, "read_committed", m, timeout=30)
    assert len(out) == m, f"{len(out)} output records for {m} inputs"
    assert sorted(g.value for g in out) == sorted(b"T:" + v for q in expect for v in expect[q])
    for q, got in by_partition(out).items():
        assert [g.value for g in got] == [b"T:" + v for v in expect[q]], f"partition {q} order"
    assert group_offsets(bs, group, src) == {q: len(expect[q]) for q in range(PARTITIONS)}
    # The killed instances' open transactions are in the log but aborted.
    raw = consume_all(bs, dst, "read_uncommitted", m + 1, timeout=5)
    assert len(raw) > m, "no aborted records: the kill did not land inside a transaction"


def test_eos_transform_survives_sigkill(eos_broker: BrokerProcess) -> None:
    run_loop(eos_broker, m=1500, kills=1, commit_every=50, delay_ms=1.0, seed=1)


@pytest.mark.soak
def test_eos_transform_survives_repeated_sigkills(eos_broker: BrokerProcess) -> None:
    run_loop(eos_broker, m=50000, kills=12, commit_every=200, delay_ms=0.2, seed=2)
