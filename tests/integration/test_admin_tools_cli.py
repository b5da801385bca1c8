"""`kafkalite log-dirs`, `get-offsets` and `transactions` as processes against a real kafkalite
broker, each next to Apache Kafka 3.9.1's own tool (LogDirsCommand, GetOffsetShell,
TransactionsCommand from kafka-tools) run against the SAME broker: stdout identical line for
line, the same exit code, and for a failure Kafka's message as our one stderr line."""
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.harness import BrokerProcess

TOOLS_ARTIFACTS = ["org.apache.kafka:kafka-tools:3.9.1", "ch.qos.reload4j:reload4j:1.2.25",
                   "org.slf4j:slf4j-reload4j:1.7.36"]
TS = 1_700_000_000_000


def kafka_tool(main_class: str, *args: str) -> subprocess.CompletedProcess[str]:
    from tests.support import maven
    from tests.support.kafka_oracle import JVM_FLAGS

    jars = maven.resolve("kafka-tools-3.9.1", TOOLS_ARTIFACTS)
    return subprocess.run(["java", *JVM_FLAGS, "-Dlog4j.configuration=file:/dev/null", "-cp",
                           maven.classpath(jars), main_class, *args], capture_output=True, text=True, timeout=120)


def kafkalite_tool(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalite", tool, *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    # The workload's records are stamped TS (2023): no time retention, or it deletes them mid-module.
    with BrokerProcess(overrides={"transaction.state.log.num.partitions": "1",
                                  "offsets.topic.num.partitions": "1", "log.retention.ms": "-1"}) as b:
        yield b


@pytest.fixture(scope="module")
def workload(broker: BrokerProcess) -> dict[str, str]:
    """Topics `go-a` (3 partitions: 5, 0 and 12 records) and `go-b` (12 partitions), an open
    transaction and a committed one."""
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("go-a", 3, 1), NewTopic("go-b", 12, 1)]).values():
        f.result(30)
    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(5):
        p.produce("go-a", partition=0, value=b"x", timestamp=TS + i * 100)
    for i in range(12):
        p.produce("go-a", partition=2, value=b"y" * i, timestamp=TS + (i % 4) * 1000)
        p.produce("go-b", partition=i, value=b"z", timestamp=TS)
    p.flush(30)
    ids = {"open": f"txn-open-{uuid.uuid4().hex[:6]}", "done": f"txn-done-{uuid.uuid4().hex[:6]}"}
    done = ck.Producer({"bootstrap.servers": bs, "transactional.id": ids["done"]})
    done.init_transactions(30)
    done.begin_transaction()
    done.produce("go-a", partition=1, value=b"committed")
    done.flush(30)
    done.commit_transaction(30)
    opened = ck.Producer({"bootstrap.servers": bs, "transactional.id": ids["open"],
                          "transaction.timeout.ms": 600000})
    opened.init_transactions(30)
    opened.begin_transaction()
    opened.produce("go-a", partition=1, value=b"pending")
    opened.produce("go-b", partition=3, value=b"pending")
    opened.flush(30)
    return ids   # the open producer is left open on purpose; the broker's end ends it


def assert_like_kafka(ours: subprocess.CompletedProcess[str], theirs: subprocess.CompletedProcess[str],
                      tool: str) -> None:
    assert ours.stdout.splitlines() == theirs.stdout.splitlines()
    assert ours.returncode == theirs.returncode
    if theirs.returncode:
        kafka_message = [line.removeprefix("Error occurred: ") for line in theirs.stderr.splitlines()
                         if line and not line.startswith(("log4j:", "SLF4J"))]
        assert ours.stderr.splitlines() == [f"kafkalite {tool}: {kafka_message[0]}"]


@pytest.mark.parametrize("args", [
    ["--topic", "go-a"], ["--topic", "go-.*", "--time", "-2"], ["--topic", "go-b", "--partitions", "1,10,2"],
    ["--topic", "go-a", "--time", str(TS + 250)], ["--topic", "go-a", "--time", "max-timestamp"],
    ["--topic-partitions", "go-a:1-,go-b:-2"], ["--topic-partitions", "go-b:11"],
    ["--topic", "nope"], ["--topic", "go-a", "--partitions", "7"],
    ["--topic", "go-a", "--time", "yesterday"], ["--topic", "go-a", "--partitions", "x"],
])
def test_get_offsets_like_kafka(broker: BrokerProcess, workload: dict[str, str], args: list[str]) -> None:
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    theirs = kafka_tool("org.apache.kafka.tools.GetOffsetShell", *bs, *args)
    ours = kafkalite_tool("get-offsets", *bs, *args)
    assert_like_kafka(ours, theirs, "get-offsets")


