"""Broker metrics: Kafka's key broker metrics, counted in plain Python objects on the event loop
(``stats``) and served to Prometheus (``prometheus``) when ``kafkalite.metrics.prometheus.port``
is set. ``names`` lists every exported name with Kafka's JMX name (docs/operations.md#metrics).

This package is a leaf: it imports nothing from the rest of kafkalite, so the log, the replica
manager and the network layer can count into it without reaching upward."""
