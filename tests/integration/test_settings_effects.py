"""Settings that used to be accepted and ignored (issue 14), on a real broker process:
file.delete.delay.ms / log.segment.delete.delay.ms (deleted segments renamed ``.deleted``, deleted
partitions renamed ``-delete``, both removed after the delay or at the next start-up), flush.ms
(seen through the recovery-point checkpoint), and the one start-up warning naming the settings
that stay ignored, with DescribeConfigs' documentation saying so."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Callable

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import DescribeConfigsRequest

from kafkalite.log.checkpoint import read_offset_checkpoint
from tests.harness import BrokerProcess
from tests.integration.test_admin_apis import delete_records
from tests.integration.util import OFFSET_OUT_OF_RANGE, RawClient, Rec, build_batch, create_topic, wait_until

TIMEOUT = 20.0
DELETE_DIR = re.compile(r"(.+)-(\d+)\.[0-9a-f]{32}-delete")


def produce(bootstrap: str, topic: str, batches: int, partition: int = 0) -> None:
    with RawClient(bootstrap) as c:
        for i in range(batches):
            r = c.produce(topic, partition, build_batch([Rec(b"k%d" % i, b"v" * 60)]))
            assert (r.error_code, r.base_offset) == (0, i)


def names(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def deleted_files(part: Path) -> list[str]:
    return [n for n in names(part) if n.endswith(".deleted")]


def delete_dirs(log_dir: Path, topic: str) -> list[tuple[str, int]]:
    out = []
    for n in names(log_dir):
        m = DELETE_DIR.fullmatch(n)
        if m and m.group(1) == topic:
            out.append((m.group(1), int(m.group(2))))
    return sorted(out)


def test_retention_renames_segments_and_removes_them_after_file_delete_delay(
        broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    b = broker_factory({"log.retention.check.interval.ms": "100"})
    create_topic(b.bootstrap_servers, topic_name, 1,
                 {"segment.bytes": "300", "file.delete.delay.ms": "15000"})
    produce(b.bootstrap_servers, topic_name, 8)
    part = b.log_dir / f"{topic_name}-0"
    bases_before = sorted(int(n[:20]) for n in names(part) if n.endswith(".log"))
    assert len(bases_before) >= 3
    cut = bases_before[2]
    with RawClient(b.bootstrap_servers) as c:
        assert delete_records(c, topic_name, {0: cut}) == {0: (0, cut)}
    wait_until(lambda: len([n for n in deleted_files(part) if n.endswith(".log.deleted")]) == 2,
               TIMEOUT, what="two segments renamed .deleted")
    renamed = sorted(n for n in deleted_files(part) if n.endswith(".log.deleted"))
    assert renamed == [f"{base:020d}.log.deleted" for base in bases_before[:2]]
    assert sorted(int(n[:20]) for n in names(part) if n.endswith(".log")) == bases_before[2:]
    with RawClient(b.bootstrap_servers) as c:
        assert c.fetch(topic_name, 0, 0).error_code == OFFSET_OUT_OF_RANGE
        parsed, hw = c.fetch_all(topic_name, 0, start=cut)
        assert (hw, [rec.offset for rec in parsed.records]) == (8, list(range(cut, 8)))
    assert len(deleted_files(part)) >= 2          # still there: the delay is 15 s
    wait_until(lambda: deleted_files(part) == [], 2 * TIMEOUT, what=".deleted files removed")


def test_deleted_topic_directories_wait_for_log_segment_delete_delay(
        broker_factory: Callable[..., BrokerProcess], topic_name: str) -> None:
    b = broker_factory({"log.segment.delete.delay.ms": "3000"})
    create_topic(b.bootstrap_servers, topic_name, 2)
    produce(b.bootstrap_servers, topic_name, 3, partition=1)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=10000)
    try:
        r = admin.delete_topics([topic_name], raise_errors=False)
        assert [(t["name"], t["error_code"]) for t in r["topics"]] == [(topic_name, 0)]
    finally:
        admin.close()
    wait_until(lambda: delete_dirs(b.log_dir, topic_name) == [(topic_name, 0), (topic_name, 1)],
               TIMEOUT, what="partition directories renamed -delete")
    assert f"{topic_name}-0" not in names(b.log_dir) and f"{topic_name}-1" not in names(b.log_dir)
    wait_until(lambda: delete_dirs(b.log_dir, topic_name) == [], TIMEOUT, what="-delete directories removed")


def test_a_restart_removes_deletions_left_pending(broker_factory: Callable[..., BrokerProcess],
                                                  tmp_path: Path) -> None:
    log_dir = tmp_path / "kept-logs"
    b = broker_factory({"log.segment.delete.delay.ms": "600000", "log.retention.check.interval.ms": "100"},
                       log_dir=log_dir)
    create_topic(b.bootstrap_servers, "doomed", 1)
    produce(b.bootstrap_servers, "doomed", 2)
    create_topic(b.bootstrap_servers, "kept", 1, {"segment.bytes": "300"})
    produce(b.bootstrap_servers, "kept", 8)
    part = log_dir / "kept-0"
    cut = sorted(int(n[:20]) for n in names(part) if n.endswith(".log"))[1]
    with RawClient(b.bootstrap_servers) as c:
        assert delete_records(c, "kept", {0: cut}) == {0: (0, cut)}
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=10000)
    try:
        admin.delete_topics(["doomed"])
    finally:
        admin.close()
    wait_until(lambda: delete_dirs(log_dir, "doomed") == [("doomed", 0)] and len(deleted_files(part)) >= 2,
               TIMEOUT, what="a -delete directory and .deleted files")
    b.kill()
    b2 = broker_factory(log_dir=log_dir)
    assert delete_dirs(log_dir, "doomed") == []
    assert deleted_files(part) == []
    with RawClient(b2.bootstrap_servers) as c:
        parsed, hw = c.fetch_all("kept", 0, start=cut)
        assert (hw, [rec.offset for rec in parsed.records]) == (8, list(range(cut, 8)))


def test_flush_ms_moves_the_recovery_point_checkpoint(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"log.flush.offset.checkpoint.interval.ms": "100"})
    create_topic(b.bootstrap_servers, "timed", 1, {"flush.ms": "300"})
    create_topic(b.bootstrap_servers, "untimed", 1)
    produce(b.bootstrap_servers, "timed", 5)
    produce(b.bootstrap_servers, "untimed", 4)
    checkpoint = b.log_dir / "recovery-point-offset-checkpoint"

    def recovery_point(topic: str) -> int:
        try:
            return read_offset_checkpoint(checkpoint).get((topic, 0), -1)
        except (OSError, ValueError):
            return -1
    wait_until(lambda: recovery_point("timed") == 5, TIMEOUT, what="timed-0 checkpointed at 5")
    assert recovery_point("untimed") == 0       # no flush.ms, no roll: nothing flushed yet
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=10000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "untimed", configs={"flush.ms": "200"})])
    finally:
        admin.close()
    # no produce needed: the log holding unflushed records is flushed by the new flush.ms
    wait_until(lambda: recovery_point("untimed") == 4, TIMEOUT, what="untimed-0 checkpointed at 4")


def test_ignored_settings_are_named_at_start_up_and_documented(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory({"num.io.threads": "16", "queued.max.requests": "100", "num.network.threads": "4",
                        "num.partitions": "2"})
    expected = ("these settings are accepted for compatibility with Kafka and ignored by kafkalite "
                "(see docs/operations.md): num.io.threads, num.network.threads, queued.max.requests")

    def warning_lines() -> list[str]:
        return [line for line in b.stderr_lines if "ignored by kafkalite" in line]
    wait_until(warning_lines, TIMEOUT, what="the ignored-settings warning")
    time.sleep(0.2)     # a second such line would follow at once
    (line,) = warning_lines()
    assert "WARNING" in line and line.endswith(expected)
    with RawClient(b.bootstrap_servers) as c:
        DC = DescribeConfigsRequest
        resp = c.request(DC[4](resources=[DC.DescribeConfigsResource(
            resource_type=4, resource_name="0",
            configuration_keys=["num.io.threads", "fetch.max.bytes", "queued.max.requests"])],
            include_synonyms=False, include_documentation=True))
    (r,) = resp.results
    got = {e.name: (e.value, e.config_source, e.documentation) for e in r.configs}
    assert got == {
        "fetch.max.bytes": ("57671680", 5,
                            "Largest response a Fetch request may get; smaller max_bytes in the request win."),
        "num.io.threads": ("16", 4, "Accepted and ignored by kafkalite: requests are handled on the event loop."),
        "queued.max.requests": ("100", 4, "Accepted and ignored by kafkalite: there is no request queue: "
                                          "a connection's next request is read once the previous one is answered."),
    }
