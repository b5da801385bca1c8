"""The znode store interface the controller and brokers write cluster metadata through.

Two implementations behind one interface: `KazooZNodeStore` (a real ZooKeeper ensemble, for
cluster mode) and `LocalZNodeStore` (an in-process tree, a snapshot and a transaction log, for the
embedded single-node mode). Everything is async and used on the asyncio loop; watch and
state callbacks always run on the loop.

Semantics are ZooKeeper's: versions count data changes, `cversion` counts child changes,
ephemeral nodes die with the session, sequential names end in a 10-digit zero-padded counter
kept by the parent, `multi` is all or nothing. Watches are persistent (unlike ZooKeeper's
one-shot watches): a registered callback fires on every change until `unwatch`, and once
more after a new session was established, so readers re-read what they may have missed.
"""
from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Sequence, Union

from kafkalite.slices import gather_in_slices


@dataclass(frozen=True)
class ZnStat:
    version: int
    cversion: int
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    ephemeral_owner: int
    num_children: int
    data_length: int


class StoreError(Exception):
    """Any failure of the znode store; the subclasses are ZooKeeper's error codes."""


class NoNodeError(StoreError):
    pass


class NodeExistsError(StoreError):
    pass


class BadVersionError(StoreError):
    pass


class NotEmptyError(StoreError):
    pass


class NoChildrenForEphemeralsError(StoreError):
    pass


class ConnectionLossError(StoreError):
    pass


class SessionExpiredError(StoreError):
    pass


@dataclass
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@dataclass
class SetDataOp:
    path: str
    data: bytes
    version: int = -1


@dataclass
class DeleteOp:
    path: str
    version: int = -1


@dataclass
class CheckOp:
    path: str
    version: int


Op = Union[CreateOp, SetDataOp, DeleteOp, CheckOp]
# multi() results, one per op in order: the created path (CreateOp), the new stat (SetDataOp),
# None (DeleteOp), True (CheckOp)
OpResult = Union[str, ZnStat, None, bool]


class MultiError(StoreError):
    """Raised by `multi` when an op failed. It is also an instance of the failing op's error
    class (see `multi_error`), so `except BadVersionError` works; `failed_index` is the index
    of the op that failed, `failed_op` that op (a CheckOp failure on /controller_epoch is how
    controller fencing is detected)."""

    failed_index: int
    failed_op: Op


def multi_error(cause: StoreError, index: int, op: Op) -> StoreError:
    """An error that is both a MultiError and of `cause`'s class, carrying the failing op."""
    cls = type(cause)
    combined = _MULTI_ERROR_CLASSES.get(cls)
    if combined is None:
        combined = type(f"Multi{cls.__name__}", (MultiError, cls), {})
        _MULTI_ERROR_CLASSES[cls] = combined
    err = combined(f"{cause} (op {index} of multi: {type(op).__name__} {op.path})")
    err.failed_index = index
    err.failed_op = op
    return err


_MULTI_ERROR_CLASSES: dict[type, type] = {}


class ZkState(enum.Enum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"        # connection lost, session may still be alive
    RECONNECTED = "RECONNECTED"    # connection back, same session
    EXPIRED = "EXPIRED"            # session gone with its ephemerals; a new session follows (CONNECTED)


def parent_path(path: str) -> str:
    idx = path.rstrip("/").rfind("/")
    if idx <= 0:
        return "/"
    return path[:idx]


def validate_path(path: str) -> None:
    if not path.startswith("/") or (len(path) > 1 and path.endswith("/")) or "//" in path:
        raise StoreError(f"Invalid path {path!r}")


def sequential_name(path: str, counter: int) -> str:
    """ZooKeeper's sequential node name: the requested path plus the parent's counter, 10 digits."""
    return f"{path}{counter:010d}"


class ZNodeStore(ABC):
    @abstractmethod
    async def start(self) -> None:
        """Connect (or load); raises StoreError with a one-line message when that fails."""

    @abstractmethod
    async def close(self) -> None:
        """End the session: ephemeral nodes go away, no callback runs afterwards."""

    @abstractmethod
    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, make_parents: bool = False) -> str:
        """Create a node; returns its path (with the sequence suffix for sequential nodes)."""

    @abstractmethod
    async def get(self, path: str) -> tuple[bytes, ZnStat]: ...

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnStat] | None]:
        """Data and stat of each path (None where there is no node), in order: the reads are
        pipelined, as Kafka's KafkaZkClient sends its batched GetDataRequests."""
        async def one(path: str) -> tuple[bytes, ZnStat] | None:
            try:
                return await self.get(path)
            except NoNodeError:
                return None
        return await gather_in_slices([one(p) for p in paths])

    @abstractmethod
    async def exists(self, path: str) -> ZnStat | None: ...

    @abstractmethod
    async def set(self, path: str, data: bytes, version: int = -1) -> ZnStat: ...

    @abstractmethod
    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None: ...

    @abstractmethod
    async def children(self, path: str) -> list[str]: ...

    @abstractmethod
    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        """All ops or none; on failure raises the failing op's error (also a MultiError)."""

    @abstractmethod
    def watch_data(self, path: str, callback: Callable[[], None]) -> None:
        """Persistent watch on the node: fires on its creation, data change and deletion."""

    @abstractmethod
    def watch_children(self, path: str, callback: Callable[[], None]) -> None:
        """Persistent watch on the node's children (also fires on its creation and deletion)."""

    @abstractmethod
    def unwatch(self, path: str) -> None:
        """Remove every watch registered on `path`."""

    @abstractmethod
    def add_state_listener(self, callback: Callable[[ZkState], None]) -> None: ...

    @property
    @abstractmethod
    def session_id(self) -> int: ...
