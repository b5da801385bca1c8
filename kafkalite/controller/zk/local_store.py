"""An in-process znode tree behind the ZNodeStore interface: the embedded single-node mode runs the
same controller code over it as a cluster runs over ZooKeeper.

ZooKeeper's semantics, one session: data versions, cversion (child changes), czxid/mzxid/pzxid
from a zxid counter that survives restarts (a broker's epoch is its registration's czxid, so it
must keep growing), ephemeral nodes owned by the session (deleted when it closes, or after a crash
at the next start, in a logged transaction as ZooKeeper's session expiry), sequential names from
the parent's cversion, atomic multi with CheckOp, persistent watches called on the loop.

Persisted as ZooKeeper persists its tree: a snapshot beside a transaction log.
`<directory>/kafkalite-zk.json` is the snapshot (every node with its stat, ephemerals with their
owner, and the zxid it includes), `<directory>/kafkalite-zk.log` the log: each commit's changes
(the creates, sets and deletes it applied, with its zxid and time) appended as a record and
fdatasynced in a worker thread before the write returns. Group commit: the writes made while an
append runs share the next one, as one framed record (length, CRC-32, JSON). The snapshot is
rewritten (tmp + fsync + rename + directory fsync) only when the log has grown past it, and at a
clean close; the log is emptied only after that. It is written one node per line, and each node
keeps its entry while its stat stays the same: a rewrite formats only the nodes that changed.
Load = snapshot + replay of the log's transactions above the snapshot's zxid: a torn final record
(a crash mid-append, never acknowledged) is cut off; a damaged record with more after it stops
the load. A directory with only the snapshot (the format before the log) loads as a snapshot
with an empty log.

A directory that only has the previous format, `kafkalite-metadata.json`, is migrated once: the
tree is built from it through Kafka's znode codecs, the old file is left untouched.
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import random
import struct
import time
import zlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from kafkalite.controller.zk import znodes
from kafkalite.fileio import atomic_write, fsync_dir
from kafkalite.controller.zk.znode_store import (BadVersionError, CheckOp, CreateOp, DeleteOp,
                                                 NoChildrenForEphemeralsError, NodeExistsError,
                                                 NoNodeError, NotEmptyError, Op, OpResult,
                                                 SessionExpiredError, SetDataOp, StoreError,
                                                 ZkState, ZNodeStore, ZnStat, multi_error,
                                                 parent_path, sequential_name, validate_path)

log = logging.getLogger(__name__)

FILE_NAME = "kafkalite-zk.json"
LOG_FILE_NAME = "kafkalite-zk.log"
OLD_METADATA_FILE = "kafkalite-metadata.json"
FORMAT_VERSION = 1
GET_MANY_CHUNK = 2000   # reads between two yields to the loop in get_many (a few ms)
# the snapshot is rewritten once the log is larger than it and than this (small trees would
# otherwise be rewritten every few commits)
COMPACT_MIN_BYTES = 64 * 1024
_RECORD_HEADER = struct.Struct(">II")   # payload length, CRC-32 of the payload


@dataclass
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    version: int = 0
    cversion: int = 0
    ephemeral_owner: int = 0
    children: dict[str, "_Node"] = field(default_factory=dict)
    # this node's entry in the snapshot file as last written or read, with the stat it was made
    # from: (version, cversion, mzxid, pzxid). Every change of what the entry holds changes one of
    # them (data and mtime only change with version), so a different stat means a stale entry.
    snap: Optional[tuple[tuple[int, int, int, int], str]] = field(default=None, compare=False, repr=False)

    def stat(self) -> ZnStat:
        return ZnStat(version=self.version, cversion=self.cversion, czxid=self.czxid,
                      mzxid=self.mzxid, ctime=self.ctime, mtime=self.mtime,
                      ephemeral_owner=self.ephemeral_owner, num_children=len(self.children),
                      data_length=len(self.data))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _entry_text(row: tuple) -> str:
    """One node's entry of the snapshot file, from a row of `LocalZNodeStore._snapshot_parts`."""
    # Formatted directly (its integers as JSON writes them, its strings through the encoder):
    # 40 % less time than encoding a dict per node, the same text.
    p, version, cversion, czxid, mzxid, pzxid, ctime, mtime, owner, data = row
    kind, text = _data_field(data)
    key = _SNAPSHOT_DATA_KEYS[kind]
    # an ephemeral's owner only where there is one (a snapshot taken while the session lives)
    eph = f'"ephemeral_owner":{owner:d},' if owner else ""
    return (f'{_dumps(p)}:{{"version":{version:d},"cversion":{cversion:d},"czxid":{czxid:d},'
            f'"mzxid":{mzxid:d},"pzxid":{pzxid:d},"ctime":{ctime:d},"mtime":{mtime:d},'
            f'{eph}"{key}":{_dumps(text)}}}')


