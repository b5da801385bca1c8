"""Per-topic configs given at CreateTopics time keep applying after a restart (they live in the
metadata store; logs opened at start-up must take them over)."""
from __future__ import annotations

from pathlib import Path

from tests.harness import BrokerProcess
from tests.integration.util import RawClient, Rec, build_batch


def _segments(log_dir: Path, topic: str) -> list[str]:
    return sorted(p.name for p in (log_dir / f"{topic}-0").glob("*.log"))


def test_segment_bytes_override_survives_restart(tmp_path: Path) -> None:
    b = BrokerProcess(log_dir=tmp_path / "logs").start()
    try:
        with RawClient(b.bootstrap_servers) as c:
            r = c.create_topic("small-segments", 1, configs={"segment.bytes": "2000"})
            assert r.error_code == 0
            batch = build_batch([Rec(b"k", b"x" * 900)])
            for _ in range(4):
                assert c.produce("small-segments", 0, batch, version=12).error_code == 0
        before = _segments(b.log_dir, "small-segments")
        assert len(before) >= 2          # rolled at ~2000 bytes, not at the 1 GiB default
        b.restart()
        with RawClient(b.bootstrap_servers) as c:
            for _ in range(4):
                assert c.produce("small-segments", 0, batch, version=12).error_code == 0
            assert c.list_offset("small-segments", 0, -1).offset == 8
        after = _segments(b.log_dir, "small-segments")
        # still rolling at 2000 bytes after the restart: two batches (~1 KB each) per segment at most
        assert len(after) >= len(before) + 2
    finally:
        b.close()
