"""ElectLeaders (key 43), v0-2: preferred (v0: always) or unclean leader election, asked of the
controller (Kafka's KafkaApis.handleElectLeaders, ReplicaManager.electLeaders and
DelayedElectLeader). The controller elects; this broker then waits until its metadata cache shows
each elected leader, up to the request's timeout (REQUEST_TIMED_OUT for those it did not see). A
broker that is not the controller answers NOT_CONTROLLER per partition. With a null partition
list every partition is a candidate and those that needed no election are left out."""
from __future__ import annotations

from typing import Any, Optional, Union

from kafka.protocol.admin.topics import ElectLeadersRequest, ElectLeadersResponse

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext

API_KEY = 43
MIN_VERSION, MAX_VERSION = 0, 2
ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1


def make(services: Any) -> ApiSpec:
    """Needs `services.kafka_controller` and `services.admin_manager` (its metadata waiter)."""
    cache = services.metadata_cache

    async def handle(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
        v = ctx.api_version
        Resp = ElectLeadersResponse[v]
        election_type = req.election_type if v >= 1 else ELECTION_PREFERRED
        if election_type not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
            # Kafka's ElectionType.valueOf throws before anything is elected: the generic
            # failure answer (UNKNOWN_SERVER_ERROR for the request and each named partition)
            raise ValueError(f"Unknown election type byte {election_type}")
        if req.topic_partitions is None:
            partitions = {TopicPartition(t, p) for t in cache.topic_names() for p in cache.topic(t).partitions}
        else:
            partitions = {TopicPartition(t.topic, p) for t in req.topic_partitions for p in t.partitions}
        outcome = await services.kafka_controller.elect_leaders(partitions, election_type)
        if req.topic_partitions is not None:
            # partitions the controller never saw (it is not the controller) are NOT_CONTROLLER
            for tp in partitions - set(outcome):
                outcome[tp] = (ErrorCode.NOT_CONTROLLER, None)
        expected = {tp: leader for tp, leader in outcome.items() if isinstance(leader, int)}

        def leaders_seen() -> bool:
            return all(_leader_of(cache, tp) == leader for tp, leader in expected.items())

        results: dict[TopicPartition, tuple[ErrorCode, Optional[str]]] = {
            tp: r for tp, r in outcome.items() if not isinstance(r, int)}
        if expected:
            await services.admin_manager.waiter.wait_until(leaders_seen, req.timeout_ms)
            for tp, leader in expected.items():
                results[tp] = (ErrorCode.NONE, None) if _leader_of(cache, tp) == leader \
                    else (ErrorCode.REQUEST_TIMED_OUT, None)
        if req.topic_partitions is None:
            results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
        by_topic: dict[str, list] = {}
        R = Resp.ReplicaElectionResult
        P = R.PartitionResult
        for tp, (code, message) in sorted(results.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            by_topic.setdefault(tp.topic, []).append(P(partition_id=tp.partition, error_code=code,
                                                       error_message=message))
        return Resp(throttle_time_ms=0, error_code=ErrorCode.NONE,
                    replica_election_results=[R(topic=t, partition_result=ps) for t, ps in by_topic.items()])

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)


def _leader_of(cache: Any, tp: TopicPartition) -> Union[int, None]:
    info = cache.topic(tp.topic)
    if info is None or tp.partition not in info.partitions:
        return None
    return info.partitions[tp.partition].leader
