"""LogManager: every partition log in the broker's log directories (Kafka's LogManager).

Each log directory holds one ``<topic>-<partition>`` directory per partition plus:

* ``recovery-point-offset-checkpoint`` / ``log-start-offset-checkpoint`` (Kafka's format);
* ``.kafka_cleanshutdown`` — written last on a clean shutdown, removed once the logs are loaded:
  without it, logs are recovered from their recovery points;
* ``.lock`` — held (flock) while the broker runs, so two brokers never share a directory.

Durability (issue 13: no fsync on the event loop). Once :meth:`LogManager.start_flusher` ran on
the loop, every fsync of the logs runs in the manager's thread pool: a roll asks for a flush of
the rolled segments (Kafka's roll → flushUptoOffsetExclusive), ``flush.messages`` and the
``log.flush.interval.ms`` task ask for one of the whole log; the flusher task runs at most one
flush per log at a time and advances each recovery point on the loop once its fsyncs are done,
so a checkpointed recovery point never passes data that is not durable. Checkpoint files are
written in the pool too, and only when their content changed. At shutdown the logs are closed
without fsyncs and each log directory's file system is synced once (syncfs) before the
checkpoints and the marker are written: thousands of partitions shut down in a second or two.

Loading uses ``num.recovery.threads.per.data.dir`` threads per directory.

Deleted partitions are renamed to ``<topic>-<partition>.<uuid>-delete`` and removed after the
broker's ``log.segment.delete.delay.ms``; segments deleted by retention or truncation are renamed
``.deleted`` and removed after the topic's ``file.delete.delay.ms`` (Kafka's asynchronous
deletion: a fetch that located the files just before still reads them). Both delays run only
with the flusher; pending deletions are dropped at shutdown, and leftovers of both kinds are
removed at start-up. ``flush.ms``: a log with unflushed data is flushed once its last flush is
that old (one timer per such log, armed by its appends).
"""
from __future__ import annotations

import asyncio
import fcntl
import itertools
import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from kafkalite.config.log_config import LogConfig
from kafkalite.log.checkpoint import (LOG_START_OFFSET_CHECKPOINT_FILE, PARTITION_METADATA_FILE,
                                      RECOVERY_POINT_CHECKPOINT_FILE, CheckpointError,
                                      atomic_write, format_offset_checkpoint, fsync_dir,
                                      read_offset_checkpoint, syncfs)
from kafkalite.log.descriptor_limit import DescriptorBudget
from kafkalite.log.errors import KafkaStorageError, LogError
from kafkalite.log.leader_epoch_cache import FILE_NAME as LEADER_EPOCH_FILE_NAME
from kafkalite.log.log import FLUSH_MS_NEVER, FlushJob, Log, parse_topic_partition
from kafkalite.log.segment import LogSegment, log_file, offset_index_file, time_index_file, txn_index_file

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"

# Kafka's RemoteIndexCache.DIR_NAME and KRaft's metadata topic: skipped in a log dir
REMOTE_INDEX_CACHE_DIR = "remote-log-index-cache"
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
# Kafka's LocalLog Delete/Future/StrayDirPattern: <topic>-<partition>.<unique id><suffix>
_SUFFIXED_DIR = {suffix: re.compile(rf"(\S+)-(\S+)\.(\S+){suffix}")
                 for suffix in (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)}

TopicPartitionKey = tuple[str, int]
# Threads that run the fsyncs: fsync releases the GIL and a disk serves several at once.
FLUSH_THREADS = 4


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _key_of(tp: Any) -> TopicPartitionKey:
    """Accept any object with ``topic``/``partition`` attributes, or a (topic, partition) pair."""
    if hasattr(tp, "topic") and hasattr(tp, "partition"):
        return str(tp.topic), int(tp.partition)
    topic, partition = tp
    return str(topic), int(partition)


def log_dir_topic_partition(log_dir: Path, name: str) -> TopicPartitionKey:
    """Kafka's LocalLog.parseTopicPartitionName for the directory ``name`` in ``log_dir``:
    ``<topic>-<partition>``, or that with ``.<unique id>-delete`` (``-future``, ``-stray``).
    Any other name raises LogError with Kafka's message (one line here)."""
    base: str | None = name
    for suffix, pattern in _SUFFIXED_DIR.items():
        if name.endswith(suffix):
            base = name[:name.rindex(".")] if pattern.fullmatch(name) else None
            break
    try:
        if base is not None:
            return parse_topic_partition(base)
    except ValueError:
        pass
    raise LogError(f"Found directory {(log_dir / name).absolute()}, '{name}' is not in the form of "
                   f"topic-partition or topic-partition.uniqueId-delete (if marked for deletion). "
                   f"Kafka's log directories (and children) should only contain Kafka topic data.")


