"""The command-line tools as processes (`python -m kafkalite topics ...`) against a real broker:
exact stdout, stderr and exit codes, including the error cases; what a tool did to the cluster is
checked independently with kafka-python's own clients."""
from __future__ import annotations

import base64
import datetime
import json
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import pytest
import kafka.errors as Errors
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec

from tests.harness import BrokerProcess
from tests.integration.util import split_host_port, wait_until

BROKER_OVERRIDES = {
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


@dataclass
class Run:
    rc: int
    out: str
    err: str


def run_tool(bs: Optional[str], tool: str, *args: str, stdin: Optional[str] = None, timeout: float = 60) -> Run:
    argv = [sys.executable, "-m", "kafkalite", tool]
    if bs is not None:
        argv += ["--bootstrap-server", bs]
    r = subprocess.run(argv + list(args), input=stdin, capture_output=True, text=True, timeout=timeout)
    return Run(r.returncode, r.stdout, r.stderr)


@pytest.fixture(scope="module")
def bs() -> Iterator[str]:
    with BrokerProcess(overrides=BROKER_OVERRIDES) as b:
        yield b.bootstrap_servers


@pytest.fixture(scope="module")
def admin(bs: str) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=bs)
    # The first FindCoordinator creates __consumer_offsets and answers COORDINATOR_NOT_AVAILABLE
    # until its partitions are loaded, as Kafka does; kafka-python's admin calls do not retry it,
    # so a test whose first group call is the admin's own (run alone, or first) waits here.
    deadline = time.monotonic() + 60
    while True:
        try:
            a.describe_groups(["test-cli-tools-coordinator-ready"])
            break
        except Errors.CoordinatorNotAvailableError:
            assert time.monotonic() < deadline, "the group coordinator never became available"
            time.sleep(0.1)
    yield a
    a.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def kafka_uuid_string(topic_id: str) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes without padding."""
    return base64.urlsafe_b64encode(uuid.UUID(topic_id).bytes).decode().rstrip("=")


def table(out: str) -> list[list[str]]:
    """A printed table as rows of fields, after checking that every field of every row starts
    in its header's column (the documented alignment)."""
    lines = out.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", lines[0])]
    for line in lines[1:]:
        assert [m.start() for m in re.finditer(r"\S+", line)] == starts, (lines[0], line)
    return [line.split() for line in lines]


def consume_all(bs: str, topic: str, partitions: int = 1, expected: Optional[int] = None) -> list[tuple]:
    """Every record of the topic as (partition, offset, key, value, headers), read with kafka-python."""
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    out: list[tuple] = []
    deadline = time.monotonic() + 15
    while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=200).values():
            out += [(r.partition, r.offset, r.key, r.value, list(r.headers)) for r in recs]
    c.close()
    if expected is not None:
        assert len(out) == expected
    return sorted(out, key=lambda r: (r[0], r[1]))


def produce(bs: str, topic: str, values: list[bytes], partition: int = 0,
            timestamps: Optional[list[int]] = None) -> None:
    p = KafkaProducer(bootstrap_servers=bs)
    for i, v in enumerate(values):
        p.send(topic, value=v, partition=partition, timestamp_ms=timestamps[i] if timestamps else None)
    p.flush()
    p.close()


def committed(admin: KafkaAdminClient, group: str) -> dict[tuple[str, int], int]:
    got = admin.list_group_offsets({group: None}).get(group, {})
    return {(tp.topic, tp.partition): oam.offset for tp, oam in got.items()}


