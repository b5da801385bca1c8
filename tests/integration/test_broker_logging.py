"""What a broker process logs (stderr), in Kafka 3.9's wording: one line per request at DEBUG,
log loading and recovery with offsets after SIGKILL, a truncated segment with its byte count,
segment rolls, segment deletion by retention, topic deletion, group rebalances and the
controller's election."""
from __future__ import annotations

import re
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType

from kafkalite.testing import Broker
from tests.integration.util import wait_until


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


_SEGMENT = r"LogSegment\(baseOffset={}, size={}, lastModifiedTime=\d+, largestRecordTimestamp=\d+\)"


def _wait_for_line(err: Path, pattern: str, timeout: float = 30) -> None:
    wait_until(lambda: re.search(pattern, err.read_text()) is not None, timeout=timeout, what=pattern)


def test_retention_and_topic_deletion_are_logged_as_kafka_logs_them(tmp_path: Path) -> None:
    """Segment deletion by retention size then time (UnifiedLog's reasons, the log start offset
    moving, LocalLog's delayed file deletion) and a topic's deletion (LogManager.asyncDelete and
    deleteLogs), in Kafka 3.9's words."""
    log_dir = tmp_path / "logs"
    err = tmp_path / "err"
    with Broker(log_dir=log_dir, stderr_path=err, log_segment_bytes=2000, log_retention_check_interval_ms=100,
                log_segment_delete_delay_ms=100) as b:
        b.create_topic("ret", 1)
        _produce(b.bootstrap_servers, "ret", 50)    # segments at 0, 11, 22, 33, 44 (11 batches each)
        sizes = {int(f.stem): f.stat().st_size for f in (log_dir / "ret-0").glob("*.log")}
        assert sorted(sizes) == [0, 11, 22, 33, 44]
        total = sum(sizes.values())
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            # exactly the first segment is over the size limit
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "ret",
                                                configs={"retention.bytes": str(total - sizes[0])})])
            _wait_for_line(err, r"Deleting segment files LogSegment\(baseOffset=0,")
            # then every segment is over the time limit: a new one is rolled to keep the log
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "ret", configs={"retention.ms": "1"})])
            _wait_for_line(err, r"Deleting segment files LogSegment\(baseOffset=11,")
            admin.delete_topics(["ret"])
            _wait_for_line(err, r"Deleted log for partition ret-0 in ")
        finally:
            admin.close()
        text = err.read_text()
    unified = re.escape(f"[UnifiedLog partition=ret-0, dir={log_dir}] ")
    local = re.escape(f"[LocalLog partition=ret-0, dir={log_dir}] ")
    by_size = re.findall(unified + r"Deleting segment LogSegment\(baseOffset=(\d+), size=(\d+), .*?\) due to log "
                         rf"retention size {total - sizes[0]} breach\. Log size after deletion will be (\d+)\.", text)
    assert by_size == [("0", str(sizes[0]), str(total - sizes[0]))]
    by_time = re.findall(unified + r"Deleting segment LogSegment\(baseOffset=(\d+), size=(\d+), .*?\) due to log "
                         r"retention time 1ms breach based on the largest record timestamp in the segment", text)
    assert by_time == [(str(base), str(sizes[base])) for base in (11, 22, 33, 44)]
    assert re.findall(unified + r"Incremented log start offset to (\d+) due to segment deletion", text) == ["11", "50"]
    assert re.search(local + r"Rolled new log segment at offset 50 in \d+ ms\.", text)
    # the files go after file.delete.delay.ms, in one line per deletion, as Kafka's "delete-file" task
    files = re.findall(local + r"Deleting segment files (.*)", text)
    assert len(files) == 2
    assert re.fullmatch(_SEGMENT.format(0, sizes[0]), files[0])
    assert re.fullmatch(",".join(_SEGMENT.format(base, sizes[base]) for base in (11, 22, 33, 44)), files[1])
    renamed = re.findall(rf"Log for partition ret-0 is renamed to ({re.escape(str(log_dir))}/ret-0\.[0-9a-f]{{32}}-delete)"
                         r" and is scheduled for deletion", text)
    assert len(renamed) == 1
    assert f"Deleted log for partition ret-0 in {renamed[0]}." in text
    assert not (log_dir / renamed[0]).exists()
    assert " ERROR " not in text and " WARN " not in text, text


def test_group_rebalance_and_controller_election_are_logged(tmp_path: Path) -> None:
    """The group coordinator's rebalance lines (GroupCoordinator) for a member joining and
    leaving, and the controller's election, with its epoch incremented on a restart."""
    err = tmp_path / "err"
    log_dir = tmp_path / "logs"
    with Broker(log_dir=log_dir, stderr_path=err) as b:
        b.create_topic("grp", 1)
        consumer = KafkaConsumer("grp", bootstrap_servers=b.bootstrap_servers, group_id="g1", client_id="log-c",
                                 session_timeout_ms=45000,
                                 auto_offset_reset="earliest")
        try:
            wait_until(lambda: bool(consumer.poll(100) or consumer.assignment()), timeout=30, what="an assignment")
            member_id = consumer._coordinator._generation.member_id
        finally:
            consumer.close()
        _wait_for_line(err, r"Member MemberMetadata\(")
        b.stop()
        mark = len(err.read_text())
        b.start()
        restarted = err.read_text()[mark:]
    text = err.read_text()
    assert "0 successfully elected as the controller. Epoch incremented to 1 and epoch zk version is now 1" in text
    assert "0 successfully elected as the controller. Epoch incremented to 2 and epoch zk version is now 2" in restarted
    assert "Ready to serve as the new controller with epoch 2" in restarted
    member = re.escape(member_id)
    lines = [ln.split(" kafkalite.coordinator.group.group_coordinator: ", 1)[1] for ln in text.splitlines()
             if " kafkalite.coordinator.group.group_coordinator: " in ln and "g1" in ln]
    assert len(lines) == 6, lines
    expected = [
        rf"Preparing to rebalance group g1 in state PreparingRebalance with old generation 0 \(__consumer_offsets-0\) "
        rf"\(reason: Adding new member {member} with group instance id None; client reason: not provided\)",
        r"Stabilized group g1 generation 1 \(__consumer_offsets-0\) with 1 members",
        rf"Assignment received from leader {member} for group g1 for generation 1\. The group has 1 members, "
        r"0 of which are static\.",
        rf"Preparing to rebalance group g1 in state PreparingRebalance with old generation 1 \(__consumer_offsets-0\) "
        rf"\(reason: Removing member {member} on LeaveGroup; client reason: not provided\)",
        r"Group g1 with generation 2 is now empty \(__consumer_offsets-0\)",
        rf"Member MemberMetadata\(memberId={member}, groupInstanceId=None, clientId=log-c, clientHost=/127\.0\.0\.1, "
        r"sessionTimeoutMs=45000, rebalanceTimeoutMs=300000, supportedProtocols=List\(range, roundrobin\)\) has left "
        r"group g1 through explicit `LeaveGroup`; client reason: not provided",
    ]
    for pattern, line in zip(expected, lines):
        assert re.fullmatch(pattern, line), (pattern, line)