_dumps = json.JSONEncoder(separators=(",", ":")).encode


def _document_text(entries: list[str], zxid: int) -> str:
    # one entry per line (JSON all the same): a load keeps each node's line as its entry, so the
    # next snapshot re-formats only the nodes that changed since
    return f'{{"version":{FORMAT_VERSION:d},"zxid":{zxid:d},"nodes":{{\n' + ",\n".join(entries) + "\n}}"


def _keep_loaded_entries(text: bytes, nodes: dict[str, "_Node"]) -> None:
    """Each node of a snapshot file written one entry per line keeps its line as its entry, with
    the stat it was read with (a file in one line, as written before, keeps none)."""
    lines = text.decode("utf-8").split("\n")
    if len(lines) != len(nodes) + 2:
        return
    for (p, node), line in zip(nodes.items(), lines[1:-1]):
        line = line.rstrip(",")
        # the line of this very entry (a path JSON writes with escapes keeps none)
        if line.startswith(p, 1) and line[0] == '"' and line[len(p) + 1:len(p) + 4] == '":{' and line.endswith("}"):
            node.snap = ((node.version, node.cversion, node.mzxid, node.pzxid), line)


def _snapshot_parts_text(parts: list[tuple], zxid: int, keep: bool = True) -> str:
    """The file's document from `LocalZNodeStore._snapshot_parts` (worker thread): kept entries
    for the nodes unchanged since, formatted ones for the others, which keep them (`keep`) with
    the stat they were made from."""
    parts.sort(key=lambda part: part[0])
    entries = []
    for part in parts:
        if part[1] is not None:
            entries.append(part[1])
            continue
        _, _, row, node, stat = part
        text = _entry_text(row)
        if keep:
            node.snap = (stat, text)     # one attribute store; checked against the stat at use
        entries.append(text)
    return _document_text(entries, zxid)


def _data_field(data: bytes) -> tuple[str, str]:
    """A znode's data as ("t", text) when it is UTF-8 (Kafka's znodes are JSON: readable in the
    files), else ("b", base64)."""
    try:
        return "t", data.decode("utf-8")
    except UnicodeDecodeError:
        return "b", base64.b64encode(data).decode()


# the keys of a node's data in a snapshot entry, by `_data_field` kind
_SNAPSHOT_DATA_KEYS = {"t": "data", "b": "data_b64"}


def _field_data(kind: str, text: str) -> bytes:
    if kind == "t":
        return text.encode("utf-8")
    if kind == "b":
        return base64.b64decode(text)
    raise ValueError(f"unknown data kind {kind!r}")


def _op_json(op: tuple) -> list:
    if op[0] == "c":
        return ["c", op[1], op[3], *_data_field(op[2])]
    if op[0] == "s":
        return ["s", op[1], *_data_field(op[2])]
    return ["d", op[1]]


