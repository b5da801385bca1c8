"""DelayedOperationPurgatory: delayed operations watched by key and expired by a timer.

An operation is watched under every key whose change could complete it (a DelayedProduce under
its partitions, a DelayedJoin under its group). ``check_and_complete(key)`` is called when
something about ``key`` changes (the high watermark moved, a member joined) and tries the
operations watched there. The timer completes whatever is still waiting at its deadline.

An operation watched under several keys stays in the other keys' lists after it completes
through one of them, or after it expires. Those stale entries are dropped when their key is
next checked, and by a full purge once about ``purge_interval`` operations have completed
since the last one (Kafka triggers the same purge from its expiration reaper; here it runs on
the watch path, which is the only path that grows the lists).

Single-threaded (asyncio loop), so no locks; the two-phase try / watch / try of Kafka is kept
because ``try_complete`` may itself trigger completions of other operations.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from kafkalite.purgatory.delayed_operation import DelayedOperation
from kafkalite.purgatory.system_timer import SystemTimer

T = TypeVar("T", bound=DelayedOperation)


class _Watchers(Generic[T]):
    """The operations watched under one key, in watch order."""

    __slots__ = ("key", "ops")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.ops: list[T] = []


class DelayedOperationPurgatory(Generic[T]):
    def __init__(
        self,
        name: str,
        timer: SystemTimer | None = None,
        purge_interval: int = 1000,
        *,
        timer_enabled: bool = True,
    ) -> None:
        """``timer``: the purgatory's own timer (created if None). As in Kafka each purgatory
        owns one: ``delayed`` is the timer's size and ``shutdown`` shuts it down."""
        self.name = name
        self.timer = timer if timer is not None else SystemTimer(name)
        self.purge_interval = purge_interval
        self.timer_enabled = timer_enabled
        self._watchers: dict[Hashable, _Watchers[T]] = {}
        # Operations watched since the last purge plus those still pending then; minus
        # ``delayed`` it estimates the completed operations still sitting in watch lists.
        self._estimated_total = 0

    # -- public API ---------------------------------------------------------------------------

    def try_complete_else_watch(self, operation: T, watch_keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can be; else watch it under every key and start its
        timeout. True iff completed by this call.

        After watching, ``try_complete`` runs once more: a change between the first try and the
        watch would otherwise never be noticed (its check_and_complete found nothing to try).
        """
        if operation.try_complete():
            return True
        watched = False
        for key in watch_keys:
            # Completed meanwhile (a side effect of try_complete): stop adding watches.
            if operation.is_completed:
                break
            self._watch(key, operation)
            watched = True
        if watched:
            self._estimated_total += 1
        if operation.is_completed:
            completed_by_me = False
        elif operation.try_complete():
            completed_by_me = True
        else:
            completed_by_me = False
            if self.timer_enabled:
                # Single-threaded: nothing can complete the operation between the check
                # above and this add (an already-due timeout runs on a later loop iteration).
                self.timer.add(operation)
        if watched:
            self._maybe_purge()
        return completed_by_me

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete the operations watched under ``key``; returns how many completed."""
        watchers = self._watchers.get(key)
        if watchers is None:
            return 0
        completed_now = 0
        saw_completed = False
        # Iterate the live list: operations watched re-entrantly (from on_complete) are
        # appended and tried too; a re-entrant purge swaps in a new list and this loop
        # finishes the old one.
        for op in watchers.ops:
            if op.is_completed:
                saw_completed = True
            elif op.try_complete():
                completed_now += 1
                saw_completed = True
        if saw_completed:
            self._purge_watchers(watchers)
        return completed_now

    def cancel_for_key(self, key: Hashable) -> list[T]:
        """Stop watching ``key``: drop its watch list and cancel the timeouts of its pending
        operations, which are returned. They are NOT completed (Kafka's cancelForKey).
        Operations also watched under other keys can still complete through those."""
        watchers = self._watchers.pop(key, None)
        if watchers is None:
            return []
        cancelled: list[T] = []
        for op in watchers.ops:
            if not op.is_completed:
                op.cancel()
                cancelled.append(op)
        watchers.ops = []
        return cancelled

    @property
    def watched(self) -> int:
        """Entries in all watch lists. An operation counts once per key, and completed ones
        count until purged, so this can exceed the number of waiting operations."""
        return sum(len(w.ops) for w in self._watchers.values())

    @property
    def delayed(self) -> int:
        """Operations waiting in the timer."""
        return self.timer.size

    @property
    def num_keys(self) -> int:
        """Keys with a watch list (empty lists are removed)."""
        return len(self._watchers)

    def watched_for_key(self, key: Hashable) -> int:
        watchers = self._watchers.get(key)
        return 0 if watchers is None else len(watchers.ops)

    def purge_completed(self) -> int:
        """Drop completed operations from every watch list; returns how many entries went."""
        self._estimated_total = self.delayed
        purged = 0
        for watchers in list(self._watchers.values()):
            purged += self._purge_watchers(watchers)
        return purged

    def shutdown(self) -> None:
        """Stop the timer. Waiting operations are neither completed nor expired."""
        self.timer.shutdown()

    # -- internals ----------------------------------------------------------------------------

    def _watch(self, key: Hashable, operation: T) -> None:
        watchers = self._watchers.get(key)
        if watchers is None:
            watchers = self._watchers[key] = _Watchers(key)
        watchers.ops.append(operation)

    def _purge_watchers(self, watchers: _Watchers[T]) -> int:
        before = len(watchers.ops)
        watchers.ops = [op for op in watchers.ops if not op.is_completed]
        if not watchers.ops and self._watchers.get(watchers.key) is watchers:
            del self._watchers[watchers.key]
        return before - len(watchers.ops)

    def _maybe_purge(self) -> None:
        # Amortised: a full purge costs O(watched) and runs once per ~purge_interval
        # completions, so watch lists stay bounded without a reaper task.
        if self._estimated_total - self.delayed > self.purge_interval:
            self.purge_completed()

    def __repr__(self) -> str:
        return (
            f"DelayedOperationPurgatory({self.name!r}, watched={self.watched}, "
            f"delayed={self.delayed})"
        )