def test_get_offsets_exact(broker: BrokerProcess, workload: dict[str, str]) -> None:
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    r = kafkalite_tool("get-offsets", *bs, "--topic", "go-a", "--time", str(TS + 250))
    # Partition 0: the first record at or after TS+250 is offset 3; partition 1 holds only the
    # transactions' records, stamped now; partition 2's second record is the first at TS+1000.
    assert (r.returncode, r.stdout, r.stderr) == (0, "go-a:0:3\ngo-a:1:0\ngo-a:2:1\n", "")
    r = kafkalite_tool("get-offsets", *bs, "--topic", "go-b")
    # Sorted as text: go-b-10 and go-b-11 come before go-b-2.
    assert r.stdout.splitlines()[:4] == ["go-b:0:1", "go-b:1:1", "go-b:10:1", "go-b:11:1"]


def test_log_dirs_like_kafka(broker: BrokerProcess, workload: dict[str, str]) -> None:
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    for args in (["--describe", "--topic-list", "go-a,go-b"], ["--describe", "--broker-list", "0", "--topic-list", "go-a"],
                 ["--describe", "--broker-list", "0,5"]):
        theirs = kafka_tool("org.apache.kafka.tools.LogDirsCommand", *bs, *args)
        ours = kafkalite_tool("log-dirs", *bs, *args)
        assert_like_kafka(ours, theirs, "log-dirs")
    ours = kafkalite_tool("log-dirs", *bs, "--describe", "--topic-list", "go-a")
    lines = ours.stdout.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 0"]
    doc = json.loads(lines[2])
    [log_dir] = doc["brokers"][0]["logDirs"]
    assert log_dir["logDir"] == str(broker.log_dir) and log_dir["error"] is None
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    on_disk = {f"go-a-{i}": sum(f.stat().st_size for f in (Path(broker.log_dir) / f"go-a-{i}").glob("*.log"))
               for i in range(3)}
    assert sizes == on_disk and on_disk["go-a-0"] > 0


def test_transactions_like_kafka(broker: BrokerProcess, workload: dict[str, str]) -> None:
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    main = "org.apache.kafka.tools.TransactionsCommand"
    for args in (["list"], ["describe-producers", "--topic", "go-a", "--partition", "1"],
                 ["describe-producers", "--topic", "go-a", "--partition", "0"],
                 ["describe", "--transactional-id", "no-such-id"]):
        theirs = kafka_tool(main, *bs, *args)
        ours = kafkalite_tool("transactions", *bs, *args)
        assert_like_kafka(ours, theirs, "transactions")
    # Kafka's admin client retries an unknown topic until its 60 s API timeout; ours fails at once.
    ours = kafkalite_tool("transactions", *bs, "describe-producers", "--topic", "nope", "--partition", "0")
    assert (ours.returncode, ours.stdout) == (1, "")
    assert ours.stderr.startswith("kafkalite transactions: Failed to describe producers for partition nope-0 on "
                                  "leader: ") and ours.stderr.endswith(". Enable debug logging for additional detail.\n")
    # A described transaction's duration is "now - start time" (also once it has completed, as
    # the coordinator keeps its start time), so it moves between the two runs: compare the other columns.
    rows = {}
    for state in ("done", "open"):
        theirs = kafka_tool(main, *bs, "describe", "--transactional-id", workload[state])
        ours = kafkalite_tool("transactions", *bs, "describe", "--transactional-id", workload[state])
        assert ours.returncode == theirs.returncode == 0
        t_rows = [line.split("\t") for line in theirs.stdout.splitlines()]
        rows[state] = [line.split("\t") for line in ours.stdout.splitlines()]
        assert [r[:7] + r[8:] for r in rows[state]] == [r[:7] + r[8:] for r in t_rows]
        assert rows[state][0][7].strip() == "TransactionDurationMs" and int(rows[state][1][7]) >= 0
    assert rows["done"][1][4].strip() == "CompleteCommit" and rows["done"][1][8].strip() == ""
    o_rows = rows["open"]
    assert o_rows[1][4].strip() == "Ongoing" and set(o_rows[1][8].strip().split(",")) == {"go-a-1", "go-b-3"}
    listing = kafkalite_tool("transactions", "list", *bs).stdout.splitlines()   # options after the verb
    assert listing[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert {tuple(line.split()[::3]) for line in listing[1:]} == {(workload["open"], "Ongoing"),
                                                                  (workload["done"], "CompleteCommit")}


def test_command_config(broker: BrokerProcess, workload: dict[str, str], tmp_path: Path) -> None:
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    good = tmp_path / "admin.properties"
    good.write_text("# admin settings\nrequest.timeout.ms=15000\nclient.id = ops-tool\n")
    r = kafkalite_tool("get-offsets", *bs, "--command-config", str(good), "--topic", "go-a", "--partitions", "0")
    assert (r.returncode, r.stdout, r.stderr) == (0, "go-a:0:5\n", "")
    bad = tmp_path / "bad.properties"
    bad.write_text("no.such.setting=1\n")
    r = kafkalite_tool("log-dirs", *bs, "--describe", "--command-config", str(bad))
    assert (r.returncode, r.stdout, r.stderr) == \
        (1, "", f"kafkalite log-dirs: {bad}: unsupported admin property 'no.such.setting'\n")
    r = kafkalite_tool("transactions", *bs, "--command-config", str(tmp_path / "missing"), "list")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == f"kafkalite transactions: cannot read {tmp_path / 'missing'}: No such file or directory\n"
