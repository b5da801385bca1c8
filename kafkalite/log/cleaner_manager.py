"""The log cleaner's scheduling side (Kafka's LogCleanerManager + LogCleaner's CleanerThread).

:class:`LogCleanerManager` chooses what to clean: among compacted logs not being cleaned, the
one with the highest dirty ratio (dirty bytes / total bytes) above its
``min.cleanable.dirty.ratio``, or one whose oldest dirty data is older than
``max.compaction.lag.ms``. It keeps where each log's clean section ends in
``cleaner-offset-checkpoint`` in each log directory (Kafka's file and format). Never cleaned:
the active segment, anything at or above the high watermark (the last stable offset), and
with ``min.compaction.lag.ms`` the segments newer than that lag.

:class:`LogCleaner` is the background loop, an asyncio task. A round's heavy work (reading,
hashing keys, writing ``.cleaned`` segments) runs in a worker thread on descriptors duplicated
from old segments, which never change; the event loop only takes the snapshot before and does
each swap after (:meth:`Log.replace_segments`, a few renames). Appends, rolls, reads and
retention keep running meanwhile: a swap is refused if the segments it replaces are no longer
the log's (retention deleted one, a truncation happened, the log was deleted), and the round's
cleaned files are dropped.

One kafkalite addition to Kafka's choice: a log whose earlier round left tombstones with a
delete horizon is cleaned again once that horizon passes, so tombstones go after
``delete.retention.ms`` even if no new data arrives (Kafka drops them only when new dirty data
triggers a round). Horizons are remembered in memory; after a restart every log cleaned before
gets one such round ``delete.retention.ms`` after start-up, by when any earlier horizon has
passed.
"""
from __future__ import annotations

import asyncio
import bisect
import logging
import math
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from kafkalite.log.checkpoint import CheckpointError, read_offset_checkpoint, write_offset_checkpoint
from kafkalite.log.cleaner import (CleanerStats, CleaningAborted, SourceSegment, build_offset_map,
                                   clean_group, group_segments_by_size)
from kafkalite.log.offset_map import BYTES_PER_ENTRY, SkimpyOffsetMap
from kafkalite.log.segment import LogSegment

if TYPE_CHECKING:
    from kafkalite.log.log import Log
    from kafkalite.log.log_manager import LogManager

log = logging.getLogger("kafkalite.log.LogCleaner")

CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
# Set only by the crash tests: the process SIGKILLs itself at this swap phase
# ("cleaned", "swap", "deleted", "final").
CRASH_AFTER_ENV = "KAFKALITE_TEST_CLEANER_CRASH_AFTER"

