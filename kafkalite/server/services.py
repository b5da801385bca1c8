"""The managers a handler may use, gathered so handler modules take one argument."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from kafkalite.config.dynamic_broker_config import DynamicBrokerConfig
from kafkalite.config.server_config import KafkaConfig
from kafkalite.coordinator.group.group_coordinator import GroupCoordinator
from kafkalite.coordinator.group.group_metadata_manager import GroupMetadataManager
from kafkalite.coordinator.transaction.producer_id_manager import ProducerIdManager
from kafkalite.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from kafkalite.replica.replica_manager import ReplicaManager
from kafkalite.server.fetch_session import FetchSessionCache
from kafkalite.cluster.metadata_cache import MetadataCache


@dataclass
class BrokerServices:
    broker_id: int
    config: KafkaConfig
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    # what the coordinators ask about their internal topics (server.cluster_member.InternalTopics)
    controller: Any
    producer_id_manager: ProducerIdManager
    fetch_sessions: FetchSessionCache
    group_coordinator: GroupCoordinator
    group_metadata_manager: GroupMetadataManager
    transaction_coordinator: TransactionCoordinator
    # the broker's configuration as dynamic broker configs change it (`config` is the static one)
    dynamic_config: Optional[DynamicBrokerConfig] = None
    # CreateTopics & co: server.admin_manager.ZkAdminManager (over ZooKeeper or the local znode tree)
    admin_manager: Any = None
    # the controller (active or not), this broker's epoch, the config sync
    kafka_controller: Any = None
    broker_epoch: Any = None
    config_manager: Any = None
    # transaction verification with another broker's coordinator (server.add_partitions_to_txn_manager);
    # None: only the local coordinator is asked
    add_partitions_to_txn_manager: Any = None

    def topic_log_config(self, topic: str) -> Any:
        """The LogConfig of `topic` (its overrides over the broker defaults) for LeaderAndIsr."""
        return self.config_manager.topic_log_config(topic)

    @property
    def live_config(self) -> Any:
        """The current broker config (dynamic configs applied), read at each attribute access."""
        return self.dynamic_config.live() if self.dynamic_config is not None else self.config
