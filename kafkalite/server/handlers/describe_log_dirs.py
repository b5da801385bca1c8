"""DescribeLogDirs (key 35), v1-5: each log directory with the partitions it holds, their size
on disk and offset lag (high watermark minus log end offset, never negative: 0 on a leader),
and from v4 the volume's total and usable bytes. Topics null: every partition; otherwise only
the named partitions this broker has (others are left out, as in Kafka). No log directory is
ever offline or cordoned here, and there are no future (AlterReplicaLogDirs) logs."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from kafka.protocol.admin.cluster import DescribeLogDirsRequest, DescribeLogDirsResponse

from kafkalite.protocol.errors import ErrorCode
from kafkalite.replica.partition import TopicPartition
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 35
MIN_VERSION, MAX_VERSION = 0, 5


def volume_bytes(directory: Path) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding `directory` (Java's FileStore
    getTotalSpace / getUsableSpace)."""
    st = os.statvfs(directory)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def make(services: BrokerServices) -> ApiSpec:
    replica_manager = services.replica_manager
    log_manager = replica_manager.log_manager

    async def handle(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
        v = ctx.api_version
        Resp = DescribeLogDirsResponse[v]
        R = Resp.DescribeLogDirsResult
        T = R.DescribeLogDirsTopic
        P = T.DescribeLogDirsPartition
        wanted: Optional[set[tuple[str, int]]] = None
        if req.topics is not None:
            wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
        results = []
        for directory, logs in log_manager.logs_by_dir().items():
            by_topic: dict[str, list] = {}
            for lg in sorted(logs, key=lambda lg: (lg.topic, lg.partition)):
                if lg.closed or (wanted is not None and (lg.topic, lg.partition) not in wanted):
                    continue
                partition = replica_manager.get_partition(TopicPartition(lg.topic, lg.partition))
                lag = max(partition.high_watermark - lg.log_end_offset, 0) if partition is not None else 0
                by_topic.setdefault(lg.topic, []).append(
                    P(partition_index=lg.partition, partition_size=lg.size_in_bytes, offset_lag=lag,
                      is_future_key=False))
            total, usable = volume_bytes(directory) if v >= 4 else (-1, -1)
            results.append(R(error_code=ErrorCode.NONE, log_dir=str(Path(directory).absolute()),
                             topics=[T(name=name, partitions=parts) for name, parts in by_topic.items()],
                             total_bytes=total, usable_bytes=usable, is_cordoned=False))
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
