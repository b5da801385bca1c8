"""The answer to a request whose handler failed: Kafka's ``AbstractRequest.getErrorResponse`` per API.

When a handler raises, Kafka's KafkaApis logs "Unexpected error handling request" at ERROR and
answers with ``request.getErrorResponse(e)``: the response layout of that API and version with
``Errors.forException(e)`` in every error field that method fills (top level, per topic, per
partition, per group, per resource, ...), the request's keys echoed back (topic names, partition
indexes, group ids, resource names) and everything else at the "unknown" values Kafka uses
(offsets -1, node -1, empty strings and lists). The connection stays open. Only a Produce with
acks=0 has no error response (Kafka closes the connection instead: the client reads none).

Messages follow ``ApiError.fromThrowable``: none for UNKNOWN_SERVER_ERROR (nothing internal leaks
to clients), the exception's own message for a Kafka error; APIs that send ``Errors.message()``
(DescribeConfigs, FindCoordinator) send the error's default text.

Each builder is ``(request, version, error_code, message) -> response``; they only read the
decoded request and construct response objects, so each is a small pure function.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from kafkalite.protocol.inter_broker import ERROR_RESPONSES as INTER_BROKER_ERROR_RESPONSES
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.messages import messages_for

ErrorResponseFn = Callable[[Any, int, int, Optional[str]], Any]

# Errors.message() of the codes a generic failure can carry; other codes come with the
# exception's own message (KafkaApiError).
UNKNOWN_SERVER_ERROR_MESSAGE = "The server experienced an unexpected error when processing the request."
INVALID_OFFSET = -1
NO_TIMESTAMP = -1
UNKNOWN_OFFSET = -1
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
INVALID_HIGH_WATERMARK = -1
INVALID_LOW_WATERMARK = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
UNKNOWN_GENERATION_ID = -1
UNKNOWN_MEMBER_ID = ""
# AddPartitionsToTxn: from v4 (brokers' batched verification) the error is top level only
ADD_PARTITIONS_EARLIEST_BROKER_VERSION = 4
# Fetch: from v13 a top-level error comes without partitions
FETCH_TOP_LEVEL_ERROR_ONLY_VERSION = 13


def default_message(code: int) -> Optional[str]:
    """Errors.message() for the code (the text Kafka sends where it uses ``error.message()``)."""
    return UNKNOWN_SERVER_ERROR_MESSAGE if code == ErrorCode.UNKNOWN_SERVER_ERROR else None


def _resp(api_key: int, version: int) -> Any:
    msgs = messages_for(api_key)
    assert msgs is not None
    return msgs.response[version]


def _topic_key(v: int, t: Any, first_id_version: int) -> dict[str, Any]:
    """A topic addressed by name before `first_id_version` and by id from it, echoed as sent."""
    return {"topic_id": t.topic_id} if v >= first_id_version else {"name": t.name}


# -- the data-plane APIs ------------------------------------------------------------------------

def produce(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    if req.acks == 0:
        return None           # the producer reads no response: Kafka closes the connection
    Resp = _resp(0, v)
    T = Resp.TopicProduceResponse
    P = T.PartitionProduceResponse
    topics: dict[Any, Any] = {}
    for t in req.topic_data:
        key = t.topic_id if v >= 13 else t.name
        tr = topics.get(key)
        if tr is None:
            tr = topics[key] = T(partition_responses=[], **_topic_key(v, t, 13))
        seen = {p.index for p in tr.partition_responses}
        for p in t.partition_data:
            if p.index in seen:
                continue      # Kafka walks a map of the request's partitions: one answer each
            seen.add(p.index)
            tr.partition_responses.append(P(
                index=p.index, error_code=code, base_offset=INVALID_OFFSET, log_append_time_ms=NO_TIMESTAMP,
                log_start_offset=INVALID_OFFSET, record_errors=[], error_message=message))
    return Resp(throttle_time_ms=0, responses=list(topics.values()))


def fetch(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(1, v)
    T = Resp.FetchableTopicResponse
    P = T.PartitionData
    topics = []
    if v < FETCH_TOP_LEVEL_ERROR_ONLY_VERSION:
        for t in req.topics:
            topics.append(T(topic=t.topic, partitions=[
                P(partition_index=p.partition, error_code=code, high_watermark=INVALID_HIGH_WATERMARK,
                  last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None, records=None)
                for p in t.partitions]))
    return Resp(throttle_time_ms=0, error_code=code, session_id=req.session_id, responses=topics)


def list_offsets(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(2, v)
    T = Resp.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    return Resp(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code,
                                     offset=UNKNOWN_OFFSET, timestamp=NO_TIMESTAMP)
                                   for p in t.partitions])
        for t in req.topics])


def metadata(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(3, v)
    T = Resp.MetadataResponseTopic
    topics = [T(name=t.name if t.name is not None else "", topic_id=t.topic_id, error_code=code,
                is_internal=False, partitions=[])
              for t in (req.topics or [])]          # null: all topics, answered with none
    return Resp(throttle_time_ms=0, brokers=[], topics=topics)


def offset_for_leader_epoch(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(23, v)
    T = Resp.OffsetForLeaderTopicResult
    P = T.EpochEndOffset
    return Resp(throttle_time_ms=0, topics=[
        T(topic=t.topic, partitions=[P(partition=p.partition, error_code=code, leader_epoch=UNDEFINED_EPOCH,
                                       end_offset=UNDEFINED_EPOCH_OFFSET) for p in t.partitions])
        for t in req.topics])


def delete_records(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(21, v)
    T = Resp.DeleteRecordsTopicResult
    P = T.DeleteRecordsPartitionResult
    return Resp(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code,
                                     low_watermark=INVALID_LOW_WATERMARK) for p in t.partitions])
        for t in req.topics])


# -- groups -------------------------------------------------------------------------------------

def offset_commit(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(8, v)
    T = Resp.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    return Resp(throttle_time_ms=0, topics=[
        T(partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions],
          **_topic_key(v, t, 10))
        for t in req.topics])


def offset_fetch(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(9, v)
    if v < 2:
        # no top-level error yet: every requested partition carries it, offset -1, metadata ""
        T = Resp.OffsetFetchResponseTopic
        P = T.OffsetFetchResponsePartition
        return Resp(topics=[
            T(name=t.name, partitions=[P(partition_index=i, committed_offset=INVALID_OFFSET, metadata="",
                                         error_code=code) for i in t.partition_indexes])
            for t in (req.topics or [])])
    if v < 8:
        return Resp(throttle_time_ms=0, error_code=code, topics=[])
    G = Resp.OffsetFetchResponseGroup
    return Resp(throttle_time_ms=0, groups=[G(group_id=g.group_id, error_code=code, topics=[])
                                            for g in req.groups])


def find_coordinator(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(10, v)
    text = default_message(code) if message is None else message
    if v < 4:
        return Resp(throttle_time_ms=0, error_code=code, error_message=text, node_id=-1, host="", port=-1)
    C = Resp.Coordinator
    return Resp(throttle_time_ms=0, coordinators=[
        C(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=text)
        for k in req.coordinator_keys])


def join_group(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(11, v)(throttle_time_ms=0, error_code=code, generation_id=UNKNOWN_GENERATION_ID,
                        protocol_name=None if v >= 7 else "", leader=UNKNOWN_MEMBER_ID,
                        member_id=UNKNOWN_MEMBER_ID, members=[])


def heartbeat(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(12, v)(throttle_time_ms=0, error_code=code)


def leave_group(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(13, v)(throttle_time_ms=0, error_code=code, members=[])


def sync_group(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(14, v)(throttle_time_ms=0, error_code=code, assignment=b"")


def describe_groups(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(15, v)
    G = Resp.DescribedGroup
    return Resp(throttle_time_ms=0, groups=[
        # authorized operations omitted (None encodes Kafka's AUTHORIZED_OPERATIONS_OMITTED)
        G(error_code=code, group_id=g, group_state="", protocol_type="", protocol_data="", members=[],
          authorized_operations=None)
        for g in req.groups])


def list_groups(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(16, v)(throttle_time_ms=0, error_code=code, groups=[])


def delete_groups(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(42, v)
    return Resp(throttle_time_ms=0, results=[Resp.DeletableGroupResult(group_id=g, error_code=code)
                                             for g in req.groups_names])


def offset_delete(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(47, v)(throttle_time_ms=0, error_code=code, topics=[])


# -- topics, configs, cluster -------------------------------------------------------------------

def api_versions(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    # in the request's version layout, as Kafka sends it (clients fall back to parsing v0 when
    # that fails; only UNSUPPORTED_VERSION is sent as v0, by KafkaApis before any handler runs)
    return _resp(18, v)(throttle_time_ms=0, error_code=code, api_keys=[])


def create_topics(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(19, v)
    R = Resp.CreatableTopicResult
    return Resp(throttle_time_ms=0, topics=[R(name=t.name, error_code=code, error_message=message)
                                            for t in req.topics])


def delete_topics(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(20, v)
    R = Resp.DeletableTopicResult
    if v >= 6:
        results = [R(name=t.name, topic_id=t.topic_id, error_code=code) for t in req.topics]
    else:
        results = [R(name=name, error_code=code) for name in req.topic_names]
    return Resp(throttle_time_ms=0, responses=results)


def describe_configs(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(32, v)
    R = Resp.DescribeConfigsResult
    text = default_message(code) if message is None else message
    return Resp(throttle_time_ms=0, results=[
        R(error_code=code, error_message=text, resource_type=r.resource_type, resource_name=r.resource_name,
          configs=[])
        for r in req.resources])


def _alter_configs_like(api_key: int) -> ErrorResponseFn:
    def build(req: Any, v: int, code: int, message: Optional[str]) -> Any:
        Resp = _resp(api_key, v)
        R = Resp.AlterConfigsResourceResponse
        return Resp(throttle_time_ms=0, responses=[
            R(error_code=code, error_message=message, resource_type=r.resource_type,
              resource_name=r.resource_name)
            for r in req.resources])
    return build


def describe_log_dirs(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(35, v)(throttle_time_ms=0, error_code=code, results=[])


def create_partitions(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(37, v)
    R = Resp.CreatePartitionsTopicResult
    return Resp(throttle_time_ms=0, results=[R(name=t.name, error_code=code, error_message=message)
                                             for t in req.topics])


def describe_cluster(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(60, v)(throttle_time_ms=0, error_code=code, error_message=message, cluster_id="",
                        controller_id=-1, brokers=[])


# -- transactions -------------------------------------------------------------------------------

def init_producer_id(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(22, v)(throttle_time_ms=0, error_code=code, producer_id=NO_PRODUCER_ID,
                        producer_epoch=NO_PRODUCER_EPOCH)


def add_partitions_to_txn(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(24, v)
    if v >= ADD_PARTITIONS_EARLIEST_BROKER_VERSION:
        return Resp(throttle_time_ms=0, error_code=code, results_by_transaction=[])
    T = Resp.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    return Resp(throttle_time_ms=0, results_by_topic_v3_and_below=[
        T(name=t.name, results_by_partition=[P(partition_index=i, partition_error_code=code)
                                             for i in t.partitions])
        for t in req.v3_and_below_topics])


def add_offsets_to_txn(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(25, v)(throttle_time_ms=0, error_code=code)


def end_txn(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(26, v)(throttle_time_ms=0, error_code=code)


def write_txn_markers(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(27, v)
    M = Resp.WritableTxnMarkerResult
    T = M.WritableTxnMarkerTopicResult
    P = T.WritableTxnMarkerPartitionResult
    return Resp(markers=[
        M(producer_id=m.producer_id, topics=[
            T(name=t.name, partitions=[P(partition_index=i, error_code=code) for i in t.partition_indexes])
            for t in m.topics])
        for m in req.markers])


def txn_offset_commit(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(28, v)
    T = Resp.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    return Resp(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions])
        for t in req.topics])


def describe_producers(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(61, v)
    T = Resp.TopicResponse
    P = T.PartitionResponse
    return Resp(throttle_time_ms=0, topics=[
        T(name=t.name, partitions=[P(partition_index=i, error_code=code, active_producers=[])
                                   for i in t.partition_indexes])
        for t in req.topics])


def describe_transactions(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(65, v)
    S = Resp.TransactionState
    return Resp(throttle_time_ms=0, transaction_states=[
        S(error_code=code, transactional_id=i, transaction_state="", transaction_timeout_ms=0,
          transaction_start_time_ms=0, producer_id=0, producer_epoch=0, topics=[])
        for i in req.transactional_ids])


def list_transactions(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    return _resp(66, v)(throttle_time_ms=0, error_code=code, unknown_state_filters=[], transaction_states=[])


def elect_leaders(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    """ElectLeadersRequest.getErrorResponse: every named partition gets the error and message."""
    Resp = _resp(43, v)
    R = Resp.ReplicaElectionResult
    P = R.PartitionResult
    return Resp(throttle_time_ms=0, error_code=code, replica_election_results=[
        R(topic=t.topic, partition_result=[P(partition_id=p, error_code=code, error_message=message)
                                           for p in t.partitions])
        for t in req.topic_partitions or ()])


def alter_partition_reassignments(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(45, v)
    T = Resp.ReassignableTopicResponse
    P = T.ReassignablePartitionResponse
    return Resp(throttle_time_ms=0, error_code=code, error_message=message, responses=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code, error_message=message)
                                   for p in t.partitions])
        for t in req.topics])


def list_partition_reassignments(req: Any, v: int, code: int, message: Optional[str]) -> Any:
    Resp = _resp(46, v)
    T = Resp.OngoingTopicReassignment
    P = T.OngoingPartitionReassignment
    return Resp(throttle_time_ms=0, error_code=code, error_message=message, topics=[
        T(name=t.name, partitions=[P(partition_index=i, replicas=[], adding_replicas=[], removing_replicas=[])
                                   for i in t.partition_indexes])
        for t in req.topics or ()])


ERROR_RESPONSES: dict[int, ErrorResponseFn] = {
    0: produce, 1: fetch, 2: list_offsets, 3: metadata, 8: offset_commit, 9: offset_fetch,
    10: find_coordinator, 11: join_group, 12: heartbeat, 13: leave_group, 14: sync_group,
    15: describe_groups, 16: list_groups, 18: api_versions, 19: create_topics, 20: delete_topics,
    21: delete_records, 22: init_producer_id, 23: offset_for_leader_epoch, 24: add_partitions_to_txn,
    25: add_offsets_to_txn, 26: end_txn, 27: write_txn_markers, 28: txn_offset_commit,
    32: describe_configs, 33: _alter_configs_like(33), 35: describe_log_dirs, 37: create_partitions,
    42: delete_groups, 44: _alter_configs_like(44), 47: offset_delete, 60: describe_cluster,
    61: describe_producers, 65: describe_transactions, 66: list_transactions, 43: elect_leaders,
    45: alter_partition_reassignments, 46: list_partition_reassignments,
    # the controller-to-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown,
    # AlterPartition): their shapes live beside their messages
    **INTER_BROKER_ERROR_RESPONSES,
}


def error_response(api_key: int, version: int, request: Any, code: int,
                   message: Optional[str] = None) -> Any:
    """Kafka's ``request.getErrorResponse(e)`` for this API and version; None when Kafka sends
    nothing (Produce acks=0) and closes the connection instead."""
    return ERROR_RESPONSES[api_key](request, version, code, message)