TopicPartitionKey = tuple[str, int]
UpperBound = Callable[[str, int], Optional[int]]


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class CleanerConfig:
    """Kafka's CleanerConfig (``log.cleaner.*``)."""
    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    max_message_size: int = 1024 * 1024 + 12
    backoff_ms: int = 15_000
    enable_cleaner: bool = True

    @property
    def map_memory(self) -> int:
        """Offset map bytes for one cleaner (Kafka divides the buffer among the threads)."""
        return max(2 * BYTES_PER_ENTRY, self.dedupe_buffer_size // max(1, self.num_threads))


# -- choosing what to clean ---------------------------------------------------------------------

def _log_segments(segs: tuple[LogSegment, ...], bases: list[int], frm: int, to: int
                  ) -> list[LogSegment]:
    """Kafka's logSegments(from, to): the segments overlapping [from, to)."""
    if frm >= to:
        return []
    i = max(0, bisect.bisect_right(bases, frm) - 1)
    out = []
    for s in segs[i:]:
        if s.base_offset >= to:
            break
        out.append(s)
    return out


def _non_active_segments_from(segs: tuple[LogSegment, ...], bases: list[int], frm: int
                              ) -> list[LogSegment]:
    active_base = segs[-1].base_offset
    if frm > active_base:
        return []
    return _log_segments(segs, bases, frm, active_base)


def cleanable_offsets(log_: "Log", last_clean_offset: int | None, now_ms: int,
                      upper_bound: int) -> tuple[int, int, bool]:
    """Kafka's LogCleanerManager.cleanableOffsets: (first dirty offset, first uncleanable
    offset, whether the checkpoint must be reset). ``upper_bound`` is the last stable offset
    (the high watermark): nothing at or past it is cleaned."""
    start = log_.log_start_offset
    checkpoint = start if last_clean_offset is None else last_clean_offset
    if checkpoint < start:
        first_dirty, force = start, True
    elif checkpoint > log_.log_end_offset:
        log.warning("The last checkpoint dirty offset for partition %s is %d, which is larger "
                    "than the log end offset %d. Resetting to the log start offset %d.",
                    log_.name, checkpoint, log_.log_end_offset, start)
        first_dirty, force = start, True
    else:
        first_dirty, force = checkpoint, False
    segs = log_.segments
    bases = [s.base_offset for s in segs]
    # Never past the first unstable offset: an open transaction's outcome is not known yet
    # (Kafka bounds the cleaner by the last stable offset under the high watermark).
    uncleanable = min(log_.last_stable_offset(upper_bound), segs[-1].base_offset)
    min_lag = max(log_.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for s in _non_active_segments_from(segs, bases, first_dirty):
            if s.largest_timestamp() > now_ms - min_lag:
                uncleanable = min(uncleanable, s.base_offset)
                break
    return first_dirty, max(first_dirty, uncleanable), force


def max_compaction_delay(log_: "Log", first_dirty: int, now_ms: int) -> int:
    """Kafka's maxCompactionDelay: how long past ``max.compaction.lag.ms`` the oldest dirty
    batch is (0: not overdue)."""
    max_lag = max(log_.config.max_compaction_lag_ms, 0)
    clean_until = now_ms - max_lag
    if clean_until <= 0:
        return 0    # an unlimited lag: nothing can be overdue (and no header is read)
    segs = log_.segments
    bases = [s.base_offset for s in segs]
    earliest = None
    for s in _non_active_segments_from(segs, bases, first_dirty):
        ts = s.first_batch_timestamp()
        if ts is not None and ts > 0 and (earliest is None or ts < earliest):
            earliest = ts
    if earliest is not None and earliest < clean_until:
        return clean_until - earliest
    return 0


@dataclass
class LogToClean:
    """Kafka's LogToClean: a candidate log and its clean/dirty byte counts."""
    key: TopicPartitionKey
    log: "Log"
    log_dir: Path
    first_dirty_offset: int
    first_uncleanable_offset: int   # rounded down to a segment base, as Kafka's LogToClean
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False
    delete_horizon_due: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0

    @classmethod
    def of(cls, key: TopicPartitionKey, log_: "Log", log_dir: Path, first_dirty: int,
           uncleanable: int, need_compaction_now: bool = False,
           delete_horizon_due: bool = False) -> "LogToClean":
        segs = log_.segments
        bases = [s.base_offset for s in segs]
        clean_bytes = sum(s.size for s in segs if s.base_offset < first_dirty)
        # calculateCleanableBytes: round the uncleanable offset down to its segment's base
        non_active = _non_active_segments_from(segs, bases, uncleanable)
        first_uncleanable = non_active[0].base_offset if non_active else segs[-1].base_offset
        cleanable = sum(s.size for s in _log_segments(segs, bases, min(first_dirty,
                                                                       first_uncleanable),
                                                      first_uncleanable))
        return cls(key, log_, log_dir, first_dirty, first_uncleanable, clean_bytes, cleanable,
                   need_compaction_now, delete_horizon_due)


class LogCleanerManager:
    """Which log to clean next; the cleaner checkpoints; logs in progress or uncleanable.

    Driven from the event loop only (the rounds' threads never call it).
    """

    def __init__(self, log_manager: "LogManager", upper_bound: UpperBound | None = None, *,
                 now_ms: int | None = None) -> None:
        self.log_manager = log_manager
        self._upper_bound = upper_bound
        self.in_progress: set[TopicPartitionKey] = set()
        self.uncleanable: set[TopicPartitionKey] = set()
        # checkpoint entries per log dir, and the Log each entry belongs to: a deleted and
        # re-created partition is a different Log object and starts from its log start offset
        self._checkpoints: dict[Path, dict[TopicPartitionKey, int]] = {}
        self._owner: dict[TopicPartitionKey, "Log"] = {}
        self._delete_horizons: dict[TopicPartitionKey, tuple["Log", int]] = {}
        self.dirtiest_log_cleanable_ratio = 0.0
        self.time_of_last_run_ms = 0
        self._load_checkpoints(_wall_ms() if now_ms is None else now_ms)

    def _load_checkpoints(self, now_ms: int) -> None:
        current = {key: lg for key, lg in self._logs()}
        for d in self.log_manager.log_dirs:
            try:
                entries = read_offset_checkpoint(d / CLEANER_OFFSET_CHECKPOINT_FILE)
            except (CheckpointError, OSError) as e:
                log.warning("Error reading %s in %s, cleaning every compacted log from its "
                            "start: %s", CLEANER_OFFSET_CHECKPOINT_FILE, d, e)
                entries = {}
            self._checkpoints[d] = dict(entries)
            for key in entries:
                if key in current:
                    lg = current[key]
                    self._owner[key] = lg
                    # Delete horizons are remembered in memory only. Any set before this start
                    # has passed by now + delete.retention.ms: one round then drops those
                    # tombstones (and learns the horizons again).
                    self._delete_horizons[key] = (lg, now_ms + lg.config.delete_retention_ms)

    def _logs(self) -> list[tuple[TopicPartitionKey, "Log"]]:
        return [((lg.topic, lg.partition), lg) for lg in self.log_manager.all_logs()]

    def _dir_of(self, log_: "Log") -> Path:
        return log_.dir.parent

    def checkpoint(self, key: TopicPartitionKey, log_: "Log") -> int | None:
        """The checkpointed first dirty offset of ``log_`` (None: never cleaned)."""
        if self._owner.get(key) is not log_:
            return None
        return self._checkpoints.get(self._dir_of(log_), {}).get(key)

    def all_cleaner_checkpoints(self) -> dict[TopicPartitionKey, int]:
        out: dict[TopicPartitionKey, int] = {}
        for entries in self._checkpoints.values():
            out.update(entries)
        return out

    def _set_checkpoint(self, key: TopicPartitionKey, log_: "Log", offset: int) -> Path:
        d = self._dir_of(log_)
        self._checkpoints.setdefault(d, {})[key] = offset
        self._owner[key] = log_
        return d

    def checkpoint_entries(self, d: Path) -> dict[TopicPartitionKey, int]:
        """What the checkpoint file of ``d`` should hold: entries of logs that still exist."""
        live = {key: lg for key, lg in self._logs()}
        return {key: off for key, off in self._checkpoints.get(d, {}).items()
                if key in live and self._owner.get(key) is live[key]}

    def upper_bound(self, key: TopicPartitionKey, log_: "Log") -> int | None:
        if self._upper_bound is None:
            return log_.log_end_offset
        return self._upper_bound(*key)

    def grab_filthiest_compacted_log(self, now_ms: int) -> LogToClean | None:
        """Kafka's grabFilthiestCompactedLog; the chosen log is marked in progress."""
        self.time_of_last_run_ms = now_ms
        dirty: list[LogToClean] = []
        for key, lg in self._logs():
            if (lg.closed or not lg.is_compacted or key in self.in_progress
                    or key in self.uncleanable):
                continue
            upper = self.upper_bound(key, lg)
            if upper is None:
                continue    # not hosted as a partition (yet): its high watermark is unknown
            first_dirty, uncleanable, force = cleanable_offsets(lg, self.checkpoint(key, lg),
                                                                now_ms, upper)
            if force:
                self._set_checkpoint(key, lg, first_dirty)
            horizon = self._delete_horizons.get(key)
            due = horizon is not None and horizon[0] is lg and horizon[1] <= now_ms
            ltc = LogToClean.of(key, lg, self._dir_of(lg), first_dirty, uncleanable,
                                max_compaction_delay(lg, first_dirty, now_ms) > 0, due)
            if ltc.total_bytes > 0:
                dirty.append(ltc)
        self.dirtiest_log_cleanable_ratio = max((c.cleanable_ratio for c in dirty), default=0.0)
        cleanable = [c for c in dirty
                     if (c.need_compaction_now and c.cleanable_bytes > 0)
                     or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
                     or c.delete_horizon_due]
        if not cleanable:
            return None
        filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
        self.in_progress.add(filthiest.key)
        return filthiest

    def done_cleaning(self, ltc: LogToClean, end_offset: int | None,
                      pending_delete_horizon_ms: int | None = None) -> Path | None:
        """The round is over: record ``end_offset`` (None: aborted, nothing recorded). Returns
        the log dir whose checkpoint file must be rewritten, if any."""
        self.in_progress.discard(ltc.key)
        if end_offset is None:
            return None
        if pending_delete_horizon_ms is None:
            self._delete_horizons.pop(ltc.key, None)
        else:
            self._delete_horizons[ltc.key] = (ltc.log, pending_delete_horizon_ms)
        return self._set_checkpoint(ltc.key, ltc.log, end_offset)

    def mark_uncleanable(self, key: TopicPartitionKey) -> None:
        self.in_progress.discard(key)
        self.uncleanable.add(key)

    def maintain_uncleanable_partitions(self) -> None:
        """Forget deleted partitions (Kafka's maintainUncleanablePartitions, and the state
        kept per log here)."""
        live = dict(self._logs())
        self.uncleanable &= set(live)
        for key in [k for k, lg in self._owner.items() if live.get(k) is not lg]:
            del self._owner[key]
            for entries in self._checkpoints.values():
                entries.pop(key, None)
        for key in [k for k, (lg, _h) in self._delete_horizons.items() if live.get(k) is not lg]:
            del self._delete_horizons[key]


# -- the background loop ------------------------------------------------------------------------

def _crash_hook_from_env() -> Callable[[str], None] | None:
    target = os.environ.get(CRASH_AFTER_ENV)
    if not target:
        return None

    def crash(phase: str) -> None:
        if phase == target:
            print(f"kafkalite: cleaner crash point {phase!r} reached, SIGKILL", file=sys.stderr,
                  flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    return crash


@dataclass
class CleanResult:
    key: TopicPartitionKey
    first_dirty_offset: int
    end_offset: int
    stats: CleanerStats
    pending_delete_horizon_ms: int | None


class LogCleaner:
    """Cleans compacted logs in the background: one round at a time, the dirtiest log first,
    ``log.cleaner.backoff.ms`` between checks when there is nothing to clean."""

    def __init__(self, log_manager: "LogManager", config: CleanerConfig, *,
                 upper_bound: UpperBound | None = None,
                 clock_ms: Callable[[], int] = _wall_ms,
                 on_phase: Callable[[str], None] | None = None) -> None:
        self.log_manager = log_manager
        self.config = config
        self.manager = LogCleanerManager(log_manager, upper_bound, now_ms=clock_ms())
        self._clock_ms = clock_ms
        self._on_phase = on_phase if on_phase is not None else _crash_hook_from_env()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._stopping = False
        self.last_result: CleanResult | None = None
        self.rounds = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def startup(self) -> None:
        if self._task is not None:
            return
        self._stopping = False
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kafka-log-cleaner")

    async def shutdown(self) -> None:
        """Stop: a round in progress stops at its next chunk and leaves no cleaned files."""
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("log cleaner failed while stopping")

    def wakeup(self) -> None:
        """Check for work now instead of at the end of the backoff."""
        if self._wake is not None:
            self._wake.set()

    def reconfigure(self, config: CleanerConfig) -> None:
        """Dynamic log.cleaner.* / message.max.bytes change (Kafka restarts its cleaner threads):
        the next round and the next backoff use the new config."""
        self.config = config
        self.wakeup()

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._stopping:
            backoff = self.config.backoff_ms / 1000     # read each time: it is dynamic
            try:
                cleaned = await self.clean_filthiest_log()
            except Exception:
                log.exception("log cleaner round failed")
                cleaned = False
            self.manager.maintain_uncleanable_partitions()
            if cleaned or self._stopping:
                await asyncio.sleep(0)      # let the loop breathe between rounds
                continue
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), backoff)
            except asyncio.TimeoutError:
                pass

    # -- one round ---------------------------------------------------------------------------
    async def clean_filthiest_log(self) -> bool:
        """Clean the dirtiest log, if any qualifies. Returns whether a round ran to the end."""
        now = self._clock_ms()
        ltc = self.manager.grab_filthiest_compacted_log(now)
        if ltc is None:
            return False
        try:
            result = await self._clean_log(ltc, now)
        except CleaningAborted as e:
            log.info("Cleaning of %s aborted: %s", ltc.log.name, e)
            self.manager.done_cleaning(ltc, None)
            return False
        except Exception:
            log.exception("Unexpected exception cleaning log %s; marking it uncleanable",
                          ltc.log.name)
            self.manager.mark_uncleanable(ltc.key)
            return False
        d = self.manager.done_cleaning(ltc, result.end_offset, result.pending_delete_horizon_ms)
        if d is not None:
            entries = self.manager.checkpoint_entries(d)
            await asyncio.to_thread(write_offset_checkpoint, d / CLEANER_OFFSET_CHECKPOINT_FILE,
                                    entries)
        self.last_result = result
        self.rounds += 1
        _log_stats(ltc.log.name, result)
        return True

    def _snapshot(self, log_: "Log", below: int) -> list[SourceSegment]:
        """The segments wholly below ``below`` (all non-active), each with a descriptor of its
        own: the thread reads those, whatever happens to the live segments meanwhile."""
        out: list[SourceSegment] = []
        try:
            for seg in log_.segments[:-1]:
                if seg.base_offset >= below:
                    break
                if seg.fd < 0:
                    raise CleaningAborted(f"segment {seg.base_offset} of {log_.name} is closed")
                try:
                    index_bytes = os.stat(seg.offset_index.path).st_size
                    time_index_bytes = os.stat(seg.time_index.path).st_size
                except FileNotFoundError:
                    index_bytes = time_index_bytes = 0
                out.append(SourceSegment(seg, seg.base_offset, os.dup(seg.fd), seg.size,
                                         index_bytes, time_index_bytes, seg.last_modified_ms()))
        except BaseException:
            for s in out:
                os.close(s.fd)
            raise
        return out

    def _offset_map(self, ltc: LogToClean) -> SkimpyOffsetMap:
        # At most the configured memory; less when the dirty section cannot hold that many
        # keys (one per offset at most), so small logs do not allocate the whole buffer.
        load = self.config.dedupe_buffer_load_factor
        # + 1024: the slot count is rounded down to a prime, and prime gaps stay far below that
        needed = math.ceil((ltc.first_uncleanable_offset - ltc.first_dirty_offset + 1) / load) + 1024
        return SkimpyOffsetMap(min(self.config.map_memory, needed * BYTES_PER_ENTRY))

    async def _clean_log(self, ltc: LogToClean, now: int) -> CleanResult:
        log_ = ltc.log
        cfg = log_.config
        truncations = log_.truncations
        # Kafka's lastRecordsOfActiveProducers: each producer's last batch stays (maybe empty)
        # so its sequence numbers survive a restart.
        producer_last = {pid: e.last_data_offset
                         for pid, e in log_.producer_state.producers.items()
                         if e.last_data_offset >= 0}
        # ... and a producer whose last record is a marker keeps that marker (its epoch fences)
        marker_epochs = {pid: e.producer_epoch
                         for pid, e in log_.producer_state.producers.items()
                         if e.last_data_offset < 0}
        first_dirty, first_uncleanable = ltc.first_dirty_offset, ltc.first_uncleanable_offset
        sources = self._snapshot(log_, first_uncleanable)

        def check_done() -> None:
            if self._stopping:
                raise CleaningAborted("the cleaner is shutting down")
            if log_.closed:
                raise CleaningAborted("the log was closed")

        try:
            # The aborted transactions from the transaction indexes, read here on the loop:
            # of the dirty section for the map, and per source segment for the cleaned ones.
            dirty_aborted = log_.collect_aborted_transactions(first_dirty, first_uncleanable)
            aborted_by_base = {
                s.base_offset: log_.collect_aborted_transactions(
                    s.base_offset, sources[i + 1].base_offset if i + 1 < len(sources)
                    else s.segment.next_offset())
                for i, s in enumerate(sources)}
            dirty = [s for i, s in enumerate(sources)
                     if (sources[i + 1].base_offset if i + 1 < len(sources)
                         else first_uncleanable) > first_dirty]
            start_position = 0
            if dirty and dirty[0].base_offset < first_dirty:
                start_position = dirty[0].segment.offset_index.lookup(first_dirty)[1]
            offset_map = self._offset_map(ltc)
            stats = CleanerStats()
            log.info("Beginning cleaning of log %s: offset map for %d segment(s) in [%d, %d)",
                     log_.name, len(dirty), first_dirty, first_uncleanable)
            await asyncio.to_thread(
                build_offset_map, dirty, first_dirty, first_uncleanable, offset_map,
                self.config.dedupe_buffer_load_factor, stats, start_position=start_position,
                io_buffer_size=self.config.io_buffer_size, check_done=check_done,
                aborted=dirty_aborted)
            end_offset = offset_map.latest_offset + 1
            stats.index_done()
            groups = group_segments_by_size([s for s in sources if s.base_offset < end_offset],
                                            cfg.segment_bytes, cfg.segment_index_bytes,
                                            first_uncleanable)
            pending: int | None = None
            for group in groups:
                cleaned = await asyncio.to_thread(
                    clean_group, log_.dir, group, offset_map, cfg, now, producer_last,
                    first_uncleanable, stats, io_buffer_size=self.config.io_buffer_size,
                    check_done=check_done, aborted_txns=aborted_by_base,
                    producer_marker_epochs=marker_epochs)
                if cleaned.pending_delete_horizon_ms is not None:
                    pending = cleaned.pending_delete_horizon_ms if pending is None \
                        else min(pending, cleaned.pending_delete_horizon_ms)
                if len(group) == 1 and not cleaned.changed:
                    # the same bytes again: nothing to swap
                    cleaned.segment.delete()
                    cleaned.segment.file.close()
                    continue
                old = [s.segment for s in group]
                if not log_.replace_segments(cleaned.segment, old,
                                             expected_truncations=truncations,
                                             on_phase=self._on_phase):
                    cleaned.segment.delete()
                    cleaned.segment.file.close()
                    raise CleaningAborted(f"the segments of {log_.name} changed during cleaning")
            stats.buffer_utilization = offset_map.utilization
            stats.all_done()
            return CleanResult(ltc.key, first_dirty, end_offset, stats, pending)
        finally:
            for s in sources:
                os.close(s.fd)

    # -- for tests ---------------------------------------------------------------------------
    async def await_cleaned(self, topic: str, partition: int, offset: int,
                            timeout_s: float) -> bool:
        """Wait until the cleaner checkpoint of the partition is at least ``offset``."""
        deadline = time.monotonic() + timeout_s
        while True:
            cp = self.manager.all_cleaner_checkpoints().get((topic, partition))
            if cp is not None and cp >= offset:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.02)


def _log_stats(name: str, r: CleanResult) -> None:
    s = r.stats
    mb = 1024 * 1024
    log.info("Log cleaner cleaned log %s (dirty section = [%d, %d]): %.1f MB of log processed "
             "in %.2f s (%.1f MB/s); offset map %.1f%% full; %.1f MB -> %.1f MB "
             "(%d -> %d messages)", name, r.first_dirty_offset, r.end_offset,
             s.bytes_read / mb, s.elapsed_secs, s.bytes_read / mb / s.elapsed_secs,
             100 * s.buffer_utilization, s.bytes_read / mb, s.bytes_written / mb,
             s.messages_read, s.messages_written)
    if s.invalid_messages:
        log.warning("Found %d invalid messages during compaction of %s.", s.invalid_messages, name)
