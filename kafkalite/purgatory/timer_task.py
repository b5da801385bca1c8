"""Timer tasks and the bucket lists of the timing wheel (Kafka's TimerTask / TimerTaskEntry /
TimerTaskList).

A ``TimerTask`` is what callers schedule. The timer wraps it in a ``TimerTaskEntry`` (the node of
a doubly linked list) and links the entry into a ``TimerTaskList`` (one bucket of a wheel).
Insert and remove are O(1): the list is circular with a sentinel root, so there are no head/tail
special cases. A task knows its current entry, which is how ``cancel()`` unlinks it in O(1) and
how re-adding a task supersedes its old entry.

Everything here runs on one thread (the asyncio loop), so unlike Kafka there are no locks.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, Iterator


class TaskCounter:
    """Number of entries linked into any bucket of one timer (Kafka's shared AtomicInteger)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def __repr__(self) -> str:
        return f"TaskCounter({self.value})"


class TimerTask(ABC):
    """Something to run once ``delay_ms`` after it is added to a timer, unless cancelled first."""

    __slots__ = ("delay_ms", "_entry")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._entry: TimerTaskEntry | None = None

    @abstractmethod
    def run(self) -> None:
        """Called on the event loop when the task expires."""

    def cancel(self) -> None:
        """Unlink the task from its bucket (O(1)); it will not run. Idempotent."""
        entry = self._entry
        if entry is not None:
            entry.remove()
            self._entry = None

    def _set_entry(self, entry: TimerTaskEntry) -> None:
        # A task lives in at most one bucket: a newer entry supersedes (and unlinks) the old one.
        old = self._entry
        if old is not None and old is not entry:
            old.remove()
        self._entry = entry


class TimerTaskEntry:
    """A node of a TimerTaskList, carrying a task and its absolute expiration (ms)."""

    __slots__ = ("task", "expiration_ms", "list", "next", "prev")

    def __init__(self, task: TimerTask | None, expiration_ms: int) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        self.next: TimerTaskEntry | None = None
        self.prev: TimerTaskEntry | None = None
        if task is not None:
            task._set_entry(self)

    def cancelled(self) -> bool:
        # The task was cancelled, or re-added to a timer (which made a newer entry).
        return self.task is None or self.task._entry is not self

    def remove(self) -> None:
        lst = self.list
        if lst is not None:
            lst.remove(self)

    def __repr__(self) -> str:
        return f"TimerTaskEntry(expiration_ms={self.expiration_ms}, task={self.task!r})"


class TimerTaskList:
    """One bucket: a circular doubly linked list of entries with a sentinel root.

    ``expiration`` is the start of the time slot the bucket currently stands for (-1 when it
    holds nothing scheduled); it changes only when the wheel reuses the bucket for a later slot.
    """

    __slots__ = ("_counter", "expiration", "_root")

    def __init__(self, task_counter: TaskCounter) -> None:
        self._counter = task_counter
        self.expiration = -1
        root = TimerTaskEntry(None, -1)
        root.next = root
        root.prev = root
        self._root = root

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the slot time; True iff it changed (the bucket must then be queued again)."""
        changed = self.expiration != expiration_ms
        self.expiration = expiration_ms
        return changed

    def add(self, entry: TimerTaskEntry) -> None:
        """Append ``entry`` at the tail, unlinking it from any list it is in first."""
        if entry.list is not None:
            entry.list.remove(entry)
        root = self._root
        tail = root.prev
        assert tail is not None
        entry.next = root
        entry.prev = tail
        entry.list = self
        tail.next = entry
        root.prev = entry
        self._counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        if entry.list is self:
            nxt, prv = entry.next, entry.prev
            assert nxt is not None and prv is not None
            nxt.prev = prv
            prv.next = nxt
            entry.next = None
            entry.prev = None
            entry.list = None
            self._counter.value -= 1

    def flush(self, fn: Callable[[TimerTaskEntry], None]) -> None:
        """Unlink every entry and hand it to ``fn`` (which re-inserts or runs it).

        Re-reads the head each time, so ``fn`` may cancel other entries of this list.
        """
        root = self._root
        head = root.next
        while head is not root:
            assert head is not None
            self.remove(head)
            fn(head)
            head = root.next
        self.expiration = -1

    def is_empty(self) -> bool:
        return self._root.next is self._root

    def __iter__(self) -> Iterator[TimerTaskEntry]:
        """Entries in insertion order (a snapshot-free walk: do not mutate while iterating)."""
        root = self._root
        entry = root.next
        while entry is not root:
            assert entry is not None
            yield entry
            entry = entry.next

    def count(self) -> int:
        """O(n); for tests and debugging. The timer's TaskCounter is the O(1) total."""
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"TimerTaskList(expiration={self.expiration})"
