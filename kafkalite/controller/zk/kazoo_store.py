"""The ZNodeStore over a real ZooKeeper ensemble, through kazoo with its threading handler.

kazoo runs its connection in a thread of its own; every request here goes through kazoo's
non-blocking `*_async` methods and its result comes back to the asyncio loop with
`call_soon_threadsafe`, so nothing blocks the loop. Watch and state callbacks are posted to the
loop the same way.

Connection handling follows Kafka's ZooKeeperClient: requests failing with a connection loss
are retried once the connection is back (for at most a session timeout); a session expiry is
reported as EXPIRED, kazoo then opens a new session (CONNECTED), on which every watch is
registered again and fired once, so readers re-read what they may have missed. Watches are
persistent: ZooKeeper's one-shot watches re-armed on each trigger, before the callback runs
(a change after the trigger fires them again; the callback's read sees anything before).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.protocol.states import WatchedEvent

from kafkalite.controller.zk.znode_store import (BadVersionError, CheckOp, ConnectionLossError,
                                                 CreateOp, DeleteOp,
                                                 NoChildrenForEphemeralsError, NodeExistsError,
                                                 NoNodeError, NotEmptyError, Op, OpResult,
                                                 SessionExpiredError, SetDataOp, StoreError,
                                                 ZkState, ZNodeStore, ZnStat, multi_error,
                                                 validate_path)

log = logging.getLogger(__name__)


def split_connect_string(connect: str) -> tuple[str, str]:
    """"h1:p1,h2:p2/chroot/path" -> ("h1:p1,h2:p2", "/chroot/path") ("" without a chroot)."""
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    hosts, chroot = connect[:slash], connect[slash:].rstrip("/")
    if chroot:
        validate_path(chroot)
    return hosts, chroot


def _node_data(data: bytes) -> Optional[bytes]:
    """What a create sends: Kafka creates every node that has nothing to say (its persistent
    paths, containers, a topic's partitions nodes, the ephemeral registration before its data is
    set) with null data, not an empty array; ZooKeeper keeps the difference and other clients
    read None. So a create without data is a null create here too (reads give b"" either way)."""
    return bytes(data) if data else None


def _ensure_path_without_data(client: KazooClient, path: str) -> None:
    """The chroot and its ancestors, created as Kafka's makeSurePersistentPathExists does (null
    data); blocking, used only while starting."""
    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        try:
            client.create("/" + "/".join(parts[:i]), None)
        except kz.NodeExistsError:
            pass


_ERRORS: list[tuple[type, type]] = [
    (kz.NoNodeError, NoNodeError),
    (kz.NodeExistsError, NodeExistsError),
    (kz.BadVersionError, BadVersionError),
    (kz.NotEmptyError, NotEmptyError),
    (kz.NoChildrenForEphemeralsError, NoChildrenForEphemeralsError),
    (kz.SessionExpiredError, SessionExpiredError),
    (kz.ConnectionClosedError, SessionExpiredError),
    (kz.ConnectionLoss, ConnectionLossError),
    (kz.OperationTimeoutError, ConnectionLossError),
]


def _retries_at_debug(record: logging.LogRecord) -> bool:
    """A logging filter: kazoo's warnings become DEBUG records (shown only at DEBUG)."""
    if record.levelno < logging.ERROR:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)
    return True


def _store_error(e: BaseException, path: str = "") -> StoreError:
    if isinstance(e, StoreError):
        return e
    for kazoo_cls, ours in _ERRORS:
        if isinstance(e, kazoo_cls):
            return ours(f"{type(e).__name__} for {path}" if path else type(e).__name__)
    return StoreError(f"{type(e).__name__} for {path}: {e}")


def _stat(s: Any) -> ZnStat:
    return ZnStat(version=s.version, cversion=s.cversion, czxid=s.czxid, mzxid=s.mzxid,
                  ctime=s.ctime, mtime=s.mtime, ephemeral_owner=s.ephemeralOwner,
                  num_children=s.numChildren, data_length=s.dataLength)


@dataclass
class _Watch:
    path: str
    children: bool
    callbacks: list[Callable[[], None]] = field(default_factory=list)
    active: bool = True
    # one function per watch, so kazoo (which keeps watchers in a set) never holds duplicates
    handler: Optional[Callable[[WatchedEvent], None]] = None