class BackgroundConsumer:
    """`kafkalite console-consumer` running until SIGTERM, its printed lines collected."""

    def __init__(self, bs: str, topic: str, *args: str) -> None:
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafkalite", "console-consumer", "--bootstrap-server", bs, "--topic", topic,
             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def stop(self) -> tuple[int, str]:
        """SIGTERM; the exit code and stderr once it exited (the rest of stdout is in `lines`)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        assert self.proc.stderr is not None
        return self.proc.returncode, self.proc.stderr.read()


# ============================================================================================
# topics
# ============================================================================================

def test_topics_create_list_delete_and_their_errors(bs: str, admin: KafkaAdminClient) -> None:
    t = unique("tools-topic")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--partitions", "3",
                    "--config", "retention.ms=600000", "--config", "cleanup.policy=compact") == \
        Run(0, f"Created topic {t}.\n", "")
    (md,) = admin.describe_topics([t])
    assert (md["error_code"], len(md["partitions"])) == (0, 3)
    assert {p["replica_nodes"][0] for p in md["partitions"]} == {0}

    assert run_tool(bs, "topics", "--create", "--topic", t) == \
        Run(1, "", f"kafkalite topics: topic '{t}' already exists\n")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--if-not-exists") == Run(0, "", "")

    listed = run_tool(bs, "topics", "--list")
    assert listed.rc == 0 and listed.err == ""
    names = listed.out.splitlines()
    assert names == sorted(names) and t in names
    assert all(not n.startswith("__") for n in run_tool(bs, "topics", "--list", "--exclude-internal").out.splitlines())

    assert run_tool(bs, "topics", "--delete", "--topic", t) == Run(0, "", "")
    (md,) = admin.describe_topics([t])
    assert md["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert run_tool(bs, "topics", "--delete", "--topic", t) == \
        Run(1, "", f"kafkalite topics: topic '{t}' does not exist\n")
    assert run_tool(bs, "topics", "--delete", "--topic", t, "--if-exists") == Run(0, "", "")
    assert run_tool(bs, "topics", "--describe", "--topic", t) == \
        Run(1, "", f"kafkalite topics: topic '{t}' does not exist\n")


def test_topics_create_errors_come_from_the_broker_in_one_line(bs: str) -> None:
    t = unique("tools-bad")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--config", "no.such.config=1") == \
        Run(1, "", "kafkalite topics: unknown topic config name: no.such.config\n")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--config", "retention.ms=abc") == \
        Run(1, "", "kafkalite topics: invalid value abc for configuration retention.ms: Not a number of type LONG\n")
    assert run_tool(bs, "topics", "--create", "--topic", "bad/name") == \
        Run(1, "", "kafkalite topics: topic name is invalid: 'bad/name' contains one or more characters other "
                   "than ASCII alphanumerics, '.', '_' and '-'\n")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--replication-factor", "3") == \
        Run(1, "", "kafkalite topics: replication factor: 3 larger than available brokers: 1\n")


USAGE_ERRORS: list[tuple[list[str], str]] = [
    (["topics"], "one of the arguments --create --list --describe --alter --delete is required"),
    (["topics", "--create", "--list"], "argument --list: not allowed with argument --create"),
    (["topics", "--create"], "--create requires --topic"),
    (["topics", "--alter", "--topic", "t"], "--alter requires --partitions, --config or --delete-config"),
    (["topics", "--create", "--topic", "t", "--partitions", "0"], "argument --partitions: must be > 0, got 0"),
    (["topics", "--create", "--topic", "t", "--config", "retention.ms"],
     "invalid --config 'retention.ms': expected KEY=VALUE"),
    (["topics", "--list", "--partitions", "2"], "--partitions cannot be used with --list"),
    (["topics", "--delete", "--topic", "t", "--if-not-exists"], "--if-not-exists cannot be used with --delete"),
    (["configs", "--describe"], "the following arguments are required: --entity-type"),
    (["configs", "--entity-type", "topics", "--alter", "--entity-name", "t"],
     "--alter requires --add-config or --delete-config"),
    (["configs", "--entity-type", "topics", "--entity-default", "--describe"],
     "--entity-default is only valid with --entity-type brokers"),
    (["configs", "--entity-type", "brokers", "--entity-name", "x", "--describe"],
     "--entity-name must be a broker id for --entity-type brokers, got 'x'"),
    (["configs", "--entity-type", "topics", "--entity-name", "t", "--alter", "--add-config", "a=1",
      "--delete-config", "a"], "config 'a' is both added and deleted"),
    (["console-producer"], "the following arguments are required: --topic"),
    (["console-producer", "--topic", "t", "--property", "no.such=1"], "unknown property 'no.such'"),
    (["console-producer", "--topic", "t", "--property", "null.marker=\t"],
     "null.marker and key.separator may not be equal"),
    (["console-producer", "--topic", "t", "--producer-property", "linger.ms=soon"],
     "invalid value 'soon' for producer property 'linger.ms'"),
    (["console-consumer", "--topic", "t", "--offset", "3"], "--offset requires --partition"),
    (["console-consumer", "--topic", "t", "--partition", "0", "--offset", "-5"],
     "--offset must be earliest, latest or a non-negative integer, got '-5'"),
    (["console-consumer", "--topic", "t", "--group", "g", "--partition", "0"],
     "--group and --partition cannot be used together"),
    (["console-consumer", "--topic", "t", "--consumer-property", "no.such=1"], "unsupported consumer property 'no.such'"),
    (["groups", "--describe"], "--describe requires --group or --all-groups"),
    (["groups", "--reset-offsets", "--group", "g", "--to-earliest"], "--reset-offsets requires --topic or --all-topics"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t"],
     "--reset-offsets requires one of --to-earliest, --to-latest, --to-current, --to-offset, --shift-by, --to-datetime, "
     "--by-duration, --from-file"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"],
     "invalid --topic 't:x': expected TOPIC or TOPIC:PARTITION[,PARTITION...]"),
    (["groups", "--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"],
     "invalid --to-datetime 'yesterday': expected YYYY-MM-DDTHH:mm:SS.sss"),
    (["groups", "--list", "--execute"],
     "--to-*/--by-duration/--from-file/--shift-by/--execute/--dry-run/--export can only be used with --reset-offsets"),
    (["records", "--offset-json-file", "f.json"], "the following arguments are required: --delete"),
]


def test_usage_errors_exit_2_with_argparse_message() -> None:
    """Each case as its own process, all at once (they only parse arguments). A closed port and
    a short timeout make a usage error that slipped through fail fast."""
    procs = [subprocess.Popen([sys.executable, "-m", "kafkalite", *argv, "--bootstrap-server", "127.0.0.1:1",
                               "--request-timeout-ms", "1000"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for argv, _ in USAGE_ERRORS]
    for (argv, message), proc in zip(USAGE_ERRORS, procs):
        out, err = proc.communicate(timeout=60)
        lines = err.splitlines()
        assert (proc.returncode, out) == (2, ""), (argv, err)
        assert lines[0].startswith(f"usage: kafkalite {argv[0]} "), (argv, err)
        assert lines[-1] == f"kafkalite {argv[0]}: error: {message}", argv


def test_unreachable_broker_is_one_line(free_port: int) -> None:
    for tool, args in (("topics", ["--list"]), ("groups", ["--list"])):
        r = run_tool(f"127.0.0.1:{free_port}", tool, "--request-timeout-ms", "500", *args)
        assert r == Run(1, "", f"kafkalite {tool}: cannot connect to 127.0.0.1:{free_port}: "
                               "no broker answered within 500 ms\n")


@pytest.fixture
def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ============================================================================================
# console-producer / console-consumer
# ============================================================================================

def test_console_producer_lines_keys_headers_null_marker(bs: str) -> None:
    t = unique("tools-produce")
    assert run_tool(bs, "topics", "--create", "--topic", t).rc == 0
    assert run_tool(bs, "console-producer", "--topic", t, stdin="one\ntwo\n\nthree\r\n") == Run(0, "", "")
    assert run_tool(bs, "console-producer", "--topic", t, "--property", "parse.key=true",
                    "--property", "key.separator=:", "--property", "null.marker=<null>",
                    stdin="k1:v1\nk2:a:b\n<null>:no key\nk3:<null>\n") == Run(0, "", "")
    assert run_tool(bs, "console-producer", "--topic", t, "--property", "parse.headers=true",
                    "--property", "parse.key=true", "--compression-codec", "gzip", "--sync",
                    stdin="h1:x,h2:\tk\tv\n") == Run(0, "", "")
    assert consume_all(bs, t) == [
        (0, 0, None, b"one", []), (0, 1, None, b"two", []), (0, 2, None, b"", []), (0, 3, None, b"three", []),
        (0, 4, b"k1", b"v1", []), (0, 5, b"k2", b"a:b", []), (0, 6, None, b"no key", []), (0, 7, b"k3", None, []),
        (0, 8, b"k", b"v", [("h1", b"x"), ("h2", b"")]),
    ]


def test_console_producer_errors(bs: str, broker_factory: Callable[..., BrokerProcess]) -> None:
    t = unique("tools-produce-err")
    assert run_tool(bs, "topics", "--create", "--topic", t).rc == 0
    r = run_tool(bs, "console-producer", "--topic", t, "--property", "parse.key=true",
                 stdin="k\tfirst\nno separator here\nk\tnever sent\n")
    assert r == Run(1, "", "kafkalite console-producer: no key separator found on line 2: 'no separator here'\n")
    assert [rec[3] for rec in consume_all(bs, t)] == [b"first"]  # lines before the bad one were sent
    # ignore.error: a line without separator is a value with a null key
    assert run_tool(bs, "console-producer", "--topic", t, "--property", "parse.key=true",
                    "--property", "ignore.error=true", stdin="no separator\n").rc == 0
    assert consume_all(bs, t)[-1][2:4] == (None, b"no separator")

    compacted = unique("tools-compacted")
    assert run_tool(bs, "topics", "--create", "--topic", compacted, "--config", "cleanup.policy=compact").rc == 0
    r = run_tool(bs, "console-producer", "--topic", compacted, stdin="no key\n")
    assert r == Run(1, "", f"kafkalite console-producer: cannot produce to topic '{compacted}': compacted topic "
                           f"cannot accept message without key in topic partition {compacted}-0\n")

    no_auto = broker_factory({"auto.create.topics.enable": "false"})
    r = run_tool(no_auto.bootstrap_servers, "console-producer", "--topic", "missing", "--max-block-ms", "1000",
                 stdin="x\n")
    assert r == Run(1, "", "kafkalite console-producer: topic 'missing' not present in metadata after 1000 ms\n")


def test_console_consumer_formats_and_limits(bs: str) -> None:
    t = unique("tools-consume")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--partitions", "2").rc == 0
    p = KafkaProducer(bootstrap_servers=bs)
    sent = []
    for i in range(6):
        md = p.send(t, key=f"k{i}".encode() if i != 3 else None, value=f"v{i}".encode(), partition=i % 2,
                    headers=[("h", b"x")] if i == 0 else None).get(10)
        sent.append(md)
    p.close()

    r = run_tool(bs, "console-consumer", "--topic", t, "--from-beginning", "--max-messages", "6",
                 "--property", "print.key=true", "--property", "print.partition=true",
                 "--property", "print.offset=true", "--property", "print.timestamp=true",
                 "--property", "print.headers=true")
    assert (r.rc, r.err) == (0, "Processed a total of 6 messages\n")
    assert sorted(r.out.splitlines()) == sorted(
        (f"CreateTime:{md.timestamp}\tPartition:{md.partition}\tOffset:{md.offset}\t"
         f"{'h:x' if i == 0 else 'NO_HEADERS'}\t{'null' if i == 3 else f'k{i}'}\tv{i}")
        for i, md in enumerate(sent))

    # key.separator / line.separator / null.literal; value-less output
    r = run_tool(bs, "console-consumer", "--topic", t, "--partition", "1", "--offset", "earliest",
                 "--max-messages", "3", "--property", "print.key=true", "--property", "key.separator=|",
                 "--property", "line.separator=;", "--property", "null.literal=NULL")
    assert r == Run(0, "k1|v1;NULL|v3;k5|v5;", "Processed a total of 3 messages\n")
    r = run_tool(bs, "console-consumer", "--topic", t, "--partition", "0", "--offset", "1", "--max-messages", "2",
                 "--property", "print.value=false", "--property", "print.offset=true")
    assert r == Run(0, "Offset:1\nOffset:2\n", "Processed a total of 2 messages\n")

    # --timeout-ms: exits 0 when nothing more arrives; without --from-beginning it starts at the end
    started = time.monotonic()
    r = run_tool(bs, "console-consumer", "--topic", t, "--timeout-ms", "700")
    assert r == Run(0, "", "Processed a total of 0 messages\n")
    assert time.monotonic() - started < 15
    r = run_tool(bs, "console-consumer", "--topic", t, "--partition", "0", "--offset", "2", "--max-messages", "1",
                 "--timeout-ms", "15000")
    assert r == Run(0, "v4\n", "Processed a total of 1 messages\n")

    assert run_tool(bs, "console-consumer", "--topic", t, "--partition", "7", "--timeout-ms", "500") == \
        Run(1, "", f"kafkalite console-consumer: partition 7 of topic '{t}' does not exist\n")


def test_console_consumer_stops_on_sigterm(bs: str) -> None:
    t = unique("tools-sigterm")
    assert run_tool(bs, "topics", "--create", "--topic", t).rc == 0
    produce(bs, t, [b"a", b"b"])
    consumer = BackgroundConsumer(bs, t, "--from-beginning")
    try:
        wait_until(lambda: consumer.lines == ["a", "b"], timeout=20, what="both records printed")
    finally:
        rc, err = consumer.stop()
    assert (rc, consumer.lines, err) == (0, ["a", "b"], "Processed a total of 2 messages\n")


def test_console_consumer_group_commits_exactly_what_it_printed(bs: str, admin: KafkaAdminClient) -> None:
    t, g = unique("tools-group-consume"), unique("tools-g")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--partitions", "2").rc == 0
    produce(bs, t, [b"p0-0", b"p0-1", b"p0-2"], partition=0)
    produce(bs, t, [b"p1-0", b"p1-1", b"p1-2"], partition=1)
    first = run_tool(bs, "console-consumer", "--topic", t, "--group", g, "--from-beginning", "--max-messages", "4")
    assert (first.rc, first.err) == (0, "Processed a total of 4 messages\n")
    printed = first.out.splitlines()
    assert len(printed) == 4 and len(set(printed)) == 4
    per_partition = {p: sum(1 for v in printed if v.startswith(f"p{p}-")) for p in (0, 1)}
    # what was printed of each partition is a prefix of it, and exactly that is committed
    assert all(f"p{p}-{i}" in printed for p in (0, 1) for i in range(per_partition[p]))
    assert committed(admin, g) == {(t, p): n for p, n in per_partition.items() if n}
    # the group resumes where it stopped (--from-beginning applies only without a committed offset)
    rest = run_tool(bs, "console-consumer", "--topic", t, "--group", g, "--from-beginning", "--max-messages", "2",
                    "--timeout-ms", "15000")
    assert (rest.rc, rest.err) == (0, "Processed a total of 2 messages\n")
    assert sorted(printed + rest.out.splitlines()) == sorted(f"p{p}-{i}" for p in (0, 1) for i in range(3))
    assert committed(admin, g) == {(t, 0): 3, (t, 1): 3}


# ============================================================================================
# groups
# ============================================================================================

def test_groups_list_describe_and_what_an_active_group_refuses(bs: str, admin: KafkaAdminClient) -> None:
    t, g = unique("tools-describe"), unique("tools-active")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--partitions", "2").rc == 0
    produce(bs, t, [b"a", b"b", b"c"], partition=0)
    produce(bs, t, [b"d"], partition=1)
    member = BackgroundConsumer(bs, t, "--group", g, "--from-beginning", "--consumer-property", "session.timeout.ms=6000",
                                "--consumer-property", "heartbeat.interval.ms=500",
                                "--consumer-property", "auto.commit.interval.ms=100")
    try:
        wait_until(lambda: len(member.lines) == 4, timeout=20, what="the member to print all four records")
        wait_until(lambda: committed(admin, g) == {(t, 0): 3, (t, 1): 1}, timeout=20,
                   what="the member's auto-commit")

        assert g in run_tool(bs, "groups", "--list").out.splitlines()
        states = table(run_tool(bs, "groups", "--list", "--state").out)
        assert states[0] == ["GROUP", "STATE"] and [g, "Stable"] in states[1:]
        assert [g, "Stable"] not in table(run_tool(bs, "groups", "--list", "--state", "Empty,Dead").out)[1:]

        desc = run_tool(bs, "groups", "--describe", "--group", g)
        assert (desc.rc, desc.err) == (0, "")
        rows = table(desc.out)
        assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                           "CONSUMER-ID", "HOST", "CLIENT-ID"]
        assert [r[:6] for r in rows[1:]] == [[g, t, "0", "3", "3", "0"], [g, t, "1", "1", "1", "0"]]
        member_id = rows[1][6]
        assert re.fullmatch(r"kafkalite-tools-[0-9a-f-]{36}", member_id)
        assert [r[6:] for r in rows[1:]] == [[member_id, "/127.0.0.1", "kafkalite-tools"]] * 2

        members = table(run_tool(bs, "groups", "--describe", "--group", g, "--members", "--verbose").out)
        assert members == [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                           [g, member_id, "/127.0.0.1", "kafkalite-tools", "2", f"{t}(0,1)"]]
        host, port = split_host_port(bs)
        state = run_tool(bs, "groups", "--describe", "--group", g, "--state").out.splitlines()
        assert [line.split() for line in state] == [
            ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [g, f"{host}:{port}", "(0)", "range", "Stable", "1"]]

        # what an active group refuses
        assert run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--execute") == \
            Run(1, "", f"kafkalite groups: assignments can only be reset if the group '{g}' is inactive, "
                       "but the current state is Stable\n")
        assert run_tool(bs, "groups", "--delete", "--group", g) == \
            Run(1, "", f"kafkalite groups: cannot delete consumer group '{g}': the group is not empty "
                       "(NON_EMPTY_GROUP)\n")
        assert run_tool(bs, "groups", "--delete-offsets", "--group", g, "--topic", t) == \
            Run(1, "", f"kafkalite groups: cannot delete the offset of {t}-0 from group '{g}': deleting offsets of "
                       "a topic is forbidden while the consumer group is actively subscribed to it "
                       "(GROUP_SUBSCRIBED_TO_TOPIC)\n")
    finally:
        rc, err = member.stop()
    assert (rc, err) == (0, "Processed a total of 4 messages\n")

    produce(bs, t, [b"e", b"f"], partition=1)
    desc = run_tool(bs, "groups", "--describe", "--group", g)
    assert (desc.rc, desc.err) == (0, f"Consumer group '{g}' has no active members.\n")
    assert table(desc.out)[1:] == [[g, t, "0", "3", "3", "0", "-", "-", "-"],
                                   [g, t, "1", "1", "3", "2", "-", "-", "-"]]
    assert run_tool(bs, "groups", "--describe", "--group", g, "--members") == \
        Run(0, "", f"Consumer group '{g}' has no active members.\n")

    assert run_tool(bs, "groups", "--delete", "--group", g) == \
        Run(0, f"Deletion of requested consumer groups ('{g}') was successful.\n", "")
    assert g not in run_tool(bs, "groups", "--list").out.splitlines()
    assert run_tool(bs, "groups", "--describe", "--group", g) == \
        Run(1, "", f"kafkalite groups: consumer group '{g}' does not exist\n")
    assert run_tool(bs, "groups", "--delete", "--group", g) == \
        Run(1, "", f"kafkalite groups: consumer group '{g}' does not exist\n")


def test_groups_reset_offsets(bs: str, admin: KafkaAdminClient) -> None:
    t, other, g = unique("tools-reset"), unique("tools-reset-b"), unique("tools-reset-g")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--partitions", "2").rc == 0
    assert run_tool(bs, "topics", "--create", "--topic", other).rc == 0
    base = int(time.time() * 1000) - 60_000
    produce(bs, t, [b"a", b"b", b"c", b"d"], partition=0, timestamps=[base, base + 1000, base + 2000, base + 3000])
    produce(bs, t, [b"e", b"f"], partition=1, timestamps=[base, base + 1000])
    produce(bs, other, [b"x"])
    assert admin.alter_group_offsets(g, {TopicPartition(t, 0): OffsetAndMetadata(2, "meta", None)}) == \
        {TopicPartition(t, 0): Errors.NoError}
    head = ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]

    dry = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--to-earliest")
    assert (dry.rc, dry.err) == (0, "WARN: No action will be performed as the --execute option is missing.\n")
    assert table(dry.out) == [head, [g, t, "0", "0"], [g, t, "1", "0"]]
    assert committed(admin, g) == {(t, 0): 2}  # a dry run changes nothing
    assert table(run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--to-latest",
                          "--dry-run").out) == [head, [g, t, "0", "4"], [g, t, "1", "2"]]

    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", f"{t}:1", "--to-offset", "1", "--execute")
    assert (r.rc, r.err, table(r.out)) == (0, "", [head, [g, t, "1", "1"]])
    assert committed(admin, g) == {(t, 0): 2, (t, 1): 1}
    metadata = admin.list_group_offsets({g: None})[g][TopicPartition(t, 0)].metadata

    # clamped to [earliest, latest]; shift-by moves the committed offset
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--shift-by", "5", "--execute")
    assert table(r.out) == [head, [g, t, "0", "4"], [g, t, "1", "2"]]
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--shift-by", "-3", "--execute")
    assert table(r.out) == [head, [g, t, "0", "1"], [g, t, "1", "0"]]
    assert admin.list_group_offsets({g: None})[g][TopicPartition(t, 0)].metadata == metadata == "meta"
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--to-offset", "1000", "--execute")
    assert table(r.out) == [head, [g, t, "0", "4"], [g, t, "1", "2"]]
    assert committed(admin, g) == {(t, 0): 4, (t, 1): 2}

    # --to-datetime: the first offset at or after the time; none -> the end
    at = datetime.datetime.fromtimestamp((base + 1500) / 1000, tz=datetime.timezone.utc)
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", t, "--execute",
                 "--to-datetime", at.isoformat(timespec="milliseconds"))
    assert table(r.out) == [head, [g, t, "0", "2"], [g, t, "1", "2"]]
    assert committed(admin, g) == {(t, 0): 2, (t, 1): 2}

    # --all-topics: the partitions with committed offsets; --to-current keeps them
    admin.alter_group_offsets(g, {TopicPartition(other, 0): OffsetAndMetadata(1, "", None)})
    r = run_tool(bs, "groups", "--reset-offsets", "--group", g, "--all-topics", "--to-current", "--execute")
    assert table(r.out) == [head] + sorted([[g, t, "0", "2"], [g, t, "1", "2"], [g, other, "0", "1"]])

    # a group that does not exist yet gets its offsets (as Kafka's tool does)
    fresh = unique("tools-reset-new")
    r = run_tool(bs, "groups", "--reset-offsets", "--group", fresh, "--topic", other, "--to-earliest", "--execute")
    assert (r.rc, table(r.out)) == (0, [head, [fresh, other, "0", "0"]])
    assert committed(admin, fresh) == {(other, 0): 0}

    assert run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", "no-such-topic", "--to-earliest",
                    "--dry-run") == Run(1, "", "kafkalite groups: topic 'no-such-topic' does not exist\n")
    assert run_tool(bs, "groups", "--reset-offsets", "--group", g, "--topic", f"{t}:9", "--to-earliest",
                    "--dry-run") == Run(1, "", f"kafkalite groups: partition 9 of topic '{t}' does not exist\n")
    assert run_tool(bs, "groups", "--reset-offsets", "--group", fresh, "--topic", t, "--shift-by", "1",
                    "--dry-run") == Run(1, "", f"kafkalite groups: partition {t}-0 has no committed offset to shift\n")

    # --delete-offsets
    r = run_tool(bs, "groups", "--delete-offsets", "--group", g, "--topic", f"{t}:1")
    assert (r.rc, r.err, table(r.out)) == (0, "", [["TOPIC", "PARTITION", "STATUS"], [t, "1", "Successful"]])
    assert committed(admin, g) == {(t, 0): 2, (other, 0): 1}


# ============================================================================================
# topics --describe / --alter, configs, records (DescribeConfigs, IncrementalAlterConfigs,
# CreatePartitions, DeleteRecords, DescribeCluster)
# ============================================================================================

def topic_configs(admin: KafkaAdminClient, topic: str) -> dict[str, tuple[str, str]]:
    """{name: (value, source)} of every config of the topic, read with kafka-python."""
    got = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
    return {k: (v["value"], v["config_source"]) for k, v in got["topic"][topic].items()}


def test_topics_describe_and_alter(bs: str, admin: KafkaAdminClient) -> None:
    t = unique("tools-describe-topic")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--partitions", "2",
                    "--config", "retention.ms=600000", "--config", "max.message.bytes=2000").rc == 0
    (md,) = admin.describe_topics([t])
    tid = kafka_uuid_string(md["topic_id"])
    # segment.bytes: log.segment.bytes is set in the packaged server.properties (a static broker
    # config, so not Kafka's default: kafka-topics.sh lists it too)
    head = (f"Topic: {t}\tTopicId: {tid}\tPartitionCount: 2\tReplicationFactor: 1\t"
            "Configs: max.message.bytes=2000,retention.ms=600000,segment.bytes=1073741824\n")
    parts = "".join(f"\tTopic: {t}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\n" for p in range(2))
    assert run_tool(bs, "topics", "--describe", "--topic", t) == Run(0, head + parts, "")

    assert run_tool(bs, "topics", "--alter", "--topic", t, "--partitions", "4") == \
        Run(0, "", "")
    (md,) = admin.describe_topics([t])
    assert sorted(p["partition_index"] for p in md["partitions"]) == [0, 1, 2, 3]
    assert run_tool(bs, "topics", "--alter", "--topic", t, "--partitions", "3") == \
        Run(1, "", "kafkalite topics: topic currently has 4 partitions, which is higher than the requested 3\n")

    assert run_tool(bs, "topics", "--alter", "--topic", t, "--config", "retention.ms=1000",
                    "--delete-config", "max.message.bytes") == \
        Run(0, f"Completed updating config for topic {t}.\n", "")
    configs = topic_configs(admin, t)
    assert configs["retention.ms"] == ("1000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["max.message.bytes"] == ("1048588", "DEFAULT_CONFIG")
    assert run_tool(bs, "topics", "--alter", "--topic", t, "--config", "retention.ms=soon") == \
        Run(1, "", f"kafkalite topics: invalid config value for resource ConfigResource(type=TOPIC, name='{t}'): "
                   "Invalid value soon for configuration retention.ms: Not a number of type LONG\n")

    everything = run_tool(bs, "topics", "--describe", "--exclude-internal")
    assert (everything.rc, everything.err) == (0, "")
    lines = everything.out.splitlines()
    assert f"Topic: {t}\tTopicId: {tid}\tPartitionCount: 4\tReplicationFactor: 1\t" \
           "Configs: retention.ms=1000,segment.bytes=1073741824" in lines
    assert [line for line in lines if line.startswith(f"\tTopic: {t}\t")] == \
        [f"\tTopic: {t}\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in range(4)]
    summaries = [line.split("\t")[0] for line in lines if not line.startswith("\t")]
    assert summaries == sorted(summaries) and "Topic: __consumer_offsets" not in summaries
    assert run_tool(bs, "topics", "--alter", "--topic", unique("missing"), "--partitions", "2", "--if-exists") == \
        Run(0, "", "")


def test_configs_topics(bs: str, admin: KafkaAdminClient) -> None:
    t = unique("tools-configs")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--config", "retention.ms=600000").rc == 0
    assert run_tool(bs, "configs", "--entity-type", "topics", "--entity-name", t, "--describe") == \
        Run(0, f"Dynamic configs for topic {t} are:\n"
               "  retention.ms=600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=600000}\n", "")
    assert run_tool(bs, "configs", "--entity-type", "topics", "--entity-name", t, "--alter",
                    "--add-config", "cleanup.policy=[compact,delete],segment.ms=3600000",
                    "--add-config", "min.insync.replicas=1", "--delete-config", "retention.ms") == \
        Run(0, f"Completed updating config for topic {t}.\n", "")
    configs = topic_configs(admin, t)
    assert {k: configs[k] for k in ("cleanup.policy", "segment.ms", "min.insync.replicas", "retention.ms")} == {
        "cleanup.policy": ("compact,delete", "DYNAMIC_TOPIC_CONFIG"),
        "segment.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG"),
        "min.insync.replicas": ("1", "DYNAMIC_TOPIC_CONFIG"),
        "retention.ms": ("604800000", "DEFAULT_CONFIG"),
    }
    described = run_tool(bs, "configs", "--entity-type", "topics", "--entity-name", t, "--describe")
    assert (described.rc, described.err) == (0, "")
    lines = described.out.splitlines()
    assert [line.split("=", 1)[0] for line in lines[1:]] == ["  cleanup.policy", "  min.insync.replicas", "  segment.ms"]
    assert lines[1].startswith("  cleanup.policy=compact,delete sensitive=false synonyms={"
                               "DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete")

    everything = run_tool(bs, "configs", "--entity-type", "topics", "--entity-name", t, "--describe", "--all")
    lines = everything.out.splitlines()
    assert lines[0] == f"All configs for topic {t} are:"
    assert [line.split("=", 1)[0].strip() for line in lines[1:]] == sorted(configs)
    assert "  segment.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.ms=3600000" in \
        "\n".join(lines)

    all_topics = run_tool(bs, "configs", "--entity-type", "topics", "--describe")
    headings = [line for line in all_topics.out.splitlines() if not line.startswith("  ")]
    assert f"Dynamic configs for topic {t} are:" in headings and headings == sorted(headings)

    missing = unique("missing")
    assert run_tool(bs, "configs", "--entity-type", "topics", "--entity-name", missing, "--describe") == \
        Run(1, "", f"kafkalite configs: topic '{missing}' does not exist\n")
    assert run_tool(bs, "configs", "--entity-type", "topics", "--entity-name", missing, "--alter",
                    "--add-config", "retention.ms=1") == \
        Run(1, "", f"kafkalite configs: topic '{missing}' does not exist\n")
    assert run_tool(bs, "configs", "--entity-type", "topics", "--entity-name", t, "--alter",
                    "--add-config", "no.such.config=1") == \
        Run(1, "", "kafkalite configs: unknown topic config name: no.such.config\n")
    assert run_tool(bs, "configs", "--entity-type", "topics", "--entity-name", t, "--alter",
                    "--add-config", "segment.bytes=13") == \
        Run(1, "", f"kafkalite configs: invalid config value for resource ConfigResource(type=TOPIC, name='{t}'): "
                   "Invalid value 13 for configuration segment.bytes: Value must be at least 14\n")
    assert topic_configs(admin, t)["segment.bytes"] == ("1073741824", "STATIC_BROKER_CONFIG")


def test_configs_brokers(bs: str, admin: KafkaAdminClient) -> None:
    assert run_tool(bs, "configs", "--entity-type", "brokers", "--entity-name", "0", "--describe") == \
        Run(0, "Dynamic configs for broker 0 are:\n", "")
    assert run_tool(bs, "configs", "--entity-type", "brokers", "--describe") == \
        Run(0, "Dynamic configs for broker 0 are:\n", "")
    assert run_tool(bs, "configs", "--entity-type", "brokers", "--entity-default", "--describe") == \
        Run(0, "Default configs for brokers in the cluster are:\n", "")

    everything = run_tool(bs, "configs", "--entity-type", "brokers", "--entity-name", "0", "--describe", "--all")
    assert (everything.rc, everything.err) == (0, "")
    lines = everything.out.splitlines()
    assert lines[0] == "All configs for broker 0 are:"
    expected = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")["broker"]["0"]
    assert [line.split("=", 1)[0].strip() for line in lines[1:]] == sorted(expected)
    assert "  num.partitions=1 sensitive=false synonyms={STATIC_BROKER_CONFIG:num.partitions=1, " \
           "DEFAULT_CONFIG:num.partitions=1}" in lines

    # static broker configs are refused; dynamic ones are set per broker or cluster-wide, then deleted
    for who in (["--entity-name", "0"], ["--entity-default"]):
        assert run_tool(bs, "configs", "--entity-type", "brokers", *who, "--alter",
                        "--add-config", "log.retention.hours=1") == \
            Run(1, "", "kafkalite configs: cannot update these configs dynamically: Set(log.retention.hours)\n")
    assert run_tool(bs, "configs", "--entity-type", "brokers", "--entity-default", "--alter",
                    "--add-config", "log.cleaner.backoff.ms=20000") == \
        Run(0, "Completed updating default config for brokers in the cluster.\n", "")
    assert run_tool(bs, "configs", "--entity-type", "brokers", "--entity-name", "0", "--alter",
                    "--add-config", "log.cleaner.backoff.ms=30000") == \
        Run(0, "Completed updating config for broker 0.\n", "")
    assert run_tool(bs, "configs", "--entity-type", "brokers", "--entity-name", "0", "--describe") == \
        Run(0, "Dynamic configs for broker 0 are:\n"
               "  log.cleaner.backoff.ms=30000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=30000, "
               "DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=20000, DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}\n", "")
    assert run_tool(bs, "configs", "--entity-type", "brokers", "--entity-default", "--describe") == \
        Run(0, "Default configs for brokers in the cluster are:\n"
               "  log.cleaner.backoff.ms=20000 sensitive=false "
               "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.backoff.ms=20000}\n", "")
    for who in (["--entity-name", "0"], ["--entity-default"]):
        assert run_tool(bs, "configs", "--entity-type", "brokers", *who, "--alter",
                        "--delete-config", "log.cleaner.backoff.ms").rc == 0
    assert run_tool(bs, "configs", "--entity-type", "brokers", "--entity-name", "0", "--describe") == \
        Run(0, "Dynamic configs for broker 0 are:\n", "")
    assert run_tool(bs, "configs", "--entity-type", "brokers", "--entity-name", "7", "--describe") == \
        Run(1, "", "kafkalite configs: broker 7 does not exist\n")


def test_records_delete(bs: str, admin: KafkaAdminClient, tmp_path) -> None:
    t = unique("tools-records")
    assert run_tool(bs, "topics", "--create", "--topic", t, "--partitions", "2").rc == 0
    produce(bs, t, [b"a", b"b", b"c", b"d", b"e"], partition=0)
    produce(bs, t, [b"x", b"y", b"z"], partition=1)
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": t, "partition": 1, "offset": -1},
                                               {"topic": t, "partition": 0, "offset": 3}], "version": 1}))
    assert run_tool(bs, "records", "--delete", "--offset-json-file", str(spec)) == \
        Run(0, "Executing records delete operation\nRecords delete operation completed:\n"
               f"partition: {t}-0\tlow_watermark: 3\npartition: {t}-1\tlow_watermark: 3\n", "")
    earliest = admin.list_partition_offsets({TopicPartition(t, p): OffsetSpec.EARLIEST for p in (0, 1)})
    assert {tp.partition: r.offset for tp, r in earliest.items()} == {0: 3, 1: 3}
    assert run_tool(bs, "console-consumer", "--topic", t, "--partition", "0", "--offset", "earliest",
                    "--max-messages", "2") == Run(0, "d\ne\n", "Processed a total of 2 messages\n")

    spec.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 6}]}))
    assert run_tool(bs, "records", "--delete", "--offset-json-file", str(spec)) == \
        Run(1, "Executing records delete operation\n",
            f"kafkalite records: cannot delete records of {t}-0: the requested offset is outside the range of "
            "offsets maintained by the server for the given topic/partition (OFFSET_OUT_OF_RANGE)\n")
    compacted = unique("tools-records-compacted")
    assert run_tool(bs, "topics", "--create", "--topic", compacted, "--config", "cleanup.policy=compact").rc == 0
    spec.write_text(json.dumps({"partitions": [{"topic": compacted, "partition": 0, "offset": 0}]}))
    r = run_tool(bs, "records", "--delete", "--offset-json-file", str(spec))
    assert (r.rc, r.out) == (1, "Executing records delete operation\n")
    assert r.err.startswith(f"kafkalite records: cannot delete records of {compacted}-0: ") and \
        r.err.endswith(" (POLICY_VIOLATION)\n") and r.err.count("\n") == 1

    missing = unique("missing")
    for doc, message in [
        ({"partitions": [{"topic": missing, "partition": 0, "offset": 1}]}, f"topic '{missing}' does not exist"),
        ({"partitions": [{"topic": t, "partition": 5, "offset": 1}]}, f"partition 5 of topic '{t}' does not exist"),
        ({"partitions": [{"topic": t, "partition": 0, "offset": 1}, {"topic": t, "partition": 0, "offset": 2}]},
         f"invalid offset JSON file {spec}: duplicate partitions: {t}-0"),
        ({"partitions": [{"topic": t, "partition": 0}]},
         f"invalid offset JSON file {spec}: entry {{\"topic\": \"{t}\", \"partition\": 0}} has no valid offset "
         "(>= 0, or -1 for the high watermark)"),
        ({"version": 1}, f"invalid offset JSON file {spec}: expected an object with a \"partitions\" list"),
        ({"partitions": [], "version": 2}, f"invalid offset JSON file {spec}: unsupported version 2"),
    ]:
        spec.write_text(json.dumps(doc))
        assert run_tool(bs, "records", "--delete", "--offset-json-file", str(spec)) == \
            Run(1, "", f"kafkalite records: {message}\n"), doc
    spec.write_text("{not json")
    assert run_tool(bs, "records", "--delete", "--offset-json-file", str(spec)) == \
        Run(1, "", f"kafkalite records: invalid offset JSON file {spec}: not JSON: "
                   "Expecting property name enclosed in double quotes at line 1 column 2\n")
    assert run_tool(bs, "records", "--delete", "--offset-json-file", str(tmp_path / "nope.json")) == \
        Run(1, "", f"kafkalite records: cannot read {tmp_path / 'nope.json'}: No such file or directory\n")


def test_tools_do_not_load_the_client_library_when_the_parser_is_built() -> None:
    """`kafkalite serve` builds the parser with every tool registered; the client library must
    load only when a tool runs."""
    code = ("import sys, argparse\n"
            "from kafkalite.tools import register_all\n"
            "p = argparse.ArgumentParser(); register_all(p.add_subparsers())\n"
            "print(sorted(m for m in sys.modules if m.split('.')[:2] in "
            "(['kafka', 'admin'], ['kafka', 'consumer'], ['kafka', 'producer'])))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout, r.stderr) == (0, "[]\n", "")