def encode_log_record(txns: Sequence[tuple[int, int, list[tuple]]]) -> bytes:
    """One framed log record holding the transactions (zxid, time, ops) of one group commit."""
    payload = json.dumps([[zxid, now, [_op_json(op) for op in ops]] for zxid, now, ops in txns],
                         separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return _RECORD_HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def decode_log(buf: bytes, name: str = LOG_FILE_NAME) -> tuple[list[tuple[int, list]], int]:
    """The log's records as (byte offset, transactions), and the length of its valid part.

    Each group commit is one write of one record, fdatasynced before any of its writes is
    acknowledged, so only the final record can be torn by a crash: one cut short, or whose
    bytes never reached the disk (zeros, or a CRC that does not match, up to the end of the file)
    is dropped. A record that does not check out with other bytes after it is damage, not a
    crash: ValueError, as ZooKeeper refuses a log whose CRC check fails. (This assumes a crash
    leaves the unacknowledged write cut short or zero-filled past some byte, as ext4's and xfs's
    ordered data writes do; a header lost while later bytes of the same write landed would be
    reported as damage, never loaded as data.)"""
    records: list[tuple[int, list]] = []
    off, n = 0, len(buf)
    while off < n:
        if n - off < _RECORD_HEADER.size:
            break                                   # header torn
        length, crc = _RECORD_HEADER.unpack_from(buf, off)
        end = off + _RECORD_HEADER.size + length
        if end > n:
            later = _next_whole_record(buf, off + _RECORD_HEADER.size)
            if later is not None:
                # a torn final record is a prefix of one record: its length field was damaged
                raise ValueError(f"{name}: record at byte {off} declares {length} bytes, past the end of "
                                 f"the file, and a whole record follows at byte {later}: the log is "
                                 f"damaged before its end")
            break                                   # cut short
        payload = buf[off + _RECORD_HEADER.size:end]
        if length == 0 or zlib.crc32(payload) != crc:
            if end == n or not buf[off:].strip(b"\0"):
                break                               # the final record's bytes never all landed
            raise ValueError(f"{name}: record at byte {off} fails its CRC check and {n - end} bytes "
                             f"follow it: the log is damaged before its end")
        try:
            txns = json.loads(payload)
        except ValueError as e:
            raise ValueError(f"{name}: record at byte {off} passes its CRC check but is not JSON: {e}") from None
        records.append((off, txns))
        off = end
    return records, off


def _next_whole_record(buf: bytes, start: int) -> int | None:
    """The byte offset of the first record at or after ``start`` that checks out (a length that
    fits, a matching CRC), or None. Only read when a record's length runs past the end of the
    file (rare): every payload is a JSON list of transactions, so only the places where one
    begins ("[[") are tried."""
    n = len(buf)
    at = buf.find(b"[[", start + _RECORD_HEADER.size)
    while at >= 0:
        off = at - _RECORD_HEADER.size
        length, crc = _RECORD_HEADER.unpack_from(buf, off)
        if 0 < length <= n - at and zlib.crc32(buf[at:at + length]) == crc:
            return off
        at = buf.find(b"[[", at + 1)
    return None


def _log_append(fd: int, data: bytes) -> None:
    """Append `data` to the log and make it durable (worker thread)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fdatasync(fd)


class _Txn:
    """Undo log and watch events of one write (a single op or a whole multi)."""

    def __init__(self, zxid: int) -> None:
        self.zxid = zxid
        self.now = _now_ms()
        self.undo: list[Callable[[], None]] = []
        self.data_events: list[str] = []       # paths whose data watchers fire
        self.child_events: list[str] = []      # paths whose children watchers fire
        # what the log record says: ("c", path, data, ephemeral owner), ("s", path, data), ("d", path)
        self.ops: list[tuple] = []

    def rollback(self) -> None:
        for fn in reversed(self.undo):
            fn()


def _walk(root: _Node) -> Iterator[tuple[str, _Node]]:
    """Every node of the tree under `root` ("/") with its path."""
    stack = [("/", root)]
    while stack:
        p, n = stack.pop()
        yield p, n
        prefix = p.rstrip("/")
        for name, child in n.children.items():
            stack.append((f"{prefix}/{name}", child))


def read_znodes(directory: Path) -> dict[str, bytes]:
    """Every znode's data as a start would load it (snapshot + log), read without changing
    either file: for tools and tests looking into a directory a broker may be writing. A
    compaction between the two reads (a new snapshot, the log emptied) makes the log look
    incomplete: the read is done again when the snapshot was replaced meanwhile."""
    snapshot = Path(directory) / FILE_NAME
    attempts = 0
    while True:
        before = _file_identity(snapshot)
        store = LocalZNodeStore(directory)
        try:
            store._load(read_only=True)
            return {path: node.data for path, node in _walk(store._root)}
        except ValueError:
            attempts += 1
            if attempts > 5 or _file_identity(snapshot) == before:
                raise


def _file_identity(path: Path) -> Optional[tuple[int, int]]:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns


class LocalZNodeStore(ZNodeStore):
    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        self._root = _Node(b"", 0, 0, 0, 0, 0)
        self._zxid = 0
        self._session_id = 0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._started = False
        self._closed = False
        self._data_watches: dict[str, list[Callable[[], None]]] = {}
        self._child_watches: dict[str, list[Callable[[], None]]] = {}
        self._state_listeners: list[Callable[[ZkState], None]] = []
        # group commit: committed transactions (zxid, time, ops) not yet in the log
        self._mutations = 0
        self._persisted = 0
        self._persist_task: Optional[asyncio.Task[None]] = None
        self._compact_task: Optional[asyncio.Task[None]] = None
        self._pending: list[tuple[int, int, list[tuple]]] = []
        self.log_path = self.directory / LOG_FILE_NAME
        self._log_fd = -1
        self._log_size = 0          # bytes of whole, durable records in the log
        self._snapshot_size = 0
        self._snapshot_loaded = False
        # the session's ephemeral nodes (an ordered set), kept with every create and delete: the
        # session's close deletes them without walking the tree (20,000 znodes at 10,000 partitions)
        self._ephemerals: dict[str, None] = {}

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def session_id(self) -> int:
        return self._session_id

    async def start(self) -> None:
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        try:
            migrated = await asyncio.to_thread(self._load)
        except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
            self._close_log()
            raise StoreError(f"Cannot load the metadata in {self.path}: {e}") from None
        # a new session each start, like a broker reconnecting to ZooKeeper
        self._session_id = random.getrandbits(63) | 1
        self._started = True
        if migrated or not self._snapshot_loaded:
            try:
                await self._compact()
            except OSError as e:
                self._close_log()
                raise StoreError(f"Cannot write {self.path}: {e}") from None
        if self._ephemerals:
            # left by a session that did not close (the process was killed): ZooKeeper expires
            # such a session and deletes its ephemerals in a transaction of their own
            txn = self._begin()
            for path in list(self._ephemerals):
                self._delete_node(txn, path, -1)
            self._commit(txn)
            await self._sync()
        for listener in list(self._state_listeners):
            self._loop.call_soon(listener, ZkState.CONNECTED)

    async def close(self) -> None:
        if not self._started or self._closed:
            return
        # the session ends: its ephemeral nodes go away; our own watches are gone with it
        self._closed = True
        txn = self._begin()
        for path in list(self._ephemerals):
            self._delete_node(txn, path, -1)
        if txn.ops:
            # logged like ZooKeeper's closeSession: a reload gives back exactly this tree
            self._zxid = txn.zxid
            self._pending.append((txn.zxid, txn.now, txn.ops))
            self._mutations += 1
        try:
            await self._sync()   # the writes made before still finish their persist
            if self._compact_task is not None:
                await self._compact_task
            if self._log_size:
                # a restart then loads the snapshot alone
                try:
                    await self._compact()
                except OSError as e:
                    log.warning("Cannot write %s at close (the log %s is kept and replayed at the "
                                "next start): %s", self.path, self.log_path, e)
        finally:
            self._close_log()
        self._data_watches.clear()
        self._child_watches.clear()
        self._state_listeners.clear()

    # ---- reads -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if not self._started:
            raise StoreError("The znode store is not started")
        if self._closed:
            raise SessionExpiredError("The znode store is closed")

    def _find(self, path: str) -> Optional[_Node]:
        validate_path(path)
        node = self._root
        if path == "/":
            return node
        for part in path[1:].split("/"):
            node = node.children.get(part)  # type: ignore[assignment]
            if node is None:
                return None
        return node

    def _require(self, path: str) -> _Node:
        node = self._find(path)
        if node is None:
            raise NoNodeError(f"NoNode for {path}")
        return node

    async def get(self, path: str) -> tuple[bytes, ZnStat]:
        self._check_open()
        node = self._require(path)
        return node.data, node.stat()

    async def get_many(self, paths: Sequence[str]) -> list[Optional[tuple[bytes, ZnStat]]]:
        """In memory: read in place, not as one task per path (10,000 partition states at a
        controller failover), yielding to the loop between chunks."""
        self._check_open()
        out: list[Optional[tuple[bytes, ZnStat]]] = []
        for i, path in enumerate(paths):
            if i and i % GET_MANY_CHUNK == 0:
                await asyncio.sleep(0)
                self._check_open()
            node = self._find(path)
            out.append(None if node is None else (node.data, node.stat()))
        return out

    async def exists(self, path: str) -> Optional[ZnStat]:
        self._check_open()
        node = self._find(path)
        return None if node is None else node.stat()

    async def children(self, path: str) -> list[str]:
        self._check_open()
        return list(self._require(path).children)

    # ---- writes ----------------------------------------------------------------------------

    def _begin(self) -> _Txn:
        return _Txn(self._zxid + 1)

    def _commit(self, txn: _Txn) -> None:
        self._zxid = txn.zxid
        self._pending.append((txn.zxid, txn.now, txn.ops))
        self._mutations += 1
        self._fire(txn)

    def _create_node(self, txn: _Txn, path: str, data: bytes, ephemeral: bool,
                     sequential: bool, owner: Optional[int] = None) -> str:
        validate_path(path)
        if path == "/":
            raise NodeExistsError("NodeExists for /")
        parent_name = parent_path(path)
        parent = self._find(parent_name)
        if parent is None:
            raise NoNodeError(f"NoNode for {parent_name} (parent of {path})")
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError(f"NoChildrenForEphemerals for {path}")
        if sequential:
            # ZooKeeper numbers sequential children with the parent's cversion
            path = sequential_name(path, parent.cversion)
        name = path[path.rfind("/") + 1:]
        if name in parent.children:
            raise NodeExistsError(f"NodeExists for {path}")
        if owner is None:
            owner = self._session_id if ephemeral else 0
        node = _Node(bytes(data), txn.zxid, txn.zxid, txn.zxid, txn.now, txn.now,
                     ephemeral_owner=owner)
        old = (parent.cversion, parent.pzxid)
        parent.children[name] = node
        parent.cversion += 1
        parent.pzxid = txn.zxid
        if owner:
            self._ephemerals[path] = None
        txn.ops.append(("c", path, node.data, owner))

        def undo() -> None:
            del parent.children[name]
            parent.cversion, parent.pzxid = old
            self._ephemerals.pop(path, None)
        txn.undo.append(undo)
        txn.data_events.append(path)
        txn.child_events += [path, parent_name]
        return path

    def _set_node(self, txn: _Txn, path: str, data: bytes, version: int) -> ZnStat:
        node = self._require(path)
        if version != -1 and node.version != version:
            raise BadVersionError(f"BadVersion for {path}: expected {version}, is {node.version}")
        old = (node.data, node.version, node.mzxid, node.mtime)
        node.data, node.version, node.mzxid, node.mtime = bytes(data), node.version + 1, txn.zxid, txn.now
        txn.ops.append(("s", path, node.data))

        def undo() -> None:
            node.data, node.version, node.mzxid, node.mtime = old
        txn.undo.append(undo)
        txn.data_events.append(path)
        return node.stat()

    def _delete_node(self, txn: _Txn, path: str, version: int) -> None:
        if path == "/":
            raise StoreError("Cannot delete /")
        node = self._require(path)
        if version != -1 and node.version != version:
            raise BadVersionError(f"BadVersion for {path}: expected {version}, is {node.version}")
        if node.children:
            raise NotEmptyError(f"Directory not empty for {path}")
        parent = self._require(parent_path(path))
        name = path[path.rfind("/") + 1:]
        old = (parent.cversion, parent.pzxid)
        del parent.children[name]
        parent.cversion += 1
        parent.pzxid = txn.zxid
        if node.ephemeral_owner:
            self._ephemerals.pop(path, None)
        txn.ops.append(("d", path))

        def undo() -> None:
            parent.children[name] = node
            parent.cversion, parent.pzxid = old
            if node.ephemeral_owner:
                self._ephemerals[path] = None
        txn.undo.append(undo)
        txn.data_events.append(path)
        txn.child_events += [path, parent_path(path)]

    def _check_node(self, path: str, version: int) -> None:
        node = self._require(path)
        if version != -1 and node.version != version:
            raise BadVersionError(f"BadVersion for {path}: expected {version}, is {node.version}")

    def _write(self, fn: Callable[[_Txn], object]) -> object:
        """Run one write as a transaction: all of it or nothing."""
        self._check_open()
        txn = self._begin()
        try:
            result = fn(txn)
        except BaseException:
            txn.rollback()
            raise
        self._commit(txn)
        return result

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, make_parents: bool = False) -> str:
        def op(txn: _Txn) -> str:
            if make_parents:
                missing = []
                parent = parent_path(path)
                while parent != "/" and self._find(parent) is None:
                    missing.append(parent)
                    parent = parent_path(parent)
                for p in reversed(missing):
                    self._create_node(txn, p, b"", False, False)
            return self._create_node(txn, path, data, ephemeral, sequential)
        created = self._write(op)
        await self._sync()
        return created  # type: ignore[return-value]

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnStat:
        stat = self._write(lambda txn: self._set_node(txn, path, data, version))
        await self._sync()
        return stat  # type: ignore[return-value]

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        def op(txn: _Txn) -> None:
            if recursive:
                node = self._require(path)
                # children first, deepest first; the version applies to `path` only
                stack = [(path, node)]
                order: list[str] = []
                while stack:
                    p, n = stack.pop()
                    order.append(p)
                    stack += [(f"{p.rstrip('/')}/{c}", cn) for c, cn in n.children.items()]
                for p in reversed(order[1:]):
                    self._delete_node(txn, p, -1)
            self._delete_node(txn, path, version)
        self._write(op)
        await self._sync()

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        def run(txn: _Txn) -> list[OpResult]:
            results: list[OpResult] = []
            for index, op in enumerate(ops):
                try:
                    if isinstance(op, CreateOp):
                        results.append(self._create_node(txn, op.path, op.data, op.ephemeral,
                                                         op.sequential))
                    elif isinstance(op, SetDataOp):
                        results.append(self._set_node(txn, op.path, op.data, op.version))
                    elif isinstance(op, DeleteOp):
                        self._delete_node(txn, op.path, op.version)
                        results.append(None)
                    elif isinstance(op, CheckOp):
                        self._check_node(op.path, op.version)
                        results.append(True)
                    else:
                        raise StoreError(f"Unknown op {op!r}")
                except StoreError as e:
                    raise multi_error(e, index, op) from None
            return results
        results = self._write(run)
        await self._sync()
        return results  # type: ignore[return-value]

    # ---- watches ---------------------------------------------------------------------------

    def watch_data(self, path: str, callback: Callable[[], None]) -> None:
        self._data_watches.setdefault(path, []).append(callback)

    def watch_children(self, path: str, callback: Callable[[], None]) -> None:
        self._child_watches.setdefault(path, []).append(callback)

    def unwatch(self, path: str) -> None:
        self._data_watches.pop(path, None)
        self._child_watches.pop(path, None)

    def add_state_listener(self, callback: Callable[[ZkState], None]) -> None:
        self._state_listeners.append(callback)

    def _fire(self, txn: _Txn) -> None:
        assert self._loop is not None
        callbacks: list[Callable[[], None]] = []
        for path in dict.fromkeys(txn.data_events):
            callbacks += self._data_watches.get(path, [])
        for path in dict.fromkeys(txn.child_events):
            callbacks += self._child_watches.get(path, [])
        for cb in dict.fromkeys(callbacks):     # one call per callback per write
            self._loop.call_soon(cb)

    # ---- persistence -----------------------------------------------------------------------

    async def _sync(self) -> None:
        """Return once a persist that includes every write made so far has finished."""
        target = self._mutations
        while self._persisted < target:
            task = self._persist_task
            if task is None or task.done():
                task = self._persist_task = asyncio.get_running_loop().create_task(self._persist_once())
            try:
                await asyncio.shield(task)
            except OSError as e:
                raise StoreError(f"Cannot write {self.log_path}: {e}") from None

    async def _persist_once(self) -> None:
        if self._compact_task is not None:
            await self._compact_task           # it empties the log: never while appending
        covered = self._mutations
        batch, self._pending = self._pending, []
        if batch:
            try:
                # the record is built and written in the worker thread: the ops hold only
                # immutable values (paths, bytes, ints)
                await asyncio.to_thread(self._append, batch)
            except BaseException:
                self._pending[:0] = batch      # retried by the next persist, in zxid order
                raise
        self._persisted = max(self._persisted, covered)
        if self._log_size > max(self._snapshot_size, COMPACT_MIN_BYTES):
            # after the writes are acknowledged: they do not wait for the snapshot
            self._compact_task = asyncio.get_running_loop().create_task(self._compact_in_background())

    async def _compact_in_background(self) -> None:
        try:
            await self._compact()
        except OSError as e:
            # the writes are durable in the log; the next compaction tries again
            log.warning("Cannot write %s (the log %s keeps growing until it can): %s",
                        self.path, self.log_path, e)
        finally:
            self._compact_task = None

    def _append(self, batch: list[tuple[int, int, list[tuple]]]) -> None:
        """In a worker thread: one record for the batch, appended and fdatasynced."""
        data = encode_log_record(batch)
        if os.fstat(self._log_fd).st_size != self._log_size:
            # a failed append left part of a record behind: cut it off before appending after it
            os.ftruncate(self._log_fd, self._log_size)
        _log_append(self._log_fd, data)
        self._log_size += len(data)

    async def _compact(self) -> None:
        """A new snapshot of the tree as it is, then the log emptied: every record in it is at
        or below the snapshot's zxid. A crash between the two loads the new snapshot and skips
        the records; one before the rename loads the old snapshot and replays them."""
        # Only the copy is taken on the loop (the tree changes under it otherwise); the JSON of
        # tens of thousands of znodes is built in the worker thread.
        parts, zxid = self._snapshot_parts(), self._zxid
        await asyncio.to_thread(self._write_snapshot_and_truncate_log, parts, zxid)

    def _write_snapshot_and_truncate_log(self, parts: list[tuple], zxid: int) -> None:
        self._write_snapshot(parts, zxid)
        if self._log_fd >= 0 and self._log_size:
            os.ftruncate(self._log_fd, 0)
            # at once: a failing fsync below must not leave the next append cutting the file
            # back to the old size (zeros a reload would read as damage); the snapshot is
            # already durable, so a truncation lost in a crash only replays skipped records
            self._log_size = 0
            os.fsync(self._log_fd)

    def _write_snapshot(self, parts: list[tuple], zxid: int) -> None:
        """In a worker thread: the file replaced whole (temp file, fsync, rename, directory fsync)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = _snapshot_parts_text(parts, zxid).encode("utf-8")
        atomic_write(self.path, text)
        self._snapshot_size = len(text)
        self._snapshot_loaded = True

    def _close_log(self) -> None:
        if self._log_fd >= 0:
            os.close(self._log_fd)
            self._log_fd = -1

    def _snapshot_parts(self, reuse: bool = True) -> list[tuple]:
        """Every node, as (path, its kept entry) where the entry is still its stat's (and
        `reuse`), else as (path, None, its row, the node, its stat), the row a tuple of immutable
        values: (path, version, cversion, czxid, mzxid, pzxid, ctime, mtime, ephemeral owner,
        data). Taken on the loop, formatted in the thread. The session's ephemerals are in it, as
        in ZooKeeper's snapshots: the log after it may delete them, and a start after a crash
        expires them (a clean close deletes them before its snapshot)."""
        parts: list[tuple] = []
        for p, n in _walk(self._root):
            stat = (n.version, n.cversion, n.mzxid, n.pzxid)
            snap = n.snap
            if reuse and snap is not None and snap[0] == stat:
                parts.append((p, snap[1]))
            else:
                parts.append((p, None, (p, n.version, n.cversion, n.czxid, n.mzxid, n.pzxid, n.ctime,
                                        n.mtime, n.ephemeral_owner, n.data), n, stat))
        return parts

    def _load(self, read_only: bool = False) -> bool:
        """Read the tree (worker thread): the snapshot, then the log's transactions above its
        zxid. True when it was migrated from the old format."""
        migrated = self._load_snapshot()
        self._open_log(read_only)
        return migrated

    def _load_snapshot(self) -> bool:
        if self.path.exists():
            text_bytes = self.path.read_bytes()
            self._snapshot_size = len(text_bytes)
            self._snapshot_loaded = True
            doc = json.loads(text_bytes)
            if doc.get("version") != FORMAT_VERSION:
                raise ValueError(f"unknown format version {doc.get('version')!r}")
            self._zxid = int(doc["zxid"])
            # Every node is listed by its full path: each finds its parent by that path in one
            # lookup (a walk from the root per node was most of loading 20,000 znodes). The loop
            # is written out (no helper calls, json's ints taken as they are): 35 % less time.
            nodes: dict[str, _Node] = {}
            for p, entry in doc["nodes"].items():
                text = entry.get("data")
                data = text.encode("utf-8") if text is not None else base64.b64decode(entry["data_b64"])
                nodes[p] = _Node(data, entry["czxid"], entry["mzxid"], entry["pzxid"], entry["ctime"],
                                 entry["mtime"], entry["version"], entry["cversion"],
                                 entry.get("ephemeral_owner", 0))
            # the next snapshot re-uses the lines of the nodes unchanged since
            _keep_loaded_entries(text_bytes, nodes)
            self._root = nodes.pop("/", self._root)
            for p, node in nodes.items():
                i = p.rfind("/")
                parent = nodes.get(p[:i]) if i > 0 else self._root
                if parent is None:
                    raise ValueError(f"node {p} has no parent in the file")
                parent.children[p[i + 1:]] = node
                if node.ephemeral_owner:
                    self._ephemerals[p] = None
            return False
        old = self.directory / OLD_METADATA_FILE
        if old.exists():
            self._migrate(json.loads(old.read_text(encoding="utf-8")))
            log.info("Built %s from %s (the old file is kept)", self.path, old)
            return True
        return False

    def _open_log(self, read_only: bool = False) -> None:
        """Open the log for appends and replay it; a torn final record is cut off the file.
        `read_only`: replay it, change nothing (a reader beside a live broker)."""
        if read_only:
            try:
                buf = self.log_path.read_bytes()
            except FileNotFoundError:
                buf = b""
            self._replay_log(buf)
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        created = not self.log_path.exists()
        fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self._log_fd = fd
        if created:
            fsync_dir(self.directory)
        size = os.fstat(fd).st_size
        buf = os.pread(fd, size, 0) if size else b""
        valid = self._replay_log(buf)
        if valid < size:
            log.warning("Dropped the torn final record of %s (%d bytes at byte %d, never acknowledged)",
                        self.log_path, size - valid, valid)
            os.ftruncate(fd, valid)
            os.fsync(fd)
        self._log_size = valid

    def _replay_log(self, buf: bytes) -> int:
        """Apply the log's transactions above the tree's zxid; the length of its valid part."""
        records, valid = decode_log(buf, str(self.log_path))
        if records and not self._snapshot_loaded:
            raise ValueError(f"{self.log_path} has records but there is no {self.path}")
        for off, txns in records:
            for zxid, now, ops in txns:
                if zxid <= self._zxid:
                    continue            # in the snapshot already (written after this record)
                if zxid != self._zxid + 1:
                    raise ValueError(f"{self.log_path}: record at byte {off} has zxid {zxid:#x}, "
                                     f"the tree is at {self._zxid:#x}: transactions are missing")
                try:
                    self._replay(zxid, now, ops)
                except StoreError as e:
                    raise ValueError(f"{self.log_path}: transaction {zxid:#x} in the record at byte "
                                     f"{off} does not apply to the tree: {e}") from None
        return valid

    def _replay(self, zxid: int, now: int, ops: list) -> None:
        txn = _Txn(zxid)
        txn.now = now
        for op in ops:
            if op[0] == "c":
                self._create_node(txn, op[1], _field_data(op[3], op[4]), bool(op[2]), False, owner=int(op[2]))
            elif op[0] == "s":
                self._set_node(txn, op[1], _field_data(op[2], op[3]), -1)
            elif op[0] == "d":
                self._delete_node(txn, op[1], -1)
            else:
                raise StoreError(f"unknown op {op[0]!r}")
        self._zxid = zxid

    # ---- migration from kafkalite-metadata.json --------------------------------------------

    def _put(self, path: str, data: bytes = b"", version: int = 0) -> None:
        """Create `path` (and missing parents) directly, one zxid each (start-up only)."""
        missing = []
        p = path
        while p != "/" and self._find(p) is None:
            missing.append(p)
            p = parent_path(p)
        for p in reversed(missing):
            txn = self._begin()
            self._create_node(txn, p, b"", False, False)
            self._zxid = txn.zxid
        if data or version:
            node = self._require(path)
            node.data, node.version = data, version

    def _migrate(self, doc: dict) -> None:
        for p in znodes.PERSISTENT_ZK_PATHS:
            self._put(p)
        self._put(znodes.CLUSTER_ID_PATH, znodes.encode_cluster_id(doc["cluster_id"]))
        for t in doc.get("topics", []):
            name = t["name"]
            assignment = {int(p): znodes.ReplicaAssignment(tuple(r))
                          for p, r in t["assignment"].items()}
            # Kafka writes a topic's config znode first, even without overrides
            self._put(znodes.config_entity_path(znodes.CONFIG_TYPE_TOPIC, name),
                      znodes.encode_entity_config(t.get("configs", {})))
            self._put(znodes.topic_path(name), znodes.encode_topic_assignment(
                uuid.UUID(t["topic_id"]), dict(sorted(assignment.items()))))
            for p, s in sorted(t.get("states", {}).items(), key=lambda kv: int(kv[0])):
                state = znodes.LeaderIsrAndControllerEpoch(
                    znodes.LeaderAndIsr(int(s["leader"]), int(s["leader_epoch"]),
                                        tuple(s["isr"])),
                    int(s.get("controller_epoch", 1)))
                # the old record's version is the state znode's zkVersion (partition epoch)
                self._put(znodes.topic_partition_state_path(name, int(p)),
                          znodes.encode_partition_state(state), int(s.get("version", 0)))
        for entity, entry in doc.get("config", {}).get("brokers", {}).items():
            self._put(znodes.config_entity_path(znodes.CONFIG_TYPE_BROKER, entity),
                      znodes.encode_entity_config(entry.get("config", {})))
        next_id = int(doc.get("next_producer_id", 0))
        if next_id > 0:
            # only the next free id is known: a block ending right before it, owner unknown (-1)
            size = min(next_id, znodes.PRODUCER_ID_BLOCK_SIZE)
            self._put(znodes.PRODUCER_ID_BLOCK_PATH, znodes.encode_producer_id_block(
                znodes.ProducerIdsBlock(-1, next_id - size, size)), 1)
