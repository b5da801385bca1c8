"""Property tests of the Log against an in-memory model (hypothesis state machines).

The model is the list of batches the log must hold — (base offset, [(timestamp, value)], size) —
plus the log start and end offsets. Rules append, read, look up by timestamp, truncate, apply
retention, roll, flush, reopen cleanly and crash (garbage tail, torn batch) and reopen; after
every step the log must agree with the model, and its segment layout must obey Kafka's roll
rules (size and time checked both ways: every boundary has a reason, no batch missed one).
A second machine checks idempotent-producer sequences, duplicates and reopen/truncation.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule)
from kafka.record.memory_records import MemoryRecordsBuilder

from kafkalite.config.log_config import LogConfig
from kafkalite.log import errors
from kafkalite.log.log import Log
from kafkalite.log.producer_snapshot import list_snapshots, read_snapshot
from kafkalite.log.record_batch import decode_records, split_batches
from kafkalite.log.segment import log_file

T0 = 1_600_000_000_000


@dataclass
class MBatch:
    base: int
    recs: list[tuple[int, bytes]]
    size: int
    pid: int = -1
    epoch: int = -1
    first_seq: int = -1

    @property
    def last(self) -> int:
        return self.base + len(self.recs) - 1

    @property
    def next(self) -> int:
        return self.base + len(self.recs)

    @property
    def max_ts(self) -> int:
        return max(ts for ts, _v in self.recs)


def make_batch(recs: list[tuple[int, bytes]], pid: int = -1, epoch: int = -1,
               seq: int = -1) -> bytes:
    b = MemoryRecordsBuilder(2, 0, 1 << 20, producer_id=pid, producer_epoch=epoch,
                             base_sequence=seq)
    for ts, v in recs:
        b.append(ts, b"k", v)
    b.close()
    return bytes(b.buffer())


def decode_all(data: bytes) -> list[tuple[int, list[tuple[int, bytes]]]]:
    out = []
    for p, h in split_batches(data)[0]:
        recs = decode_records(data[p:p + h.size], h)
        out.append((h.base_offset, [(r.timestamp, r.value) for r in recs]))
    return out


@dataclass
class Model:
    batches: list[MBatch] = field(default_factory=list)
    leo: int = 0
    lso: int = 0

    def expected_read(self, offset: int, max_bytes: int, max_offset: int | None,
                      min_one: bool) -> list[MBatch]:
        if offset == self.leo or (max_offset is not None and offset >= max_offset):
            return []
        out: list[MBatch] = []
        total = 0
        budget = max_bytes
        for b in self.batches:
            if b.last < offset:
                continue
            if max_offset is not None and b.last >= max_offset:
                break
            if not out and min_one:
                budget = max(max_bytes, b.size)
            if total + b.size > budget:
                break
            out.append(b)
            total += b.size
        return out

    def expected_lookup(self, target: int) -> tuple[int, int] | None:
        for b in self.batches:
            for i, (ts, _v) in enumerate(b.recs):
                if b.base + i >= self.lso and ts >= target:
                    return ts, b.base + i
        return None

    def expected_max(self) -> tuple[int, int]:
        best: tuple[int, int] | None = None
        for b in self.batches:
            for i, (ts, _v) in enumerate(b.recs):
                if best is None or ts > best[0]:
                    best = (ts, b.base + i)
        return best if best is not None else (-1, -1)


# (records, value size, clock advance, per-record timestamp jitter)
BATCH_SPEC = st.tuples(st.integers(1, 4), st.integers(1, 25), st.integers(0, 120),
                       st.lists(st.integers(-15, 15), min_size=4, max_size=4))


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="logprop-"))
        self.path = self.tmp / "topic-0"
        self.model = Model()
        self.now = T0
        self.counter = 0
        self.allowed_boundaries: set[int] = set()
        self.lg: Log | None = None

    @initialize(seg_bytes=st.integers(260, 1500), index_bytes=st.sampled_from([24, 36, 60, 240]),
                interval=st.sampled_from([0, 150, 600]), segment_ms=st.sampled_from([60, 400, 10**9]),
                prefill=st.lists(BATCH_SPEC, max_size=12))
    def setup(self, seg_bytes: int, index_bytes: int, interval: int, segment_ms: int,
              prefill: list) -> None:
        self.cfg = LogConfig(segment_bytes=seg_bytes, segment_index_bytes=index_bytes,
                             index_interval_bytes=interval, segment_ms=segment_ms,
                             retention_ms=-1, retention_bytes=-1)
        self.lg = Log.open(self.path, self.cfg, now_ms=self.now)
        for spec in prefill:
            self._append_one(*spec)

    def teardown(self) -> None:
        if self.lg is not None and not self.lg.closed:
            self.lg.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------
    def _segment_batches(self) -> list[tuple[object, list[MBatch]]]:
        assert self.lg is not None
        segs = self.lg.segments
        out = []
        for i, s in enumerate(segs):
            hi = segs[i + 1].base_offset if i + 1 < len(segs) else None
            mine = [b for b in self.model.batches
                    if b.base >= s.base_offset and (hi is None or b.base < hi)]
            out.append((s, mine))
        return out

    def _expect_reopen(self, last_base: int) -> None:
        """What a reopen must yield: the log end offset is re-read from the last segment
        (``last_base``), and a log ending below its start offset starts over there."""
        tail = [b for b in self.model.batches if b.base >= last_base]
        leo = tail[-1].next if tail else last_base
        if leo < self.model.lso:
            self.model.batches = []
            leo = self.model.lso
            self.allowed_boundaries.add(leo)
        self.model.leo = leo

    def _forget_emptied_boundaries(self) -> None:
        """A segment that lost its first batch no longer shows why it was rolled: the next
        batch appended to it is not the one that triggered the roll."""
        for seg, mine in self._segment_batches():
            if not mine:
                self.allowed_boundaries.add(seg.base_offset)

    # -- rules ---------------------------------------------------------------------------
    def _append_one(self, n: int, size: int, dt: int, jitter: list[int]) -> None:
        assert self.lg is not None
        self.now += dt
        recs = []
        for i in range(n):
            self.counter += 1
            recs.append((max(0, self.now + jitter[i]), f"{self.counter}:".encode() + b"x" * size))
        data = make_batch(recs)
        info = self.lg.append_as_leader(data, 5, self.now)
        assert (info.first_offset, info.last_offset) == (self.model.leo, self.model.leo + n - 1)
        assert info.max_timestamp == max(ts for ts, _ in recs)
        self.model.batches.append(MBatch(self.model.leo, recs, len(data)))
        self.model.leo += n

    @rule(specs=st.lists(BATCH_SPEC, min_size=1, max_size=6))
    def append(self, specs: list) -> None:
        for spec in specs:
            self._append_one(*spec)

    # Rules are drawn uniformly: two more append rules make data-bearing logs the norm.
    @rule(spec=BATCH_SPEC)
    def append_one(self, spec: tuple) -> None:
        self._append_one(*spec)

    @rule(specs=st.lists(BATCH_SPEC, min_size=2, max_size=10))
    def append_burst(self, specs: list) -> None:
        for spec in specs:
            self._append_one(*spec)

    @rule(data=st.data(), max_bytes=st.integers(0, 1200), min_one=st.booleans(),
          use_hw=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool, use_hw: bool) -> None:
        assert self.lg is not None
        m = self.model
        offset = data.draw(st.integers(m.lso - 2, m.leo + 2), label="offset")
        hw = data.draw(st.integers(m.lso, m.leo), label="hw") if use_hw else None
        if offset < m.lso or offset > m.leo:
            with pytest.raises(errors.OffsetOutOfRangeError):
                self.lg.read(offset, max_bytes, hw, min_one)
            return
        got = self.lg.read(offset, max_bytes, hw, min_one)
        expected = m.expected_read(offset, max_bytes, hw, min_one)
        assert decode_all(got.read_bytes()) == [(b.base, b.recs) for b in expected]
        assert got.size == sum(b.size for b in expected)

    @rule(data=st.data())
    def lookup_timestamp(self, data: st.DataObject) -> None:
        assert self.lg is not None
        target = data.draw(st.integers(T0 - 50, self.now + 50), label="target")
        assert self.lg.fetch_offset_by_timestamp(target) == self.model.expected_lookup(target)

    @rule()
    def max_timestamp(self) -> None:
        assert self.lg is not None
        assert self.lg.max_timestamp_and_offset() == self.model.expected_max()

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        assert self.lg is not None
        m = self.model
        first_base = self.lg.segments[0].base_offset
        target = data.draw(st.integers(max(0, first_base - 3), m.leo + 1), label="target")
        changed = self.lg.truncate_to(target, now_ms=self.now)
        assert changed == (target < m.leo)
        if not changed:
            return
        if target < first_base:
            m.batches = []
            m.lso = target
            self.allowed_boundaries.add(target)
        else:
            m.batches = [b for b in m.batches if b.last < target]
            m.lso = min(m.lso, target)
        m.leo = target
        self._forget_emptied_boundaries()

    @rule(data=st.data())
    def increment_log_start(self, data: st.DataObject) -> None:
        assert self.lg is not None
        m = self.model
        new = data.draw(st.integers(m.lso, m.leo), label="new_lso")
        self.lg.maybe_increment_log_start_offset(new)
        m.lso = max(m.lso, new)

    @rule(data=st.data(), advance=st.integers(0, 400), mode=st.sampled_from(["time", "size", "both"]))
    def retention(self, data: st.DataObject, advance: int, mode: str) -> None:
        assert self.lg is not None
        m = self.model
        self.now += advance
        retention_ms = data.draw(st.integers(0, 600), label="retention_ms") if mode != "size" else -1
        retention_bytes = data.draw(st.integers(0, 2000), label="retention_bytes") \
            if mode != "time" else -1
        hw = data.draw(st.none() | st.integers(m.lso, m.leo), label="hw")
        self.lg.update_config(self.cfg.with_overrides(retention_ms=retention_ms,
                                                      retention_bytes=retention_bytes))
        # Expected, by Kafka's rules, from the segment layout before the call.
        # A segment without timestamps (only an empty one here) ages by its file's mtime.
        segs = [(s.base_offset, s.size, max((b.max_ts for b in mine), default=s.last_modified_ms()))
                for s, mine in self._segment_batches()]
        upper = m.leo if hw is None else hw
        lso = m.lso
        deleted = 0

        def run(pred) -> None:
            nonlocal segs, lso, deleted
            n = 0
            for i, seg in enumerate(segs):
                nxt = segs[i + 1] if i + 1 < len(segs) else None
                bound = nxt[0] if nxt is not None else m.leo
                if nxt is None and seg[1] == 0:
                    break
                if not (upper >= bound and pred(seg, nxt)):
                    break
                n += 1
            if n:
                if n == len(segs):
                    segs = segs + [(m.leo, 0, -1)]
                    self.allowed_boundaries.add(m.leo)
                segs = segs[n:]
                deleted += n
                lso = max(lso, segs[0][0])

        start = lso
        run(lambda seg, nxt: nxt is not None and nxt[0] <= start)
        if retention_bytes >= 0:
            total = sum(s[1] for s in segs)
            if total >= retention_bytes:
                diff = total - retention_bytes

                def by_size(seg, nxt) -> bool:
                    nonlocal diff
                    if diff - seg[1] >= 0:
                        diff -= seg[1]
                        return True
                    return False
                run(by_size)
        if retention_ms >= 0:
            run(lambda seg, nxt: self.now - seg[2] > retention_ms)

        got = self.lg.delete_old_segments(self.now, upper_bound_offset=hw)
        assert got == deleted
        assert [s.base_offset for s in self.lg.segments] == [s[0] for s in segs]
        first = segs[0][0]
        m.batches = [b for b in m.batches if b.base >= first]
        m.lso = lso
        self.lg.update_config(self.cfg)

    @rule()
    def roll(self) -> None:
        assert self.lg is not None
        seg = self.lg.roll(now_ms=self.now)
        self.allowed_boundaries.add(seg.base_offset)

    @rule()
    def flush(self) -> None:
        assert self.lg is not None
        self.lg.flush()
        assert self.lg.recovery_point == self.model.leo

    @rule()
    def reopen_clean(self) -> None:
        assert self.lg is not None
        rp, lso = self.lg.recovery_point, self.model.lso
        last_base = self.lg.segments[-1].base_offset
        self.lg.close()
        self.lg = Log.open(self.path, self.cfg, recovery_point=rp, log_start_offset=lso,
                           had_clean_shutdown=True, now_ms=self.now)
        self._expect_reopen(last_base)

    @rule(kind=st.sampled_from(["none", "garbage", "cut"]), data=st.data())
    def crash_and_recover(self, kind: str, data: st.DataObject) -> None:
        assert self.lg is not None
        m = self.model
        rp = self.lg.recovery_point
        active = self.lg.segments[-1]
        path = log_file(self.path, active.base_offset)
        tail = [b for b in m.batches if b.base >= active.base_offset]
        # Recovery rebuilds indexes (with the final time index entry a close would write), so
        # index-fullness at the time of earlier rolls is no longer observable.
        self.allowed_boundaries.update(s.base_offset for s in self.lg.segments)
        self.lg.close_handlers()          # a crash: nothing trimmed, flushed or closed
        self.lg = None
        if kind == "garbage":
            with open(path, "ab") as f:
                f.write(os.urandom(data.draw(st.integers(1, 300), label="garbage")))
        elif kind == "cut":
            size = sum(b.size for b in tail)
            cut = data.draw(st.integers(0, size), label="cut")
            os.truncate(path, cut)
            kept, end = [], 0
            for b in tail:
                if end + b.size <= cut:
                    kept.append(b)
                    end += b.size
                else:
                    break
            lost = {id(b) for b in tail[len(kept):]}
            m.batches = [b for b in m.batches if id(b) not in lost]
        self.lg = Log.open(self.path, self.cfg, recovery_point=rp, log_start_offset=m.lso,
                           had_clean_shutdown=False, now_ms=self.now)
        self._expect_reopen(active.base_offset)
        self._forget_emptied_boundaries()

    # -- invariants ------------------------------------------------------------------------
    @invariant()
    def offsets_agree(self) -> None:
        if self.lg is None:
            return
        assert self.lg.log_end_offset == self.model.leo
        assert self.lg.log_start_offset == self.model.lso
        assert self.lg.recovery_point <= self.lg.log_end_offset

    @invariant()
    def everything_readable(self) -> None:
        if self.lg is None:
            return
        m = self.model
        got = self.lg.read(m.lso, 1 << 30).read_bytes()
        start = [b for b in m.batches if b.last >= m.lso]
        assert decode_all(got) == [(b.base, b.recs) for b in start]

    @invariant()
    def segment_layout_obeys_roll_rules(self) -> None:
        if self.lg is None:
            return
        cfg = self.cfg
        layout = self._segment_batches()
        bases = [s.base_offset for s, _ in layout]
        assert bases == sorted(set(bases))
        for i, (seg, mine) in enumerate(layout):
            assert seg.size == sum(b.size for b in mine)
            assert seg.size <= cfg.segment_bytes
            # No missed roll: each later batch fitted the size and time limits when appended.
            prefix = 0
            for j, b in enumerate(mine):
                if j > 0:
                    assert prefix + b.size <= cfg.segment_bytes
                    assert b.max_ts - mine[0].max_ts <= cfg.segment_ms
                prefix += b.size
            # No gratuitous roll: a boundary before a batch-bearing segment had a reason.
            if i + 1 < len(layout):
                nxt_seg, nxt = layout[i + 1]
                if not nxt or nxt_seg.base_offset in self.allowed_boundaries or not mine:
                    continue
                first = nxt[0]
                reasons = (
                    seg.size + first.size > cfg.segment_bytes,
                    first.max_ts - mine[0].max_ts > cfg.segment_ms,
                    seg.offset_index.entries >= cfg.segment_index_bytes // 8,
                    seg.time_index.entries >= cfg.segment_index_bytes // 12 - 1,
                )
                assert any(reasons), (seg, nxt_seg, reasons)


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(max_examples=120, stateful_step_count=40, deadline=None,
                                   suppress_health_check=[HealthCheck.too_slow,
                                                          HealthCheck.filter_too_much])


class IdempotenceMachine(RuleBasedStateMachine):
    """One idempotent producer (plus non-idempotent noise) against the rule: a retry of one of
    the last five batches of the current epoch gets its original offsets; any other sequence
    must continue the last one (or restart at 0 with a new epoch)."""

    PID = 4242
    SEGMENT_BYTES = 600

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="idemprop-"))
        self.path = self.tmp / "idem-0"
        self.lg = Log.open(self.path, LogConfig(segment_bytes=self.SEGMENT_BYTES), now_ms=T0)
        self.model = Model()
        self.epoch = 0
        self.sent: list[MBatch] = []     # every idempotent batch sent and accepted, in order
        # The producer's state as the log holds it: (epoch, last five batches of that epoch).
        # A reload (reopen, truncation) starts from a producer snapshot, which keeps only the
        # last batch (Kafka's layout), then replays the log past it.
        self.state: tuple[int | None, list[MBatch]] = (None, [])
        # The snapshot files the log must hold, by offset, with the state each holds: stated by
        # the rules below (roll, close, truncation), never read back from the directory.
        self.snaps: dict[int, tuple[int | None, list[MBatch]]] = {}
        self.segment_bases = [0]

    def teardown(self) -> None:
        self.lg.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _entry(self) -> tuple[int | None, list[MBatch]]:
        return self.state

    @staticmethod
    def _fold(state: tuple[int | None, list[MBatch]], b: MBatch) -> tuple[int | None, list[MBatch]]:
        epoch, recent = state
        if b.pid != IdempotenceMachine.PID:
            return state
        if b.epoch != epoch:
            epoch, recent = b.epoch, []
        return epoch, (recent + [b])[-5:]

    def _snapshot_state(self) -> tuple[int | None, list[MBatch]]:
        """What a snapshot of the current state holds: the last batch only (Kafka's layout)."""
        return self.state[0], self.state[1][-1:]

    def _append(self, data: bytes) -> object:
        """Append; a batch that does not fit the active segment rolls first (segment.bytes is
        the only roll reason here), and the roll snapshots the state at the new segment's base
        unless a snapshot at or past it exists (Kafka's takeSnapshot)."""
        leo = self.model.leo
        active = sum(b.size for b in self.model.batches if b.base >= self.segment_bases[-1])
        if active > self.SEGMENT_BYTES - len(data):
            self.segment_bases.append(leo)
            if leo > max(self.snaps, default=-1):
                self.snaps[leo] = self._snapshot_state()
        return self.lg.append_as_leader(data, 0, T0)

    def _reload(self, leo: int) -> None:
        """The state after loading the newest snapshot at or below ``leo`` and replaying."""
        for off in [o for o in self.snaps if o > leo]:
            del self.snaps[off]
        start = max((o for o in self.snaps), default=None)
        state = self.snaps[start] if start is not None else (None, [])
        for b in self.model.batches:
            if start is None or b.base >= start:
                state = self._fold(state, b)
        self.state = state

    def _send(self, epoch: int, seq: int, n: int) -> None:
        recs = [(T0 + i, b"i") for i in range(n)]
        data = make_batch(recs, self.PID, epoch, seq)
        cur_epoch, recent = self._entry()
        last_seq = recent[-1].first_seq + len(recent[-1].recs) - 1 if recent else -1
        dup = next((b for b in recent if cur_epoch == epoch and b.first_seq == seq
                    and len(b.recs) == n), None)
        if dup is not None:
            info = self.lg.append_as_leader(data, 0, T0)
            assert info.duplicate and (info.first_offset, info.last_offset) == (dup.base, dup.last)
            return
        if cur_epoch is not None and epoch < cur_epoch:
            with pytest.raises(errors.InvalidProducerEpochError):
                self.lg.append_as_leader(data, 0, T0)
            return
        ok = (cur_epoch is None or (epoch != cur_epoch and seq == 0)
              or (epoch == cur_epoch and seq == last_seq + 1))
        if not ok:
            with pytest.raises(errors.OutOfOrderSequenceError):
                self.lg.append_as_leader(data, 0, T0)
            return
        info = self._append(data)
        assert not info.duplicate and info.first_offset == self.model.leo
        b = MBatch(self.model.leo, recs, len(data), self.PID, epoch, seq)
        self.model.batches.append(b)
        self.model.leo += n
        self.sent.append(b)
        self.state = self._fold(self.state, b)

    def _next_seq(self) -> int:
        epoch, recent = self._entry()
        if epoch != self.epoch or not recent:
            return 0
        return recent[-1].first_seq + len(recent[-1].recs)

    @rule(n=st.integers(1, 3))
    def send_next(self, n: int) -> None:
        self._send(self.epoch, self._next_seq(), n)

    @precondition(lambda self: bool(self.sent))
    @rule(data=st.data())
    def retry_old(self, data: st.DataObject) -> None:
        b = data.draw(st.sampled_from(self.sent[-8:]), label="retry")
        self._send(b.epoch, b.first_seq, len(b.recs))

    @rule(gap=st.integers(1, 5), n=st.integers(1, 3))
    def send_with_gap(self, gap: int, n: int) -> None:
        self._send(self.epoch, self._next_seq() + gap, n)

    @rule(seq=st.sampled_from([0, 3]))
    def bump_epoch(self, seq: int) -> None:
        self.epoch += 1
        self._send(self.epoch, seq, 1)

    @precondition(lambda self: self.epoch > 0)
    @rule()
    def stale_epoch(self) -> None:
        self._send(self.epoch - 1, 0, 1)

    @rule()
    def other_producer(self) -> None:
        data = make_batch([(T0, b"n")])
        info = self._append(data)
        self.model.batches.append(MBatch(info.first_offset, [(T0, b"n")], len(data)))
        self.model.leo += 1

    @rule(sync=st.booleans())
    def reopen(self, sync: bool) -> None:
        self.lg.close(sync=sync)
        # A clean close snapshots the state at the log end offset, unless a snapshot is there
        # already. When the newest snapshot lies inside the active segment (a close's, not a
        # roll's, which stands at the segment's base) and holds exactly the current state, it is
        # renamed to the log end offset; otherwise a new file is written.
        leo, newest = self.model.leo, max(self.snaps, default=-1)
        if leo > newest:
            if newest > self.segment_bases[-1] and self.snaps[newest] == self._snapshot_state():
                del self.snaps[newest]
            self.snaps[leo] = self._snapshot_state()
        assert self.lg.recovery_point == leo
        self.lg = Log.open(self.path, LogConfig(segment_bytes=self.SEGMENT_BYTES),
                           had_clean_shutdown=True, now_ms=T0)
        self._reload(self.model.leo)

    @precondition(lambda self: bool(self.model.batches))
    @rule(data=st.data())
    def truncate_to_batch(self, data: st.DataObject) -> None:
        b = data.draw(st.sampled_from(self.model.batches), label="cut")
        self.lg.truncate_to(b.base)
        self.segment_bases = [base for base in self.segment_bases if base <= b.base]
        self.model.batches = [x for x in self.model.batches if x.base < b.base]
        self.model.leo = b.base
        self.sent = [x for x in self.sent if x.base < b.base]
        self._reload(b.base)

    @invariant()
    def log_matches(self) -> None:
        assert self.lg.log_end_offset == self.model.leo
        got = self.lg.read(0, 1 << 30).read_bytes()
        assert [base for base, _r in decode_all(got)] == [b.base for b in self.model.batches]
        assert [s.base_offset for s in self.lg.segments] == self.segment_bases

    @invariant()
    def snapshots_match(self) -> None:
        """The snapshot files are the model's, each holding the model's state for its offset."""
        on_disk = list_snapshots(self.path)
        assert sorted(on_disk) == sorted(self.snaps)
        for off, path in on_disk.items():
            epoch, last = self.snaps[off]
            expected = [] if epoch is None else \
                [(self.PID, epoch, last[0].first_seq + len(last[0].recs) - 1, last[0].last)]
            assert [(e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset)
                    for e in read_snapshot(path)] == expected, off


TestIdempotenceMachine = IdempotenceMachine.TestCase
TestIdempotenceMachine.settings = settings(max_examples=80, stateful_step_count=40, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])