class KazooZNodeStore(ZNodeStore):
    def __init__(self, connect: str, session_timeout_ms: int = 18000,
                 connection_timeout_ms: int = 18000, max_in_flight: int = 10) -> None:
        self.connect = connect
        self.hosts, self.chroot = split_connect_string(connect)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.max_in_flight = max(1, max_in_flight)
        self._client: Optional[KazooClient] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._in_flight: Optional[asyncio.Semaphore] = None
        self._connected: Optional[asyncio.Event] = None
        self._session_id = 0
        self._session_lost = False          # kazoo thread: LOST seen, next CONNECTED is a new session
        self._closing = False
        self._lock = threading.Lock()       # guards _watches (loop thread and kazoo thread)
        self._watches: dict[tuple[str, bool], _Watch] = {}
        self._state_listeners: list[Callable[[ZkState], None]] = []

    # ---- lifecycle -------------------------------------------------------------------------

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def session_credentials(self) -> tuple[int, bytes]:
        """(session id, session password) of the current session: another client that connects
        with them and closes ends this session (how tests expire a session on purpose)."""
        client = self._client
        if client is None or client.client_id is None:
            raise StoreError("Not connected to ZooKeeper")
        session_id, password = client.client_id
        return session_id, password

    def _new_client(self, hosts: str) -> KazooClient:
        return KazooClient(
            hosts=hosts, timeout=self.session_timeout_ms / 1000.0,
            handler=SequentialThreadingHandler(),
            # reconnect forever, promptly: session expiry is for ZooKeeper to decide
            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0},
            logger=logging.getLogger("kazoo.client"))

    def _start_blocking(self) -> KazooClient:
        # kazoo warns at every failed attempt ("Connection dropped: ... Connection refused"):
        # while the first connection is made they are retries, told at DEBUG; the failure is
        # told once, in the StoreError below
        kazoo_log = logging.getLogger("kazoo.client")
        kazoo_log.addFilter(_retries_at_debug)
        try:
            return self._connect_first()
        finally:
            kazoo_log.removeFilter(_retries_at_debug)

    def _connect_first(self) -> KazooClient:
        timeout = self.connection_timeout_ms / 1000.0
        failure = (f"Timed out waiting for connection to ZooKeeper at {self.connect} "
                   f"after {self.connection_timeout_ms} ms")
        deadline = time.monotonic() + timeout
        if self.chroot:
            # as Kafka does: create the chroot path first, over a connection without it
            admin = self._new_client(self.hosts)
            try:
                admin.start(timeout=timeout)
            except Exception:
                raise StoreError(failure) from None
            try:
                _ensure_path_without_data(admin, self.chroot)
            except Exception as e:
                raise StoreError(f"Cannot create the chroot {self.chroot} in ZooKeeper at "
                                 f"{self.hosts}: {_store_error(e, self.chroot)}") from None
            finally:
                admin.stop()
                admin.close()
        client = self._new_client(self.hosts + self.chroot)
        client.add_listener(self._on_kazoo_state)
        try:
            client.start(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:
            raise StoreError(failure) from None
        return client

    async def start(self) -> None:
        if self._client is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._in_flight = asyncio.Semaphore(self.max_in_flight)
        self._connected = asyncio.Event()
        self._client = await asyncio.to_thread(self._start_blocking)
        self._session_id = self._client.client_id[0]
        self._connected.set()
        log.info("Connected to ZooKeeper at %s, session 0x%x", self.connect, self._session_id)
        for listener in list(self._state_listeners):
            self._loop.call_soon(listener, ZkState.CONNECTED)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        self._closing = True
        with self._lock:
            for w in self._watches.values():
                w.active = False
            self._watches.clear()

        def stop() -> None:
            client.stop()
            client.close()
        await asyncio.to_thread(stop)

    # ---- kazoo thread -> loop --------------------------------------------------------------

    def _post(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:        # loop closed meanwhile
            pass

    def _notify_state(self, state: ZkState) -> None:
        # runs on the loop
        if self._closing:
            return
        assert self._connected is not None
        if state in (ZkState.CONNECTED, ZkState.RECONNECTED):
            self._connected.set()
        else:
            self._connected.clear()
        for listener in list(self._state_listeners):
            try:
                listener(state)
            except Exception:
                log.exception("ZooKeeper state listener failed on %s", state)

    def _on_kazoo_state(self, state: str) -> None:
        # kazoo's connection thread: must not block. Before start() has returned, start()
        # itself reports the first session.
        if self._closing or not self._session_id:
            return
        if state == KazooState.SUSPENDED:
            self._post(self._notify_state, ZkState.SUSPENDED)
        elif state == KazooState.LOST:
            self._session_lost = True
            self._post(self._notify_state, ZkState.EXPIRED)
        elif state == KazooState.CONNECTED:
            client = self._client
            session = client.client_id[0] if client is not None and client.client_id else 0
            if self._session_lost or (self._session_id and session != self._session_id):
                self._session_lost = False
                self._session_id = session
                log.info("New ZooKeeper session 0x%x after expiry", session)
                self._post(self._notify_state, ZkState.CONNECTED)
                # watches died with the old session: arm them on the new one, then fire once
                with self._lock:
                    watches = [w for w in self._watches.values() if w.active]
                for w in watches:
                    self._arm(w)
                for w in watches:
                    self._deliver(w)
            else:
                self._post(self._notify_state, ZkState.RECONNECTED)

    # ---- requests --------------------------------------------------------------------------

    def _bridge(self, async_result: Any) -> "asyncio.Future[Any]":
        assert self._loop is not None
        fut: asyncio.Future[Any] = self._loop.create_future()

        def settle(value: Any, error: Optional[BaseException]) -> None:
            if fut.done():
                return
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(value)

        def done(ar: Any) -> None:
            if ar.successful():
                self._post(settle, ar.value, None)
            else:
                self._post(settle, None, ar.exception)
        async_result.rawlink(done)
        return fut

    async def _call(self, path: str, make: Callable[[KazooClient], Any]) -> Any:
        """One request; after a connection loss, wait for the connection and retry (as Kafka's
        retryRequestsUntilConnected), for at most a session timeout."""
        deadline = time.monotonic() + self.session_timeout_ms / 1000.0
        assert self._in_flight is not None and self._connected is not None
        while True:
            client = self._client
            if client is None:
                raise SessionExpiredError(f"The ZooKeeper client is closed ({path})")
            try:
                async with self._in_flight:
                    return await self._bridge(make(client))
            except (kz.ConnectionLoss, kz.OperationTimeoutError) as e:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closing:
                    raise _store_error(e, path) from None
                try:
                    await asyncio.wait_for(self._connected.wait(), remaining)
                except asyncio.TimeoutError:
                    raise ConnectionLossError(f"ConnectionLoss for {path}: no connection to "
                                              f"ZooKeeper at {self.connect}") from None
                if not self._connected.is_set():
                    await asyncio.sleep(0.05)
            except kz.KazooException as e:
                raise _store_error(e, path) from None

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, make_parents: bool = False) -> str:
        validate_path(path)
        value = _node_data(data)

        def make(c: KazooClient) -> Any:
            return c.create_async(path, value, ephemeral=ephemeral, sequence=sequential)
        try:
            return await self._call(path, make)
        except NoNodeError:
            if not make_parents:
                raise
        # Kafka's createRecursive: the missing ancestors without data (kazoo's makepath would
        # give them empty data), then the node itself again
        parent = path[:path.rindex("/")]
        for i in range(1, parent.count("/") + 1):
            ancestor = "/".join(parent.split("/")[:i + 1])
            try:
                await self._call(ancestor, lambda c, a=ancestor: c.create_async(a, None))
            except NodeExistsError:
                pass
        return await self._call(path, make)

    async def get(self, path: str) -> tuple[bytes, ZnStat]:
        validate_path(path)
        data, stat = await self._call(path, lambda c: c.get_async(path))
        return (data or b""), _stat(stat)

    async def exists(self, path: str) -> Optional[ZnStat]:
        validate_path(path)
        stat = await self._call(path, lambda c: c.exists_async(path))
        return None if stat is None else _stat(stat)

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnStat:
        validate_path(path)
        return _stat(await self._call(path, lambda c: c.set_async(path, bytes(data), version)))

    async def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        validate_path(path)
        if recursive:
            try:
                kids = await self.children(path)
            except NoNodeError:
                kids = []
            for kid in kids:
                try:
                    await self.delete(f"{path.rstrip('/')}/{kid}", recursive=True)
                except NoNodeError:
                    pass
        await self._call(path, lambda c: c.delete_async(path, version))

    async def children(self, path: str) -> list[str]:
        validate_path(path)
        return list(await self._call(path, lambda c: c.get_children_async(path)))

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        def make(client: KazooClient) -> Any:
            tx = client.transaction()
            for op in ops:
                validate_path(op.path)
                if isinstance(op, CreateOp):
                    tx.create(op.path, bytes(op.data), ephemeral=op.ephemeral, sequence=op.sequential)
                    if _node_data(op.data) is None:   # kazoo's transactions only take bytes
                        tx.operations[-1] = tx.operations[-1]._replace(data=None)
                elif isinstance(op, SetDataOp):
                    tx.set_data(op.path, bytes(op.data), op.version)
                elif isinstance(op, DeleteOp):
                    tx.delete(op.path, op.version)
                elif isinstance(op, CheckOp):
                    tx.check(op.path, op.version)
                else:
                    raise StoreError(f"Unknown op {op!r}")
            return tx.commit_async()
        raw = await self._call(ops[0].path if ops else "/", make)
        failure = next(((i, r) for i, r in enumerate(raw)
                        if isinstance(r, Exception) and not isinstance(
                            r, (kz.RolledBackError, kz.RuntimeInconsistency))), None)
        if failure is None and any(isinstance(r, Exception) for r in raw):
            failure = next((i, r) for i, r in enumerate(raw) if isinstance(r, Exception))
        if failure is not None:
            index, error = failure
            raise multi_error(_store_error(error, ops[index].path), index, ops[index])
        results: list[OpResult] = []
        for op, r in zip(ops, raw):
            if isinstance(op, CreateOp):
                results.append(self._unchroot(r))
            elif isinstance(op, SetDataOp):
                results.append(_stat(r))
            elif isinstance(op, DeleteOp):
                results.append(None)
            else:
                results.append(True)
        return results

    def _unchroot(self, path: str) -> str:
        if self.chroot and path.startswith(self.chroot + "/"):
            return path[len(self.chroot):]
        return path

    # ---- watches ---------------------------------------------------------------------------

    def watch_data(self, path: str, callback: Callable[[], None]) -> None:
        self._add_watch(path, False, callback)

    def watch_children(self, path: str, callback: Callable[[], None]) -> None:
        self._add_watch(path, True, callback)

    def _add_watch(self, path: str, children: bool, callback: Callable[[], None]) -> None:
        validate_path(path)
        with self._lock:
            w = self._watches.get((path, children))
            if w is not None:
                w.callbacks.append(callback)
                return
            w = self._watches[(path, children)] = _Watch(path, children, [callback])
        self._arm(w)

    def unwatch(self, path: str) -> None:
        with self._lock:
            for key in ((path, False), (path, True)):
                w = self._watches.pop(key, None)
                if w is not None:
                    w.active = False

    def add_state_listener(self, callback: Callable[[ZkState], None]) -> None:
        self._state_listeners.append(callback)

    def _deliver(self, w: _Watch) -> None:
        if not w.active:
            return
        for cb in list(w.callbacks):
            self._post(self._run_callback, w, cb)

    @staticmethod
    def _run_callback(w: _Watch, cb: Callable[[], None]) -> None:
        if w.active:
            try:
                cb()
            except Exception:
                log.exception("ZooKeeper watch callback for %s failed", w.path)

    def _arm(self, w: _Watch) -> None:
        """Register the one-shot ZooKeeper watch behind `w` (any thread; never blocks)."""
        client = self._client
        if client is None or not w.active:
            return

        if w.handler is None:
            def on_event(event: WatchedEvent) -> None:
                # kazoo thread: re-arm first, so no change after this one goes unnoticed
                if w.active and not self._closing:
                    self._arm(w)
                    self._deliver(w)
            w.handler = on_event
        on_event = w.handler

        try:
            if not w.children:
                # exists() watches creation, data changes and deletion alike
                client.exists_async(w.path, watch=on_event)
                return
            result = client.get_children_async(w.path, watch=on_event)
        except kz.KazooException:
            return      # not connected: armed again with the next session

        def children_done(ar: Any) -> None:
            if ar.successful() or not isinstance(ar.exception, kz.NoNodeError):
                return
            # no node yet: watch for its creation, then watch its children
            try:
                exists = client.exists_async(w.path, watch=on_event)
            except kz.KazooException:
                return
            # created meanwhile: watch its children after all
            exists.rawlink(lambda er: self._arm(w) if er.successful() and er.value is not None
                           else None)
        result.rawlink(children_done)
