"""The log layer: partition logs made of segments (Kafka's UnifiedLog/LocalLog, LogSegment,
OffsetIndex, TimeIndex, ProducerStateManager, LogManager). See ARCHITECTURE.md, "log"."""
from kafkalite.log.errors import LogError
from kafkalite.log.log import FetchDataInfo, FileSlice, Log, LogAppendInfo, TimestampAndOffset
from kafkalite.log.log_manager import LogManager

__all__ = ["Log", "LogAppendInfo", "FetchDataInfo", "FileSlice", "TimestampAndOffset",
           "LogManager", "LogError"]
