"""DelayedOperation: a request parked until some condition holds or a timeout passes.

DelayedProduce waits for the ISR to acknowledge, DelayedFetch for ``fetch.min.bytes`` to
accumulate, DelayedJoin for the group's members. Either ``try_complete`` finds the condition met
and calls ``force_complete``, or the timer expires the operation. ``on_complete`` (which sends
the response) is called exactly once either way; on timeout ``on_expiration`` follows it, as in
Kafka.
"""
from __future__ import annotations

from abc import abstractmethod

from kafkalite.purgatory.timer_task import TimerTask


class DelayedOperation(TimerTask):
    __slots__ = ("_completed",)

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self._completed = False

    def force_complete(self) -> bool:
        """Complete now if nobody has: cancel the timeout, call ``on_complete``.

        True iff this call completed the operation (so at most one caller ever gets True).
        """
        if self._completed:
            return False
        # Mark first: on_complete may trigger check_and_complete on keys that watch this op.
        self._completed = True
        self.cancel()
        self.on_complete()
        return True

    @property
    def is_completed(self) -> bool:
        return self._completed

    @abstractmethod
    def try_complete(self) -> bool:
        """Check the completion condition; if met, return ``self.force_complete()``, else False."""

    @abstractmethod
    def on_complete(self) -> None:
        """The completion logic (build and send the response). Called exactly once."""

    @abstractmethod
    def on_expiration(self) -> None:
        """Called after ``on_complete`` when completion was forced by the timeout."""

    def run(self) -> None:
        # Timer expiry. force_complete loses the race if try_complete already won it.
        if self.force_complete():
            self.on_expiration()
