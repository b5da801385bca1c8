"""What a broker process logs (stderr), in Kafka 3.9's wording: one line per request at DEBUG,
log loading and recovery with offsets after SIGKILL, a truncated segment with its byte count,
segment rolls."""
from __future__ import annotations

import re
from pathlib import Path

from kafka import KafkaProducer

from kafkalite.testing import Broker


class _DebugBroker(Broker):
    def command(self) -> list[str]:
        return [*super().command(), "--log-level", "DEBUG"]


def _produce(bootstrap: str, topic: str, count: int, size: int = 100) -> None:
    p = KafkaProducer(bootstrap_servers=bootstrap, client_id="logging-test", linger_ms=0)
    try:
        for _ in range(count):
            p.send(topic, b"x" * size).get(10)
    finally:
        p.close()


def _lines_after(text: str, marker: int) -> list[str]:
    return text[marker:].splitlines()


def test_debug_logs_one_line_per_request(tmp_path: Path) -> None:
    with _DebugBroker(stderr_path=tmp_path / "err") as b:
        b.create_topic("dbg", 1)
        _produce(b.bootstrap_servers, "dbg", 3)
        out = (tmp_path / "err").read_text()
    produce = [ln for ln in out.splitlines() if "DEBUG kafkalite.request.logger: Completed request:Produce v" in ln]
    assert len(produce) == 3, produce
    assert re.search(r"Completed request:Produce v\d+ \(correlation id \d+, client id logging-test\) from "
                     r"connection 127\.0\.0\.1:\d+-127\.0\.0\.1:\d+-\d+;totalTime:\d+\.\d{3}ms$", produce[0])
    assert any("Completed request:CreateTopics v" in ln for ln in out.splitlines())


def test_info_logs_hide_requests(tmp_path: Path) -> None:
    with Broker(stderr_path=tmp_path / "err") as b:
        b.create_topic("quiet", 1)
        _produce(b.bootstrap_servers, "quiet", 2)
        out = (tmp_path / "err").read_text()
    assert "Completed request:" not in out
    assert "Created log for partition quiet-0 in " in out


def test_restart_after_sigkill_logs_recovery_with_offsets(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    err = tmp_path / "err"
    with Broker(log_dir=log_dir, stderr_path=err, log_segment_bytes=2000,
                log_flush_interval_ms=3_600_000, log_flush_offset_checkpoint_interval_ms=3_600_000) as b:
        b.create_topic("rec", 1)
        _produce(b.bootstrap_servers, "rec", 50)
        out = err.read_text()
        rolls = re.findall(rf"\[LocalLog partition=rec-0, dir={re.escape(str(log_dir))}\] Rolled new log segment "
                           rf"at offset (\d+) in \d+ ms\.", out)
        assert [int(x) for x in rolls] == [11, 22, 33, 44]    # 11 batches of 100 bytes a segment
        b.kill()
        mark = len(err.read_text())
        b.start()
        lines = _lines_after(err.read_text(), mark)
    text = "\n".join(lines)
    assert f"Recovering 1 logs from {log_dir} since no clean shutdown file was found" in text
    ident = f"[LogLoader partition=rec-0, dir={log_dir}] "
    recovered = re.findall(re.escape(ident) + r"Recovering unflushed segment (\d+)\. (\d+)/(\d+) recovered for rec-0\.",
                           text)
    # the recovery point sits in one of the five segments: recovery starts at that segment
    assert recovered and [int(r[0]) for r in recovered] == [0, 11, 22, 33, 44][-len(recovered):]
    assert [(int(r[1]), int(r[2])) for r in recovered] == [(i, len(recovered)) for i in range(len(recovered))]
    assert ident + "Loading producer state till offset 50 with message format version 2" in text
    assert re.search(rf"Completed load of Log\(dir={re.escape(str(log_dir / 'rec-0'))}, topic=rec, partition=0, "
                     rf"recoveryPoint=\d+\) with 5 segments, local-log-start-offset 0 and log-end-offset 50 in "
                     rf"\d+ms \(1/1 completed in {re.escape(str(log_dir))}\)", text)
    assert re.search(rf"Loaded 1 logs in \d+ms \(unclean log dirs = \['{re.escape(str(log_dir))}'\]\)", text)


def test_garbage_at_the_end_of_a_segment_is_truncated_with_its_byte_count(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    err = tmp_path / "err"
    with Broker(log_dir=log_dir, stderr_path=err) as b:
        b.create_topic("torn", 1)
        _produce(b.bootstrap_servers, "torn", 5)
        b.stop()
        segment = log_dir / "torn-0" / "00000000000000000000.log"
        size = segment.stat().st_size
        with open(segment, "ab") as f:
            f.write(bytes(range(250)) * 2)     # 500 bytes that are no record batch
        mark = len(err.read_text())
        b.start()
        text = err.read_text()[mark:]
        assert segment.stat().st_size == size
    ident = f"[LogLoader partition=torn-0, dir={log_dir}] "
    assert f"Skipping recovery of 1 logs from {log_dir} since clean shutdown file was found" in text
    assert (ident + f"Found a corrupted index file corresponding to log file {segment}, recovering segment and "
            "rebuilding index files...") in text
    assert ident + f"Found invalid messages in log segment {segment} at byte offset {size}." in text
    assert ident + f"Truncated 500 invalid bytes at the end of segment {segment} during recovery" in text
