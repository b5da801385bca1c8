"""The output formats of `dump-log`, `log-dirs`, `get-offsets` and `transactions` without a
broker: `dump-log` as a process over segment files built here (exact lines), and the pure
formatting functions (Java's hash orders, Kafka's table layout, topic-partition patterns,
properties files). The comparisons with Kafka's own tools are in
tests/integration/test_dump_log.py and test_admin_tools_cli.py."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kafkalite.log.record_batch import COMPRESSION_GZIP, build_batch, build_end_txn_marker
from kafkalite.tools.common import ToolError, load_client_properties
from kafkalite.tools.get_offsets import offset_lines, pattern_list_filter, topic_and_partitions_filter
from kafkalite.tools.log_dirs import java_hash_order, java_string_hash, log_dirs_json
from kafkalite.tools.transactions import table_lines


def with_offset(batch: bytes, base_offset: int) -> bytes:
    return base_offset.to_bytes(8, "big") + batch[8:]


def dump(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kafkalite", "dump-log", *args], capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def segment(tmp_path: Path) -> Path:
    log = tmp_path / "00000000000000000010.log"
    b1 = build_batch([(b"k", b"v1", 1000), (None, b"v2", 1005)], base_offset=10, partition_leader_epoch=3,
                     headers=[("h", b"x")])
    b2 = build_batch([(b"gk", b"gz", 2000)], base_offset=12, compression=COMPRESSION_GZIP,
                     producer_id=7, producer_epoch=1, base_sequence=4)
    marker = with_offset(build_end_txn_marker(7, 1, 5, commit=False, timestamp=3000), 13)
    log.write_bytes(b1 + b2 + marker)
    (tmp_path / "00000000000000000010.index").write_bytes((2).to_bytes(4, "big") + len(b1).to_bytes(4, "big"))
    (tmp_path / "00000000000000000010.timeindex").write_bytes((2000).to_bytes(8, "big") + (2).to_bytes(4, "big"))
    return log


def test_dump_log_lines(segment: Path) -> None:
    r = dump("--files", str(segment), "--print-data-log")
    size1 = len(build_batch([(b"k", b"v1", 1000), (None, b"v2", 1005)], headers=[("h", b"x")]))
    lines = r.stdout.splitlines()
    assert (r.returncode, r.stderr) == (0, "")
    assert lines[:2] == [f"Dumping {segment}", "Log starting offset: 10"]
    assert lines[2].startswith(
        "baseOffset: 10 lastOffset: 11 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: 3 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        f"position: 0 CreateTime: 1005 size: {size1} magic: 2 compresscodec: none crc: ")
    assert lines[2].endswith(" isvalid: true")
    assert lines[3:5] == [
        "| offset: 10 CreateTime: 1000 keySize: 1 valueSize: 2 sequence: -1 headerKeys: [h] key: k payload: v1",
        "| offset: 11 CreateTime: 1005 keySize: -1 valueSize: 2 sequence: -1 headerKeys: [h] payload: v2"]
    assert " lastSequence: 4 producerId: 7 producerEpoch: 1 " in lines[5] and "compresscodec: gzip" in lines[5]
    assert lines[6] == "| offset: 12 CreateTime: 2000 keySize: 2 valueSize: 2 sequence: 4 headerKeys: [] key: gk payload: gz"
    assert "isTransactional: true isControl: true" in lines[7]
    assert lines[8] == ("| offset: 13 CreateTime: 3000 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] "
                        "endTxnMarker: ABORT coordinatorEpoch: 5")
    assert len(lines) == 9


def test_dump_indexes_and_reports(segment: Path, tmp_path: Path) -> None:
    index, time_index = segment.with_suffix(".index"), segment.with_suffix(".timeindex")
    r = dump("--files", f"{index},{time_index}")
    assert r.stdout.splitlines() == [f"Dumping {index}", "offset: 12 position: " + str(
        int.from_bytes(index.read_bytes()[4:8], "big")), f"Dumping {time_index}", "timestamp: 2000 offset: 12"]
    assert (r.returncode, r.stderr) == (0, "")
    index.write_bytes((1).to_bytes(4, "big") + (0).to_bytes(4, "big"))     # offset 11 -> the batch ending at 11
    index_bad = (1).to_bytes(4, "big") + index.read_bytes()[4:]
    index.write_bytes(index_bad)
    r = dump("--files", str(index), "--verify-index-only")
    assert r.stdout.splitlines() == [f"Dumping {index}"] and r.stderr == ""
    index.write_bytes((2).to_bytes(4, "big") + (0).to_bytes(4, "big"))     # offset 12 at the first batch
    r = dump("--files", str(index), "--verify-index-only")
    assert r.stderr.splitlines() == [f"Mismatches in :{index}", "  Index offset: 12, log offset: 11"]
    index.write_bytes(b"\x00" * 12)
    r = dump("--files", str(index), "--index-sanity-check")
    assert r.returncode == 1 and r.stderr == (f"kafkalite dump-log: Index file {index} is corrupt, found 12 bytes "
                                              "which is neither positive nor a multiple of 8\n")
    assert r.stdout == f"Dumping {index}\n"


def test_dump_log_bad_files(segment: Path, tmp_path: Path) -> None:
    good = segment.read_bytes()
    segment.write_bytes(good + b"\x00" * 8 + (500).to_bytes(4, "big") + b"\x00" * 10)   # a batch cut short
    r = dump("--files", str(segment))
    assert r.stdout.splitlines()[-1] == f"Found 22 invalid bytes at the end of {segment.name}" and r.returncode == 0
    assert len(r.stdout.splitlines()) == 6
    segment.write_bytes(good + b"\x00" * 8 + b"\xff\xff\xff\xf0" + b"\x00" * 10)
    r = dump("--files", str(segment))
    assert r.returncode == 1 and r.stderr == (f"kafkalite dump-log: Found record size -16 smaller than minimum "
                                              f"record overhead (14) in file {segment}.\n")
    assert len(r.stdout.splitlines()) == 5       # the three good batches were printed first, as Kafka does
    other = tmp_path / "notes.txt"
    other.write_text("x")
    r = dump("--files", str(other))
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Dumping {other}\n", f"Ignoring unknown file {other}\n")
    missing = tmp_path / "00000000000000000099.log"
    r = dump("--files", str(missing))
    assert (r.returncode, r.stderr) == (1, f"kafkalite dump-log: {missing}\n")


def test_java_hash_orders() -> None:
    assert java_string_hash("hello") == 99162322            # "hello".hashCode()
    assert java_string_hash("") == 0
    assert java_hash_order(["version", "brokers"], java_string_hash) == ["brokers", "version"]
    assert java_hash_order(["logDir", "error", "partitions"], java_string_hash) == ["partitions", "error", "logDir"]
    assert java_hash_order(list(range(20)), lambda i: i) == list(range(20))


def test_log_dirs_json_shape() -> None:
    result = {"error_code": 0, "log_dir": "/d", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "partition_size": 68, "offset_lag": 0,
                                      "is_future_key": False}]},
        {"name": "u", "partitions": [{"partition_index": 0, "partition_size": 1, "offset_lag": 0,
                                      "is_future_key": False}]}]}
    assert log_dirs_json({0: [result]}, {"t"}) == (
        '{"brokers":[{"broker":0,"logDirs":[{"partitions":[{"partition":"t-0","size":68,"offsetLag":0,'
        '"isFuture":false}],"error":null,"logDir":"/d"}]}],"version":1}')


def test_table_and_offsets_and_patterns() -> None:
    assert table_lines(["ProducerId", "LastSequence"], [["12345678901", "3"]]) == [
        "ProducerId \tLastSequence\t", "12345678901\t3           \t"]
    assert offset_lines({("t", 10): 3, ("t", 2): 4, ("t", 1): -1}) == ["t:10:3", "t:2:4"]
    rules = pattern_list_filter("go-a:1-,go-b:-2,:7")
    assert [rules("go-a", 0), rules("go-a", 5), rules("go-b", 1), rules("go-b", 2), rules("x", 7)] == \
        [False, True, True, False, True]
    simple = topic_and_partitions_filter("go-.", "0,2")
    assert [simple("go-a", 0), simple("go-a", 1), simple("go-ab", 0)] == [True, False, False]
    with pytest.raises(ToolError, match="^Invalid rule specification: a:b:c$"):
        pattern_list_filter("a:b:c")


def test_load_client_properties(tmp_path: Path) -> None:
    f = tmp_path / "c.properties"
    f.write_text("# comment\n! also\n\nrequest.timeout.ms=15000\nclient.id : ops\nsecurity.protocol PLAINTEXT\n"
                 "sasl.jaas.config=a=b c\n")
    assert load_client_properties(str(f)) == {"request.timeout.ms": "15000", "client.id": "ops",
                                              "security.protocol": "PLAINTEXT", "sasl.jaas.config": "a=b c"}
    with pytest.raises(FileNotFoundError):   # the tools report it in one line (run_tool)
        load_client_properties(str(tmp_path / "none"))
