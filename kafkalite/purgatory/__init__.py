"""Purgatory: Kafka's hierarchical timing wheel and the delayed operations it expires.

``SystemTimer`` drives a ``TimingWheel`` (tick 1 ms, 20 buckets, overflow wheels on demand)
from a single asyncio timer handle; ``DelayedOperationPurgatory`` parks ``DelayedOperation``s
(DelayedProduce, DelayedFetch, DelayedJoin, ...) under the keys that can complete them.
"""
from kafkalite.purgatory.delayed_operation import DelayedOperation
from kafkalite.purgatory.delayed_operation_purgatory import DelayedOperationPurgatory
from kafkalite.purgatory.system_timer import SystemTimer, monotonic_ms
from kafkalite.purgatory.timer_task import TaskCounter, TimerTask, TimerTaskEntry, TimerTaskList
from kafkalite.purgatory.timing_wheel import BucketQueue, TimingWheel

__all__ = [
    "BucketQueue",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "SystemTimer",
    "TaskCounter",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "monotonic_ms",
]
