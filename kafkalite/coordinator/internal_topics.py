"""What the group and transaction coordinators need to know about creating their internal topics
(`__consumer_offsets`, `__transaction_state`) beyond the topic itself."""
from __future__ import annotations

from typing import Protocol, Sequence


class InternalTopicCreator(Protocol):
    """The coordinators' view of "the controller" (server.cluster_member.InternalTopics)."""

    # the embedded single broker (no zookeeper.connect): alone by construction
    alone: bool

    @property
    def live_brokers(self) -> Sequence[int]: ...


def internal_topic_replication_factor(configured: int, controller: InternalTopicCreator) -> int:
    """The replication factor an internal topic is created with.

    Kafka 3.9 (AutoTopicCreationManager.creatableTopic) asks for the configured factor as it is:
    with fewer live brokers the creation fails with INVALID_REPLICATION_FACTOR and FindCoordinator
    answers COORDINATOR_NOT_AVAILABLE until enough brokers are up. The embedded broker can never
    have more than itself, so it reduces the factor to the live brokers (a kafkalite departure,
    docs/compatibility.md)."""
    if controller.alone:
        return max(1, min(configured, len(controller.live_brokers)))
    return configured
