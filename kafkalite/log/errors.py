"""Errors raised by the log layer, one class per Kafka error code.

Every class carries ``error_code`` (the value from Apache Kafka's ``Errors``) so a handler can
answer with it directly, without a translation table. Codes are plain ints on purpose: the log
layer does not depend on the protocol package.
"""
from __future__ import annotations


class LogError(Exception):
    """Base of all log-layer errors. ``error_code`` -1 is UNKNOWN_SERVER_ERROR."""

    error_code: int = -1

    def __init__(self, message: str = "", *,
                 record_errors: list[tuple[int, str | None]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        # Kafka's per-record errors (batch_index, message) for INVALID_RECORD / INVALID_TIMESTAMP,
        # returned to the producer in ProduceResponse.record_errors.
        self.record_errors: list[tuple[int, str | None]] = record_errors or []


class OffsetOutOfRangeError(LogError):
    error_code = 1          # OFFSET_OUT_OF_RANGE


class CorruptRecordError(LogError):
    error_code = 2          # CORRUPT_MESSAGE


class DecompressionError(LogError):
    """A compressed batch whose records cannot be decompressed (a corrupt stream, or a codec
    library that is missing). Kafka's record iterator throws a plain KafkaException("Failed to
    decompress record stream") here, which no validation step catches: the append fails with
    UNKNOWN_SERVER_ERROR and ReplicaManager logs it at ERROR naming the partition."""
    error_code = -1         # UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, codec: str) -> None:
        super().__init__(message)
        self.codec = codec


class RecordTooLargeError(LogError):
    error_code = 10         # MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(LogError):
    """The whole append is larger than ``segment.bytes`` (Kafka's RecordBatchTooLargeException)."""
    error_code = 18         # RECORD_LIST_TOO_LARGE


class InvalidTimestampError(LogError):
    error_code = 32         # INVALID_TIMESTAMP


class UnsupportedForMessageFormatError(LogError):
    error_code = 43         # UNSUPPORTED_FOR_MESSAGE_FORMAT


class OutOfOrderSequenceError(LogError):
    error_code = 45         # OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(LogError):
    """Not raised by appends (a duplicate is answered with the original offsets); kept for
    completeness of the mapping."""
    error_code = 46         # DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    error_code = 47         # INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(LogError):
    """A produce that breaks the transaction rules (Kafka's InvalidTxnStateException), e.g. a
    non-transactional batch from a producer whose transaction is still open."""
    error_code = 48         # INVALID_TXN_STATE


class TransactionCoordinatorFencedError(LogError):
    """A transaction marker from a coordinator epoch older than the last one seen for the
    producer (Kafka's TransactionCoordinatorFencedException)."""
    error_code = 52         # TRANSACTION_COORDINATOR_FENCED


class KafkaStorageError(LogError):
    """An I/O error on the log directory (disk full, file vanished...)."""
    error_code = 56         # KAFKA_STORAGE_ERROR


class UnknownProducerIdError(LogError):
    """Brokers since Kafka 2.5 no longer raise this for appends (an unknown producer is accepted
    with any sequence); kept for the code mapping."""
    error_code = 59         # UNKNOWN_PRODUCER_ID


class UnsupportedCompressionTypeError(LogError):
    error_code = 76         # UNSUPPORTED_COMPRESSION_TYPE


class InvalidRecordError(LogError):
    error_code = 87         # INVALID_RECORD


class CorruptIndexError(LogError):
    """An index file failed its sanity check; the segment rebuilds it (never sent to clients)."""
    error_code = -1


class LogSegmentOffsetOverflowError(LogError):
    """An offset does not fit the segment's 32-bit relative offsets (Kafka's
    LogSegmentOffsetOverflowException)."""
    error_code = -1


class InconsistentTopicIdError(LogError):
    """The partition directory belongs to a topic with another id (deleted and re-created)."""
    error_code = 103        # INCONSISTENT_TOPIC_ID


class OffsetsOutOfOrderError(LogError):
    """A replicated append whose offsets do not increase (Kafka's OffsetsOutOfOrderException)."""
    error_code = -1


class UnexpectedAppendOffsetError(LogError):
    """A replicated append starting below the log end offset (Kafka's
    UnexpectedAppendOffsetException)."""
    error_code = -1

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset
