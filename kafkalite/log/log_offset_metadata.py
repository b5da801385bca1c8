"""LogOffsetMetadata: an offset with where it lies in the log (Kafka's class of that name).

A waiting fetch keeps the position it read up to and compares it with the position of the
offset it may read to (log end, high watermark or last stable offset): bytes between two
positions in one segment are the bytes that became available, without reading the log.
"""
from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1
UNKNOWN_FILE_POSITION = -1


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    message_offset: int
    # base offset of the segment holding the offset, and the byte position of its batch there
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = UNKNOWN_FILE_POSITION

    @property
    def message_offset_only(self) -> bool:
        """Only the offset is known (Kafka converts such metadata lazily, when it is needed)."""
        return self.segment_base_offset == UNKNOWN_OFFSET \
            and self.relative_position_in_segment == UNKNOWN_FILE_POSITION

    def on_older_segment(self, that: LogOffsetMetadata) -> bool:
        if self.message_offset_only or that.message_offset_only:
            raise ValueError(f"{self} cannot compare its segment with {that}")
        return self.segment_base_offset < that.segment_base_offset

    def on_same_segment(self, that: LogOffsetMetadata) -> bool:
        if self.message_offset_only or that.message_offset_only:
            return False
        return self.segment_base_offset == that.segment_base_offset

    def position_diff(self, that: LogOffsetMetadata) -> int:
        """Bytes from ``that`` up to this position: both must lie in the same segment."""
        if not self.on_same_segment(that):
            raise ValueError(f"{self} cannot compare its position with {that}: not on the same segment")
        return self.relative_position_in_segment - that.relative_position_in_segment


UNKNOWN_OFFSET_METADATA = LogOffsetMetadata(UNKNOWN_OFFSET, UNKNOWN_OFFSET, UNKNOWN_FILE_POSITION)