def log_delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's UnifiedLog.logDeleteDirName: the topic truncated so the name fits 255 bytes."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[:max(0, 255 - len(suffix))] + suffix


def _remove_new_log_dir(path: Path) -> None:
    """Remove the directory of a log whose creation failed. rmtree needs descriptors, which may
    be what ran out; the files a new log can have are known by name, and unlink needs none."""
    shutil.rmtree(path, ignore_errors=True)
    if not path.exists():
        return
    names = [f(path, 0).name for f in (log_file, offset_index_file, time_index_file, txn_index_file)]
    names += [PARTITION_METADATA_FILE, LEADER_EPOCH_FILE_NAME]
    for name in names + [n + ".tmp" for n in names]:
        try:
            os.unlink(path / name)
        except OSError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        pass    # left as it is: an empty log, loaded as such next time


def create_and_validate_log_dirs(dirs: Iterable[Path]) -> None:
    """Kafka's createAndValidateLogDirs: each directory created if absent, then required to be
    a readable (here also writable) directory, named once. kafkalite has no offline log dirs:
    the first that fails stops the broker, in one line."""
    seen: dict[Path, Path] = {}
    for d in dirs:
        if not d.exists() and not d.is_symlink():
            log.info("Log directory %s not found, creating it.", d.absolute())
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise LogError(f"Failed to create data directory {d.absolute()}: {e.strerror}") from e
        if not d.is_dir() or not os.access(d, os.R_OK | os.X_OK):
            raise LogError(f"{d.absolute()} is not a readable log directory.")
        if not os.access(d, os.W_OK):
            raise LogError(f"{d.absolute()} is not a writable log directory.")
        real = d.resolve()
        if real in seen:
            raise LogError(f"Duplicate log directory found: {seen[real]}, {d}")
        seen[real] = d


