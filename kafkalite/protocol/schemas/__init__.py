"""JSON message specs, in Apache Kafka's message-spec format, for the APIs kafka-python does not
ship: the inter-broker (controller <-> broker) requests and responses. Loaded by
:mod:`kafkalite.protocol.inter_broker` through kafka-python's JSON-driven codec."""
