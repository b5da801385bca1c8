"""LogManager and the log directory's files: checkpoints (Kafka's format, atomic), the clean
shutdown marker, partition directories, deletion, locking, topic ids."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from kafkalite.config.log_config import LogConfig
from kafkalite import fileio
from kafkalite.log.checkpoint import (CheckpointError, atomic_write, format_offset_checkpoint,
                                      parse_offset_checkpoint, read_offset_checkpoint,
                                      read_partition_metadata, topic_id_from_string,
                                      topic_id_to_string, write_offset_checkpoint)
from kafkalite.log.errors import InconsistentTopicIdError, LogError
from kafkalite.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from kafkalite.log.record_batch import build_batch
from kafkalite.log.segment import log_file

T0 = 1_700_000_000_000


def records(n: int = 1) -> bytes:
    return build_batch([(b"k", b"v%d" % i, T0 + i) for i in range(n)])


def test_checkpoint_format_and_atomic_write(tmp_path: Path) -> None:
    entries = {("b.topic-x", 3): 42, ("a", 0): 7}
    assert format_offset_checkpoint(entries) == b"0\n2\na 0 7\nb.topic-x 3 42\n"
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offset_checkpoint(path, entries)
    assert read_offset_checkpoint(path) == entries
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    assert read_offset_checkpoint(tmp_path / "missing") == {}
    write_offset_checkpoint(path, {})
    assert path.read_text() == "0\n0\n"
    for bad in ("", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "zero\n0\n"):
        with pytest.raises(CheckpointError):
            parse_offset_checkpoint(bad)


def test_atomic_write_failure_leaves_the_file_and_no_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "meta.properties"
    atomic_write(path, b"old\n")

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(fileio.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left on device"):
        atomic_write(path, b"new\n")
    assert path.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.properties"]


def test_topic_id_encoding_is_kafkas() -> None:
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding.
    u = uuid.UUID(bytes=bytes(range(16)))
    assert topic_id_to_string(u) == "AAECAwQFBgcICQoLDA0ODw"
    assert topic_id_from_string("AAECAwQFBgcICQoLDA0ODw") == u
    u2 = uuid.UUID(bytes=b"\xff" * 16)
    assert topic_id_to_string(u2) == "_____________________w"
    assert topic_id_from_string(topic_id_to_string(u2)) == u2


def test_lifecycle_clean_shutdown_and_restart(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    lm = LogManager([d1, d2], LogConfig())
    lm.startup()
    tid = uuid.uuid4()
    a = lm.get_or_create_log("my.topic-with-dash", 3, topic_id=tid)
    b = lm.get_or_create_log("other", 0)
    assert lm.get_or_create_log("my.topic-with-dash", 3) is a
    assert {a.dir.parent, b.dir.parent} == {d1, d2}          # spread over the directories
    assert a.dir.name == "my.topic-with-dash-3"
    assert (a.dir / "partition.metadata").read_text() == \
        f"version: 0\ntopic_id: {topic_id_to_string(tid)}\n"
    a.append_as_leader(records(3), 0, T0)
    b.append_as_leader(records(2), 0, T0)
    a.maybe_increment_log_start_offset(1)
    assert lm.get_log(("my.topic-with-dash", 3)) is a
    assert len(lm.all_logs()) == 2
    lm.shutdown()
    a_dir = a.dir.parent
    assert (a_dir / "recovery-point-offset-checkpoint").read_text() == \
        "0\n1\nmy.topic-with-dash 3 3\n"
    assert (a_dir / "log-start-offset-checkpoint").read_text() == "0\n1\nmy.topic-with-dash 3 1\n"
    assert (b.dir.parent / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    for d in (d1, d2):
        assert json.loads((d / CLEAN_SHUTDOWN_FILE).read_text()) == {"version": 0, "brokerEpoch": -1}

    lm2 = LogManager([d1, d2], LogConfig())
    lm2.startup()
    for d in (d1, d2):
        assert not (d / CLEAN_SHUTDOWN_FILE).exists()     # a crash from now on must recover
    a2 = lm2.get_log(("my.topic-with-dash", 3))
    assert a2 is not None and a2.topic_id == tid
    assert (a2.log_start_offset, a2.log_end_offset, a2.recovery_point) == (1, 3, 3)
    assert lm2.get_log(("other", 0)).log_end_offset == 2
    with pytest.raises(InconsistentTopicIdError):
        lm2.get_or_create_log("my.topic-with-dash", 3, topic_id=uuid.uuid4())
    lm2.shutdown()


@pytest.mark.parametrize("failing_call", [1, 2])
def test_a_sync_error_at_shutdown_writes_no_checkpoint_and_no_marker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing_call: int) -> None:
    # The shutdown syncs twice: once while the logs close (their appended data), once after
    # (what the closes wrote). A writeback error reported to either call means the data may not
    # be durable: the recovery points stay where they were and the next start recovers.
    from kafkalite.log import log_manager as log_manager_module
    d = tmp_path / "logs"
    lm = LogManager([d], LogConfig(), lock_dirs=False)
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    lg.append_as_leader(records(3), 0, T0)
    before = (d / "recovery-point-offset-checkpoint").read_bytes() \
        if (d / "recovery-point-offset-checkpoint").exists() else None
    calls: list[Path] = []

    def syncfs(path: Path) -> None:
        calls.append(path)
        if len(calls) == failing_call:
            raise OSError(5, "Input/output error")
    monkeypatch.setattr(log_manager_module, "syncfs", syncfs)
    with pytest.raises(OSError, match="Input/output error"):
        lm.shutdown()
    assert calls == [d, d]
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()
    after = (d / "recovery-point-offset-checkpoint").read_bytes() \
        if (d / "recovery-point-offset-checkpoint").exists() else None
    assert after == before and (before is None or b"t 0 3" not in before)
    monkeypatch.undo()
    lm2 = LogManager([d], LogConfig(), lock_dirs=False)
    lm2.startup()
    again = lm2.get_log(("t", 0))
    assert again is not None and again.log_end_offset == 3
    lm2.shutdown()


def test_unclean_restart_recovers_from_checkpointed_recovery_point(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    lm = LogManager([d], LogConfig(), lock_dirs=False)
    lm.startup()
    lg = lm.get_or_create_log("t", 0)
    for _ in range(3):
        lg.append_as_leader(records(2), 0, T0)
    lg.flush(4)
    lm.checkpoint_recovery_points()
    # Crash: no shutdown, no marker; a torn batch at the end of the segment.
    lg.close_handlers()
    seg = log_file(lg.dir, 0)
    seg.write_bytes(seg.read_bytes()[:-10])
    assert read_offset_checkpoint(d / "recovery-point-offset-checkpoint") == {("t", 0): 4}
    lm2 = LogManager([d], LogConfig(), lock_dirs=False)
    lm2.startup()
    lg2 = lm2.get_log(("t", 0))
    assert (lg2.log_end_offset, lg2.recovery_point) == (4, 4)
    lm2.shutdown()


def test_corrupt_checkpoint_means_full_recovery(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    lm = LogManager([d], LogConfig())
    lm.startup()
    lm.get_or_create_log("t", 0).append_as_leader(records(2), 0, T0)
    lm.shutdown()
    (d / "recovery-point-offset-checkpoint").write_text("garbage")
    lm2 = LogManager([d], LogConfig())
    lm2.startup()
    lg = lm2.get_log(("t", 0))
    assert lg.log_end_offset == 2 and lg.recovery_point == 0
    lm2.shutdown()


def test_startup_ignores_files_and_removes_deleted_dirs(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    (d / "old-topic-1.0123456789abcdef0123456789abcdef-delete").mkdir(parents=True)
    (d / "old-topic-1.0123456789abcdef0123456789abcdef-delete" / "00000000000000000000.log").write_bytes(b"")
    (d / "remote-log-index-cache").mkdir()      # tiered storage's cache: skipped, as in Kafka
    (d / "meta.properties").write_text("version=0\n")
    lm = LogManager([d], LogConfig())
    lm.startup()
    assert lm.all_logs() == []
    assert sorted(p.name for p in d.iterdir()) == [".lock", "meta.properties", "remote-log-index-cache"]
    lm.shutdown()


@pytest.mark.parametrize("name", ["not_a_partition", "lost+found", ".snapshot", "backup-delete", "t-", "t-x"])
def test_startup_refuses_a_directory_that_is_not_a_partition_and_touches_nothing(tmp_path: Path, name: str) -> None:
    """Kafka 3.9's loadLogs (LocalLog.parseTopicPartitionName) stops at such a directory."""
    d = tmp_path / "logs"
    (d / "old-topic-1.0123456789abcdef0123456789abcdef-delete").mkdir(parents=True)
    (d / name).mkdir()
    (d / name / "00000000000000000000.log").write_bytes(b"\xff" * 500)
    (d / ".kafka_cleanshutdown").write_text("{}")
    before = sorted(str(p.relative_to(d)) for p in d.rglob("*"))
    lm = LogManager([d], LogConfig())
    with pytest.raises(LogError) as e:
        lm.startup()
    assert str(e.value) == (f"Found directory {d / name}, '{name}' is not in the form of topic-partition or "
                            f"topic-partition.uniqueId-delete (if marked for deletion). Kafka's log directories "
                            f"(and children) should only contain Kafka topic data.")
    lm.shutdown()   # after a failed start-up: writes nothing, lets go of the lock
    assert sorted(str(p.relative_to(d)) for p in d.rglob("*")) == sorted(before + [".lock"])
    assert (d / name / "00000000000000000000.log").read_bytes() == b"\xff" * 500
    assert (d / ".kafka_cleanshutdown").read_text() == "{}"


