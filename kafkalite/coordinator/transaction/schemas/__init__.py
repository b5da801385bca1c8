"""Layouts of the `__transaction_state` records, as JSON message specs in Apache Kafka's format
(Kafka's TransactionLogKey / TransactionLogValue), read by kafka-python's JSON-driven codec.
The int16 in front of a key (the coordinator record type, 0) and in front of a value (its
version) is written by :mod:`kafkalite.coordinator.transaction.transaction_log`."""
