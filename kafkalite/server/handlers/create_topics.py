"""CreateTopics (key 19): validated by the controller; answers carry the topic id and, from v5,
the partition count, replication factor and effective configs."""
from __future__ import annotations

from collections import Counter

from kafka.protocol.admin.topics import CreateTopicsRequest, CreateTopicsResponse

from kafkalite.config.broker_configs import BrokerConfigView
from kafkalite.cluster.topic_record import NewTopic, TopicRecord
from kafkalite.protocol.errors import ErrorCode
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices
from kafkalite.server.handlers.metadata import ZERO_UUID

API_KEY = 19
MIN_VERSION, MAX_VERSION = 0, 7



def make(services: BrokerServices) -> ApiSpec:
    config_view = BrokerConfigView(services.config, services.dynamic_config)

    async def handle(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
        Resp = CreateTopicsResponse[ctx.api_version]
        R = Resp.CreatableTopicResult
        counts = Counter(t.name for t in req.topics)
        new_topics = []
        for t in req.topics:
            if counts[t.name] > 1:
                continue
            new_topics.append(NewTopic(
                name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                assignments={a.partition_index: list(a.broker_ids) for a in (t.assignments or [])},
                configs={c.name: c.value for c in (t.configs or [])}))
        created = {r.name: r for r in await services.admin_manager.create_topics(
            new_topics, bool(req.validate_only), req.timeout_ms)}
        out = []
        # one result per requested topic, duplicates included, as Kafka's KafkaApis answers
        for name in (t.name for t in req.topics):
            if counts[name] > 1:
                out.append(R(name=name, topic_id=ZERO_UUID, error_code=ErrorCode.INVALID_REQUEST,
                             error_message="Found multiple entries for this topic.",
                             num_partitions=-1, replication_factor=-1, configs=[]))
                continue
            r = created[name]
            if r.error != ErrorCode.NONE or r.record is None:
                out.append(R(name=name, topic_id=ZERO_UUID, error_code=r.error, error_message=r.message,
                             num_partitions=-1, replication_factor=-1, configs=[]))
                continue
            rec: TopicRecord = r.record
            assert r.log_config is not None
            # the same entries (value and source) DescribeConfigs would report for the new topic
            configs = [Resp.CreatableTopicResult.CreatableTopicConfigs(
                name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                is_sensitive=e.is_sensitive) for e in config_view.topic_entries(r.log_config, rec.configs)]
            # a validate-only request creates nothing, so Kafka names no topic id
            topic_id = ZERO_UUID if req.validate_only else rec.topic_id
            out.append(R(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None,
                         num_partitions=rec.num_partitions,
                         replication_factor=len(next(iter(rec.assignment.values()))),
                         configs=configs))
        return Resp(throttle_time_ms=0, topics=out)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