def test_delete_log(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    lm = LogManager([d], LogConfig())
    lm.startup()
    lg = lm.get_or_create_log("gone", 2)
    lg.append_as_leader(records(4), 0, T0)
    keep = lm.get_or_create_log("kept", 0)
    keep.append_as_leader(records(1), 0, T0)
    lg.flush()
    lm.checkpoint_recovery_points()
    f = lg.read(0, 1 << 20)
    assert lm.delete_log("gone", 2) is lg
    assert lm.get_log(("gone", 2)) is None
    assert not any(p.name.startswith("gone-2") for p in d.iterdir())
    assert read_offset_checkpoint(d / "recovery-point-offset-checkpoint") == {("kept", 0): 0}
    assert len(f.read_bytes()) == f.size > 0       # an in-flight fetch result still reads
    assert lm.delete_log("gone", 2) is None
    again = lm.get_or_create_log("gone", 2)        # re-created empty
    assert again.log_end_offset == 0
    lm.shutdown()


def test_directory_lock(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    lm = LogManager([d], LogConfig())
    lm.startup()
    other = LogManager([d], LogConfig())
    with pytest.raises(LogError):
        other.startup()
    lm.shutdown()
    other.startup()                                 # released by the first shutdown
    other.shutdown()


def test_topic_configs_flush_and_retention(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    lm = LogManager([d], LogConfig())
    lm.startup()
    b = records(1)
    lg = lm.get_or_create_log("short", 0, LogConfig(segment_bytes=len(b), retention_ms=1000,
                                                    flush_ms=500))
    for i in range(3):
        lg.append_as_leader(build_batch([(b"k", b"v", T0 + i)]), 0, T0)
    assert len(lg.segments) == 3
    lm.flush_dirty_logs(now_ms=lg.last_flush_ms + 499)
    assert lg.recovery_point == 0
    assert lm.flush_dirty_logs(now_ms=lg.last_flush_ms + 500) == 1
    assert lg.recovery_point == 3
    # Retention bounded by the high watermark the caller supplies.
    assert lm.cleanup_logs(now_ms=T0 + 10**6, high_watermark=lambda t, p: 1) == 1
    assert lg.log_start_offset == 1
    assert lm.cleanup_logs(now_ms=T0 + 10**6) == 2
    assert (lg.log_start_offset, lg.log_end_offset) == (3, 3)
    lm.update_topic_config("short", LogConfig(retention_ms=-1))
    assert lg.config.retention_ms == -1
    lm.shutdown()
    # Start-up applies the per-topic configs it is given.
    lm2 = LogManager([d], LogConfig())
    lm2.startup({"short": LogConfig(segment_bytes=12345)})
    assert lm2.get_log(("short", 0)).config.segment_bytes == 12345
    assert read_partition_metadata(lm2.get_log(("short", 0)).dir) is None
    lm2.shutdown()