class LogManager:
    def __init__(self, log_dirs: Iterable[Path | str], default_config: LogConfig, *,
                 lock_dirs: bool = True, clock_ms: Callable[[], int] = _wall_ms,
                 num_recovery_threads_per_data_dir: int = 1) -> None:
        self.log_dirs: list[Path] = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("at least one log directory is required")
        self.default_config = default_config
        self._lock_dirs = lock_dirs
        self._clock_ms = clock_ms
        self._recovery_threads = max(1, num_recovery_threads_per_data_dir)
        self._logs: dict[TopicPartitionKey, Log] = {}
        self._dir_of: dict[TopicPartitionKey, Path] = {}
        self._locks: dict[Path, int] = {}
        self._started = False
        # lock_log_dirs or startup began and startup did not finish: shutdown writes nothing
        self._startup_incomplete = False
        self._descriptor_budget = DescriptorBudget()   # new logs never take the last descriptors
        # The background flusher (start_flusher): requests by log, the highest offset asked
        # (None: the log end), drained by one task that runs the fsyncs in the pool.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._flush_requests: dict[Log, int | None] = {}
        self._flush_wakeup: asyncio.Event | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._checkpoint_tasks: set[asyncio.Future[None]] = set()
        self._checkpoint_pending: set[Path] = set()
        # Last content written per checkpoint file (unchanged content is not rewritten), and
        # a lock per file so the pool never interleaves two writes of one file.
        self._written: dict[Path, bytes] = {}
        self._file_locks: dict[Path, threading.Lock] = {}
        # Delayed deletions (file.delete.delay.ms) not yet due, and those running in the pool.
        self._pending_deletions: dict[object, asyncio.TimerHandle] = {}
        self._deletion_tasks: set[asyncio.Future[None]] = set()
        # flush.ms timers of logs with unflushed data, with the flush.ms they were armed for;
        # None: its flush was asked for, the timer is armed again once that flush round is over.
        self._flush_timers: dict[Log, tuple[asyncio.TimerHandle, int] | None] = {}

    # -- start-up ----------------------------------------------------------------------------
    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Lock the directories and load every log (recovering those not shut down cleanly).

        Synchronous: run it in a thread from the event loop.
        """
        configs = topic_configs or {}
        now = self._clock_ms()
        self._startup_incomplete = True
        self.lock_log_dirs()
        log.info("Loading logs from log dirs %s", [str(d.absolute()) for d in self.log_dirs])
        started = time.monotonic()
        unclean: list[str] = []
        for d in self.log_dirs:
            if not self._load_dir(d, configs, now):
                unclean.append(str(d.absolute()))
        log.info("Loaded %d logs in %dms%s", len(self._logs), (time.monotonic() - started) * 1000,
                 f" (unclean log dirs = {unclean})" if unclean else "")
        self._started = True
        self._startup_incomplete = False

    def lock_log_dirs(self) -> None:
        """Create, validate and lock every log directory (Kafka's createAndValidateLogDirs and
        lockLogDirs), before anything is read or written there: a second broker on the same
        directories stops here, having touched nothing. Raises LogError with Kafka's wording."""
        self._startup_incomplete = True
        create_and_validate_log_dirs(self.log_dirs)
        for d in self.log_dirs:
            self._lock(d)

    def _lock(self, d: Path) -> None:
        if not self._lock_dirs or d in self._locks:
            return
        try:
            fd = os.open(d / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise LogError(f"Disk error while locking directory {d}: {e.strerror}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            raise LogError(f"Failed to acquire lock on file {LOCK_FILE} in {d}. A Kafka instance "
                           f"in another process or thread is using this directory.") from e
        self._locks[d] = fd

    def _unlock_all(self) -> None:
        for fd in self._locks.values():
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._locks.clear()

    def _load_dir(self, d: Path, configs: Mapping[str, LogConfig], now: int) -> bool:
        """Load every log of ``d`` with ``num.recovery.threads.per.data.dir`` threads.
        Returns False when logs were recovered (no clean shutdown marker), as Kafka's
        "unclean log dirs"."""
        marker = d / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        try:
            recovery_points = read_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT_FILE)
        except (CheckpointError, OSError) as e:
            log.warning("Error reading %s in %s, recovering every log from 0: %s",
                        RECOVERY_POINT_CHECKPOINT_FILE, d, e)
            recovery_points = {}
            clean = False
        try:
            log_start_offsets = read_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT_FILE)
        except (CheckpointError, OSError) as e:
            log.warning("Error reading %s in %s: %s", LOG_START_OFFSET_CHECKPOINT_FILE, d, e)
            log_start_offsets = {}
        to_load: list[tuple[TopicPartitionKey, Path]] = []
        with os.scandir(d) as it:
            entries = sorted((e.name for e in it if e.is_dir() and e.name != REMOTE_INDEX_CACHE_DIR))
        # Every name is checked before anything here is opened or removed: a directory that is
        # not a partition's stops the start-up untouched, as in Kafka (its loadLogs).
        parsed = [(name, log_dir_topic_partition(d, name)) for name in entries]
        for name, key in parsed:
            child = d / name
            if key[0] == CLUSTER_METADATA_TOPIC:
                continue    # KRaft's metadata log: never a partition of this broker
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(child, ignore_errors=True)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX) or name.endswith(STRAY_DIR_SUFFIX):
                log.warning("Ignoring directory %s in %s", name, d)
                continue
            if key in self._logs:
                raise LogError(f"Duplicate log directories for {name} are found: "
                               f"{self._dir_of[key]} and {d}")
            to_load.append((key, child))
        where = d.absolute()
        if not to_load:
            log.info("No logs found to be loaded in %s", where)
        elif clean:
            log.info("Skipping recovery of %d logs from %s since clean shutdown file was found", len(to_load), where)
        else:
            log.info("Recovering %d logs from %s since no clean shutdown file was found", len(to_load), where)
        loaded_count = itertools.count(1)
        # each log's line at INFO after a crash (what was recovered); a clean restart of
        # thousands of logs lists them at DEBUG
        completed_level = logging.DEBUG if clean else logging.INFO

        def load(item: tuple[TopicPartitionKey, Path]) -> Log:
            key, child = item
            started = time.monotonic()
            lg = Log.open(child, configs.get(key[0], self.default_config),
                          recovery_point=recovery_points.get(key, 0),
                          log_start_offset=log_start_offsets.get(key, 0),
                          had_clean_shutdown=clean, now_ms=now, topic_partition=key)
            completed = next(loaded_count)
            if log.isEnabledFor(completed_level):   # its arguments cost more than the check
                log.log(completed_level, "Completed load of Log(dir=%s, topic=%s, partition=%d, recoveryPoint=%d) "
                        "with %d segments, local-log-start-offset %d and log-end-offset %d in %dms (%d/%d completed "
                        "in %s)", child, key[0], key[1], lg.recovery_point, len(lg.segments), lg.log_start_offset,
                        lg.log_end_offset, (time.monotonic() - started) * 1000, completed, len(to_load), where)
            return lg

        if self._recovery_threads > 1 and len(to_load) > 1:
            with ThreadPoolExecutor(self._recovery_threads,
                                    thread_name_prefix="log-recovery") as pool:
                loaded = list(pool.map(load, to_load))
        else:
            loaded = [load(item) for item in to_load]
        for (key, _child), lg in zip(to_load, loaded):
            self._logs[key] = lg
            self._dir_of[key] = d
            self._attach(lg)
        # What the checkpoints hold now need not be written again until it changes.
        self._remember_checkpoint(d / RECOVERY_POINT_CHECKPOINT_FILE)
        self._remember_checkpoint(d / LOG_START_OFFSET_CHECKPOINT_FILE)
        if marker.exists():
            # From now on a crash must recover: the marker only vouches for the last shutdown.
            marker.unlink()
            fsync_dir(d)
        return clean or not to_load

    # -- access ------------------------------------------------------------------------------
    def get_log(self, tp: Any) -> Log | None:
        return self._logs.get(_key_of(tp))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    def log_dir_of(self, tp: Any) -> Path | None:
        """The log dir holding ``tp``'s log: one shared Path per log dir, whose hash is computed
        once (a ``log.dir.parent`` per partition builds and hashes a new Path each time)."""
        return self._dir_of.get(_key_of(tp))

    def logs_by_dir(self) -> dict[Path, list[Log]]:
        out: dict[Path, list[Log]] = {d: [] for d in self.log_dirs}
        for key, lg in self._logs.items():
            out[self._dir_of[key]].append(lg)
        return out

    def _next_log_dir(self) -> Path:
        """The directory with the fewest partitions (Kafka's nextLogDirs)."""
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None, *,
                          topic_id: uuid.UUID | None = None) -> Log:
        """The partition's log, created empty if absent. With ``topic_id`` the id is recorded
        in ``partition.metadata`` (a different recorded id raises InconsistentTopicIdError)."""
        key = (topic, partition)
        lg = self._logs.get(key)
        if lg is None:
            d = self._next_log_dir()
            d.mkdir(parents=True, exist_ok=True)
            self._lock(d)
            lg = self._create_log(d / f"{topic}-{partition}", config or self.default_config, topic_id)
            self._logs[key] = lg
            self._dir_of[key] = d
            self._attach(lg)
        elif topic_id is not None:
            lg.assign_topic_id(topic_id)
        return lg

    def _create_log(self, path: Path, config: LogConfig, topic_id: uuid.UUID | None) -> Log:
        """Log.open (and the topic id recorded) for a partition new here. Out of descriptors,
        memory or disk, it raises KafkaStorageError and leaves no directory behind: the next
        LeaderAndIsr (or start-up) creates the log again rather than loading half-made files."""
        self._descriptor_budget.reserve_one()
        existed = path.exists()
        lg: Log | None = None
        try:
            lg = Log.open(path, config, now_ms=self._clock_ms())
            if topic_id is not None:
                lg.assign_topic_id(topic_id)
            log.info("Created log for partition %s in %s", path.name, path)
            return lg
        except (OSError, MemoryError, KafkaStorageError) as e:
            if lg is not None:
                lg.close_handlers()
            if not existed:
                _remove_new_log_dir(path)
            raise KafkaStorageError(f"Error while creating log for {path.name} in dir "
                                    f"{path.parent}: {e}") from e

    def new_logs_opener(self, wanted: list[tuple[str, int, LogConfig, uuid.UUID | None]]
                        ) -> Callable[[], dict[TopicPartitionKey, tuple[Path, Log]]]:
        """On the loop: choose a directory for each partition not hosted yet (the fewest
        partitions first, as Kafka's nextLogDirs) and return the work that creates (or opens)
        their logs without registering them. That work is safe in a worker thread (it touches
        only those directories), so a thousand logs with their files and fsyncs do not stall the
        event loop; ``adopt_log`` then registers each on the loop. A partition that fails there
        is left out: creating it on the loop reports the error as before."""
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] = counts.get(d, 0) + 1
        plan: list[tuple[TopicPartitionKey, Path, LogConfig, uuid.UUID | None]] = []
        seen: set[TopicPartitionKey] = set()
        for topic, partition, config, topic_id in wanted:
            key = (topic, partition)
            if key in self._logs or key in seen:
                continue
            seen.add(key)
            d = min(self.log_dirs, key=lambda x: counts[x])
            counts[d] += 1
            plan.append((key, d, config, topic_id))

        def open_all() -> dict[TopicPartitionKey, tuple[Path, Log]]:
            out: dict[TopicPartitionKey, tuple[Path, Log]] = {}
            for key, d, config, topic_id in plan:
                try:
                    d.mkdir(parents=True, exist_ok=True)
                    # _create_log keeps the descriptor headroom and removes a half-made
                    # directory; the partition left out is created (and its error reported)
                    # on the loop.
                    lg = self._create_log(d / f"{key[0]}-{key[1]}", config, topic_id)
                except Exception:   # noqa: BLE001 - reported when the loop creates it
                    log.debug("could not prepare the log of %s-%d", key[0], key[1], exc_info=True)
                    continue
                out[key] = (d, lg)
            return out
        return open_all

    def adopt_log(self, key: TopicPartitionKey, d: Path, lg: Log) -> None:
        """Register a log made by ``open_new_logs`` (on the loop)."""
        if key in self._logs:
            # a second copy over the registered log's files: let go of its descriptors and
            # mappings without trimming, flushing or snapshotting anything the live log uses
            lg.close_handlers()
            return
        self._lock(d)
        self._logs[key] = lg
        self._dir_of[key] = d
        self._attach(lg)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        for (t, _p), lg in self._logs.items():
            if t == topic:
                lg.update_config(config)

    def delete_log(self, topic: str, partition: int, *, checkpoint: bool = True) -> Log | None:
        """Remove the partition: rename its directory to ``...-delete`` (so a crash midway is
        finished at the next start-up), then remove it. Returns the removed log, if any.
        ``checkpoint=False``: the caller deleting many logs calls ``checkpoint_dir`` once after."""
        key = (topic, partition)
        lg = self._logs.pop(key, None)
        d = self._dir_of.pop(key, None)
        if lg is None or d is None:
            return None
        lg.close_handlers()
        target = lg.dir.with_name(log_delete_dir_name(topic, partition))
        try:
            os.rename(lg.dir, target)
        except FileNotFoundError:
            pass        # the caller renamed it (and deletes it: delete_dirs_later)
        else:
            if not self.delete_dirs_later([target]):
                shutil.rmtree(target, ignore_errors=True)
        self._flush_requests.pop(lg, None)
        timer = self._flush_timers.pop(lg, None)
        if timer is not None:
            timer[0].cancel()
        if checkpoint:
            self._checkpoint_dir_soon(d)
        return lg

    def checkpoint_dir(self, d: Path) -> None:
        """Write the directory's recovery-point and log-start-offset checkpoints (in the flush
        pool when called on the loop with the flusher running, else now)."""
        if d in self.log_dirs:
            self._checkpoint_dir_soon(d)

    # -- periodic work -----------------------------------------------------------------------
    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """Flush logs whose last flush is ``flush.ms`` old (Kafka's flushDirtyLogs)."""
        now = self._clock_ms() if now_ms is None else now_ms
        n = 0
        for lg in list(self._logs.values()):
            if not lg.closed and now - lg.last_flush_ms >= lg.config.flush_ms:
                lg.flush(now_ms=now)
                n += 1
        return n

    def cleanup_logs(self, now_ms: int | None = None,
                     high_watermark: Callable[[str, int], int | None] | None = None) -> int:
        """Retention over every log; ``high_watermark(topic, partition)`` bounds deletion
        (None: the log end offset). Returns the number of segments deleted."""
        now = self._clock_ms() if now_ms is None else now_ms
        total = 0
        for (topic, partition), lg in list(self._logs.items()):
            if lg.closed:
                continue
            hw = high_watermark(topic, partition) if high_watermark is not None else None
            total += lg.delete_old_segments(now, hw)
        return total

    def remove_expired_producers(self, now_ms: int, producer_id_expiration_ms: int) -> int:
        """Forget, in every log, the producers idle for ``producer.id.expiration.ms`` (never
        one with an ongoing transaction); Kafka's removeExpiredProducers job. Returns how
        many were removed."""
        total = 0
        for lg in list(self._logs.values()):
            if not lg.closed:
                total += lg.producer_state.remove_expired_producers(now_ms,
                                                                    producer_id_expiration_ms)
        return total

    def _logs_in(self, d: Path) -> dict[TopicPartitionKey, Log]:
        return {k: lg for k, lg in self._logs.items() if self._dir_of.get(k) == d}

    # -- checkpoint files --------------------------------------------------------------------
    def _recovery_points_of(self, d: Path) -> tuple[Path, bytes]:
        return d / RECOVERY_POINT_CHECKPOINT_FILE, format_offset_checkpoint(
            {k: lg.recovery_point for k, lg in self._logs_in(d).items()})

    def _log_start_offsets_of(self, d: Path) -> tuple[Path, bytes]:
        # Only logs whose start offset lies inside their first segment need an entry (Kafka):
        # otherwise the first segment's base offset says it.
        return d / LOG_START_OFFSET_CHECKPOINT_FILE, format_offset_checkpoint(
            {k: lg.log_start_offset for k, lg in self._logs_in(d).items()
             if lg.log_start_offset > lg.segments[0].base_offset})

    def _remember_checkpoint(self, path: Path) -> None:
        try:
            self._written[path] = path.read_bytes()
        except OSError:
            self._written.pop(path, None)

    def _write_checkpoint(self, path: Path, data: bytes) -> bool:
        """Write ``data`` to ``path`` (atomically, fsynced) unless it already holds it. Any
        thread; one write of a file at a time, and never an older content over a newer."""
        lock = self._file_locks.setdefault(path, threading.Lock())
        with lock:
            if self._written.get(path) == data:
                return False
            atomic_write(path, data)
            self._written[path] = data
            return True

    def _checkpoint_dir(self, d: Path) -> None:
        self._write_checkpoint(*self._recovery_points_of(d))
        self._write_checkpoint(*self._log_start_offsets_of(d))

    def _on_loop(self) -> bool:
        """Whether the flusher runs and this is its event loop's thread."""
        try:
            return self._loop is not None and asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def _checkpoint_dir_soon(self, d: Path) -> None:
        """Checkpoint ``d`` in the pool when the flusher runs: once for all the deletions of
        this pass of the loop (a StopReplica of thousands of partitions writes it once)."""
        if not self._on_loop() or self._loop is None:
            self._checkpoint_dir(d)
            return
        if d not in self._checkpoint_pending:
            self._checkpoint_pending.add(d)
            self._loop.call_soon(self._submit_dir_checkpoint, d)

    def _submit_dir_checkpoint(self, d: Path) -> None:
        if d not in self._checkpoint_pending:
            return      # submitted already (stop_flusher)
        self._checkpoint_pending.discard(d)
        if self._loop is None or self._executor is None:
            self._checkpoint_dir(d)
            return
        items = [self._recovery_points_of(d), self._log_start_offsets_of(d)]   # taken on the loop
        fut = self._loop.run_in_executor(
            self._executor, lambda: [self._write_checkpoint(p, b) for p, b in items] and None)
        self._checkpoint_tasks.add(fut)
        fut.add_done_callback(self._checkpoint_done)

    def _checkpoint_done(self, fut: "asyncio.Future[None]") -> None:
        self._checkpoint_tasks.discard(fut)
        if not fut.cancelled() and fut.exception() is not None:
            log.error("Error writing checkpoints", exc_info=fut.exception())

    def checkpoint_recovery_points(self) -> None:
        for d in self.log_dirs:
            self._write_checkpoint(*self._recovery_points_of(d))

    def checkpoint_log_start_offsets(self) -> None:
        for d in self.log_dirs:
            self._write_checkpoint(*self._log_start_offsets_of(d))

    async def checkpoint_recovery_points_async(self) -> None:
        """Kafka's checkpointLogRecoveryOffsets (every log.flush.offset.checkpoint.interval.ms):
        the offsets are taken on the loop — each already durable below it — and the files
        written in the pool."""
        await self._write_in_pool([self._recovery_points_of(d) for d in self.log_dirs])

    async def checkpoint_log_start_offsets_async(self) -> None:
        """Kafka's checkpointLogStartOffsets (log.flush.start.offset.checkpoint.interval.ms)."""
        await self._write_in_pool([self._log_start_offsets_of(d) for d in self.log_dirs])

    async def _write_in_pool(self, items: list[tuple[Path, bytes]]) -> None:
        changed = [(p, b) for p, b in items if self._written.get(p) != b]
        if not changed:
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor,
                                   lambda: [self._write_checkpoint(p, b) for p, b in changed])

    # -- background flushes ------------------------------------------------------------------
    def _attach(self, lg: Log) -> None:
        if self._loop is not None:
            lg.flush_scheduler = self.schedule_flush
            lg.segment_deleter = self._delete_segments_later
            lg.flush_timer = self._on_unflushed_append

    def start_flusher(self) -> None:
        """From now on fsyncs run in the pool, driven by a task on the running loop."""
        if self._flusher is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(FLUSH_THREADS, thread_name_prefix="kafka-log-flush")
        self._flush_wakeup = asyncio.Event()
        for lg in self._logs.values():
            self._attach(lg)
        self._flusher = self._loop.create_task(self._run_flusher(), name="kafka-log-flusher")

    def schedule_flush(self, lg: Log, up_to_offset: int | None = None) -> None:
        """Ask for ``lg`` to be flushed up to ``up_to_offset`` (None: its end at flush time).
        On the loop; returns at once."""
        if lg not in self._flush_requests:
            self._flush_requests[lg] = up_to_offset
        else:
            prev = self._flush_requests[lg]
            self._flush_requests[lg] = None if prev is None or up_to_offset is None \
                else max(prev, up_to_offset)
        if self._flush_wakeup is not None:
            self._flush_wakeup.set()

    async def _run_flusher(self) -> None:
        assert self._flush_wakeup is not None
        while True:
            await self._flush_wakeup.wait()
            self._flush_wakeup.clear()
            await self._flush_requested()

    async def _flush_requested(self) -> None:
        """One round: every log asked for, each once (a request made meanwhile waits for the
        next round, so one flush per log runs at a time)."""
        requests, self._flush_requests = self._flush_requests, {}
        jobs: list[tuple[Log, FlushJob]] = []
        for lg, offset in requests.items():
            if lg.closed:
                continue
            job = lg.prepare_flush(offset)
            if job is not None:
                jobs.append((lg, job))
        try:
            if jobs:
                await self._run_flush_jobs(jobs)
        finally:
            self._rearm_flush_timers(requests)

    async def _run_flush_jobs(self, jobs: list[tuple[Log, FlushJob]]) -> None:
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        await asyncio.gather(*(loop.run_in_executor(self._executor, Log.run_flush, job)
                               for _lg, job in jobs))
        now = self._clock_ms()
        for lg, job in jobs:
            if job.errors and not lg.closed:
                log.error("Error flushing log %s: %s", lg.name, job.errors[0])
            lg.complete_flush(job, now_ms=now)
        log.debug("Flushed %d logs in %.1f ms", len(jobs), (time.monotonic() - start) * 1000)

    # -- flush.ms ----------------------------------------------------------------------------
    def _on_unflushed_append(self, lg: Log) -> None:
        """Log.flush_timer: the log holds unflushed data and a finite flush.ms (Kafka checks
        flush.ms every log.flush.scheduler.interval.ms, default never; a timer per dirty log
        flushes it when due, whatever that interval)."""
        armed = self._flush_timers.get(lg, False)
        if armed is False:
            self._arm_flush_timer(lg)
        elif armed is not None and armed[1] != lg.config.flush_ms:   # flush.ms changed
            armed[0].cancel()
            self._arm_flush_timer(lg)

    def _arm_flush_timer(self, lg: Log) -> None:
        assert self._loop is not None
        flush_ms = lg.config.flush_ms
        due_in_ms = lg.last_flush_ms + flush_ms - self._clock_ms()
        self._flush_timers[lg] = (self._loop.call_later(max(0, due_in_ms) / 1000,
                                                        self._flush_ms_elapsed, lg), flush_ms)

    def _flush_ms_elapsed(self, lg: Log) -> None:
        """Kafka's flushDirtyLogs for one log: flushed if its last flush is flush.ms old, else
        the timer waits for the new due time (a roll or flush.messages flushed it meanwhile)."""
        del self._flush_timers[lg]
        flush_ms = lg.config.flush_ms
        if lg.closed or flush_ms >= FLUSH_MS_NEVER or lg.log_end_offset <= lg.recovery_point:
            return
        if self._clock_ms() - lg.last_flush_ms >= flush_ms:
            self._flush_timers[lg] = None       # armed again after this flush round
            self.schedule_flush(lg)
        else:
            self._arm_flush_timer(lg)

    def _rearm_flush_timers(self, flushed: Iterable[Log]) -> None:
        for lg in flushed:
            if lg in self._flush_timers and self._flush_timers[lg] is None:
                del self._flush_timers[lg]
                if not lg.closed and lg.config.flush_ms < FLUSH_MS_NEVER \
                        and lg.log_end_offset > lg.recovery_point:
                    self._arm_flush_timer(lg)

    # -- delayed deletion (file.delete.delay.ms) ---------------------------------------------
    def _delete_segments_later(self, lg: Log, segments: list[LogSegment]) -> None:
        """Log.segment_deleter: remove the ``.deleted`` files after the log's
        ``file.delete.delay.ms`` (Kafka's "delete-file" task)."""
        def delete() -> None:
            log.info("[LocalLog partition=%s, dir=%s] Deleting segment files %s", lg.dir.name, lg.dir.parent,
                     ",".join(map(repr, segments)))
            for seg in segments:
                seg.delete()
        self._delete_later(lg.config.file_delete_delay_ms, delete)

    def delete_dirs_later(self, dirs: list[Path]) -> bool:
        """Remove partition directories already renamed ``-delete`` after the broker's
        ``log.segment.delete.delay.ms`` (Kafka's asyncDelete: fetches already reading their
        files finish), in the pool. On the loop; False (nothing done) without the flusher.
        Logs Kafka's two lines (LogManager.asyncDelete, deleteLogs) for each directory."""
        names = {d: "%s-%d" % log_dir_topic_partition(d.parent, d.name) for d in dirs}
        for d in dirs:
            log.info("Log for partition %s is renamed to %s and is scheduled for deletion", names[d], d.absolute())
        if not self._on_loop():
            return False

        def delete() -> None:
            for d in dirs:
                shutil.rmtree(d, ignore_errors=True)
                log.info("Deleted log for partition %s in %s.", names[d], d.absolute())
        self._delete_later(self.default_config.file_delete_delay_ms, delete)
        return True

    def _delete_later(self, delay_ms: int, work: Callable[[], None]) -> None:
        """Run ``work`` in the pool after ``delay_ms``. On the loop."""
        loop = self._loop
        assert loop is not None
        key = object()

        def submit() -> None:
            del self._pending_deletions[key]
            if self._executor is None:
                return
            fut = loop.run_in_executor(self._executor, work)
            self._deletion_tasks.add(fut)
            fut.add_done_callback(self._deletion_done)
        self._pending_deletions[key] = loop.call_later(max(0, delay_ms) / 1000, submit)

    def _deletion_done(self, fut: "asyncio.Future[None]") -> None:
        self._deletion_tasks.discard(fut)
        if not fut.cancelled() and fut.exception() is not None:
            log.error("Error deleting log files", exc_info=fut.exception())

    @property
    def pending_deletions(self) -> int:
        """Delayed deletions not yet due."""
        return len(self._pending_deletions)

    async def stop_flusher(self) -> None:
        """Stop the flusher and wait for the fsyncs and checkpoint writes in flight."""
        for d in list(self._checkpoint_pending):
            self._submit_dir_checkpoint(d)
        # Pending deletions are dropped, as Kafka's scheduler drops them at shutdown: the next
        # start-up removes ``.deleted`` files and ``-delete`` directories.
        for handle in self._pending_deletions.values():
            handle.cancel()
        self._pending_deletions.clear()
        for timer in self._flush_timers.values():
            if timer is not None:
                timer[0].cancel()
        self._flush_timers.clear()
        if self._flusher is not None:
            self._flusher.cancel()
            try:
                await self._flusher
            except asyncio.CancelledError:
                pass
            self._flusher = None
        if self._checkpoint_tasks or self._deletion_tasks:
            await asyncio.gather(*self._checkpoint_tasks, *self._deletion_tasks,
                                 return_exceptions=True)
        if self._executor is not None:
            executor, self._executor = self._executor, None
            await asyncio.to_thread(executor.shutdown, True)
        for lg in self._logs.values():
            lg.flush_scheduler = None
            lg.segment_deleter = None
            lg.flush_timer = None
        self._flush_requests.clear()
        self._loop = None

    # -- shutdown ----------------------------------------------------------------------------
    def _sync_dirs(self, errors: list[tuple[Path, OSError]]) -> None:
        """One syncfs per file system holding a log directory; failures appended to ``errors``."""
        synced: set[int] = set()
        for d in self.log_dirs:
            try:
                dev = os.stat(d).st_dev
                if dev not in synced:
                    syncfs(d)
                    synced.add(dev)
            except OSError as e:
                errors.append((d, e))

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Close every log (without fsyncs), sync each directory's file system once, write
        both checkpoints, then the clean-shutdown marker. Call :meth:`stop_flusher` first."""
        if self._startup_incomplete:
            # Start-up failed (a directory locked by another broker, unreadable, ...): close
            # what was opened and let go of the locks, but write nothing — no checkpoint and no
            # clean-shutdown marker into directories this broker never finished loading.
            for lg in self._logs.values():
                lg.close_handlers()
            self._unlock_all()
            self._startup_incomplete = False
            return
        errors: list[BaseException] = []
        started = time.monotonic()
        # The appended data is written back while the closes run (Python work on the loop's
        # core, the disk idle otherwise); the sync after them then has only the closes' own
        # writes left. Its errors count as the second sync's would: syncfs reports a writeback
        # error once per descriptor, and the second one opens its own after it.
        early_errors: list[tuple[Path, OSError]] = []
        early_sync = threading.Thread(target=self._sync_dirs, args=(early_errors,),
                                      name="log-shutdown-sync", daemon=True)
        early_sync.start()

        def close(lg: Log) -> None:
            try:
                lg.close(sync=False)
            except Exception as e:  # keep closing the others; no marker if anything failed
                log.exception("Error closing log %s", lg.name)
                errors.append(e)
        logs = list(self._logs.values())
        if self._recovery_threads > 1 and len(logs) > 1:
            # num.recovery.threads.per.data.dir, as Kafka closes them. A close whose producer
            # state is unchanged renames its snapshot (no new file): mostly Python work, which
            # more threads only slow down (10,000 logs: 2.8 s with one, 4.3-4.8 s with eight)
            with ThreadPoolExecutor(min(self._recovery_threads, len(logs)),
                                    thread_name_prefix="log-close") as pool:
                list(pool.map(close, logs))
        else:
            for lg in logs:
                close(lg)
        closed = time.monotonic()
        early_sync.join()
        sync_errors = early_errors
        self._sync_dirs(sync_errors)   # every closed log's data, indexes and snapshots, at once
        for d, e in sync_errors:
            log.error("Error syncing log directory %s: %s", d, e)
            errors.append(e)
        if not sync_errors:
            # Not before the data is durable: the checkpoints would claim it flushed.
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
        if not errors:
            marker = json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode()
            for d in self.log_dirs:
                atomic_write(d / CLEAN_SHUTDOWN_FILE, marker)
        self._unlock_all()
        self._started = False
        # where a slow shutdown goes: the closes' own writes, or the file systems' sync
        log.info("Closed %d logs in %d ms, synced the file systems and wrote the checkpoints in %d ms",
                 len(logs), (closed - started) * 1000, (time.monotonic() - closed) * 1000)
        if errors:
            raise errors[0]
