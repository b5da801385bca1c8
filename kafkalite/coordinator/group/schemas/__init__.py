"""Layouts of the `__consumer_offsets` records, as JSON message specs in Apache Kafka's format.

kafka-python's JSON-driven codec (``kafka.protocol.api_data.ApiData``) builds encoders and
decoders from these files, the same way it builds its own ``ConsumerProtocolSubscription``. The
files describe the key and value layouts Kafka's group coordinator writes (its
``OffsetCommitKey``/``OffsetCommitValue``/``GroupMetadataKey``/``GroupMetadataValue``); they were
written for kafkalite from those layouts. Keys carry no version: the int16 in front of a key is
the record type, written by :mod:`kafkalite.coordinator.group.records`.
"""
