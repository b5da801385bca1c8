"""Every metric the Prometheus endpoint exports: its name as exposed, labels, meaning, and the
Kafka JMX MBean it mirrors. docs/operations.md#metrics is this table; a test checks both ways.

The mapping is the Prometheus JMX exporter's usual Kafka rules (its example kafka config, with
lowercaseOutputName): ``kafka.<domain>:type=<Type>,name=<Name>PerSec[,k=v]`` becomes the counter
``kafka_<domain>_<type>_<name>_total{k="v"}``; a gauge ``...,name=<Name>`` becomes
``kafka_<domain>_<type>_<name>``; a histogram or timer becomes a summary
``kafka_<domain>_<type>_<name>{quantile="0.99"}`` with ``_count`` and ``_sum``. A metric Kafka has
per topic and for all topics is one name, with and without the ``topic`` label."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricName:
    name: str            # the family name; counters are exposed with "_total", summaries with
    kind: str            # "counter" | "gauge" | "summary"
    labels: tuple[str, ...]
    help: str
    jmx: str             # Kafka's MBean ("" where Kafka has none)

    @property
    def exposed(self) -> tuple[str, ...]:
        """The sample names a scrape shows for this family."""
        if self.kind == "counter":
            return (self.name + "_total",)
        if self.kind == "summary":
            return (self.name, self.name + "_count", self.name + "_sum")
        return (self.name,)


def _m(name: str, kind: str, labels: tuple[str, ...], help_: str, jmx: str) -> MetricName:
    return MetricName(name, kind, labels, help_, jmx)


BYTES_IN = _m("kafka_server_brokertopicmetrics_bytesin", "counter", ("topic",),
              "Bytes appended by leaders (client and coordinator batches as received); "
              "without topic: all topics",
              "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec[,topic=T]")
MESSAGES_IN = _m("kafka_server_brokertopicmetrics_messagesin", "counter", ("topic",),
                 "Records appended by leaders; without topic: all topics",
                 "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec[,topic=T]")
BYTES_OUT = _m("kafka_server_brokertopicmetrics_bytesout", "counter", ("topic",),
               "Record bytes in Fetch responses to consumers; without topic: all topics",
               "kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec[,topic=T]")
REPLICATION_BYTES_OUT = _m("kafka_server_brokertopicmetrics_replicationbytesout", "counter", (),
                           "Record bytes in Fetch responses to follower brokers",
                           "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesOutPerSec")
REQUESTS = _m("kafka_network_requestmetrics_requests", "counter", ("request", "version"),
              "Requests answered, by API name (Kafka's ApiKeys name) and version",
              "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=R,version=V")
TOTAL_TIME = _m("kafka_network_requestmetrics_totaltimems", "summary", ("request", "quantile"),
                "Milliseconds from a request's arrival to its response (long-poll waits included), "
                "quantiles over the latest 1024 requests of that API",
                "kafka.network:type=RequestMetrics,name=TotalTimeMs,request=R")
PURGATORY_SIZE = _m("kafka_server_delayedoperationpurgatory_purgatorysize", "gauge", ("delayedOperation",),
                    "Watch-list entries of a purgatory (Produce, Fetch, DeleteRecords, Heartbeat, Rebalance)",
                    "kafka.server:type=DelayedOperationPurgatory,name=PurgatorySize,delayedOperation=O")
NUM_DELAYED = _m("kafka_server_delayedoperationpurgatory_numdelayedoperations", "gauge", ("delayedOperation",),
                 "Operations waiting in a purgatory's timer",
                 "kafka.server:type=DelayedOperationPurgatory,name=NumDelayedOperations,delayedOperation=O")
UNDER_REPLICATED = _m("kafka_server_replicamanager_underreplicatedpartitions", "gauge", (),
                      "Partitions led here whose ISR is smaller than their replica set",
                      "kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions")
PARTITION_COUNT = _m("kafka_server_replicamanager_partitioncount", "gauge", (),
                     "Partitions hosted here (leaders and followers)",
                     "kafka.server:type=ReplicaManager,name=PartitionCount")
LEADER_COUNT = _m("kafka_server_replicamanager_leadercount", "gauge", (),
                  "Partitions led here", "kafka.server:type=ReplicaManager,name=LeaderCount")
ISR_SHRINKS = _m("kafka_server_replicamanager_isrshrinks", "counter", (),
                 "ISR shrinks of partitions led here, as accepted by the controller",
                 "kafka.server:type=ReplicaManager,name=IsrShrinksPerSec")
ISR_EXPANDS = _m("kafka_server_replicamanager_isrexpands", "counter", (),
                 "ISR expansions of partitions led here, as accepted by the controller",
                 "kafka.server:type=ReplicaManager,name=IsrExpandsPerSec")
ACTIVE_CONTROLLER = _m("kafka_controller_kafkacontroller_activecontrollercount", "gauge", (),
                       "1 on the broker that is the active controller, else 0",
                       "kafka.controller:type=KafkaController,name=ActiveControllerCount")
OFFLINE_PARTITIONS = _m("kafka_controller_kafkacontroller_offlinepartitionscount", "gauge", (),
                        "Partitions without a live leader (topics being deleted excluded); "
                        "0 unless this broker is the active controller",
                        "kafka.controller:type=KafkaController,name=OfflinePartitionsCount")
LOG_FLUSH = _m("kafka_log_logflushstats_logflushrateandtimems", "summary", ("quantile",),
               "Milliseconds per segment flush (fsync of the log and its indexes), "
               "quantiles over the latest 1024 flushes",
               "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs")
CONNECTIONS = _m("kafka_server_socket_server_metrics_connection_count", "gauge", ("listener",),
                 "Open client and broker connections per listener",
                 "kafka.server:type=socket-server-metrics,listener=L,networkProcessor=N connection-count")
EVENT_LOOP_LAG = _m("kafkalite_eventloop_lag_ms", "summary", ("quantile",),
                    "How late the event loop ran a 100 ms timer, quantiles over the latest 1024 samples "
                    "(about 100 s)", "")
EVENT_LOOP_LAG_MAX = _m("kafkalite_eventloop_lag_max_ms", "gauge", (),
                        "Largest event-loop lag among the latest 1024 samples", "")

ALL: tuple[MetricName, ...] = (
    BYTES_IN, MESSAGES_IN, BYTES_OUT, REPLICATION_BYTES_OUT, REQUESTS, TOTAL_TIME, PURGATORY_SIZE,
    NUM_DELAYED, UNDER_REPLICATED, PARTITION_COUNT, LEADER_COUNT, ISR_SHRINKS, ISR_EXPANDS,
    ACTIVE_CONTROLLER, OFFLINE_PARTITIONS, LOG_FLUSH, CONNECTIONS, EVENT_LOOP_LAG, EVENT_LOOP_LAG_MAX,
)
