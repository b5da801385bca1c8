"""kafkalite.protocol.non_nullable: the nulls Kafka's parsers refuse, found in kafka-python's
decoded requests from the schemas' nullableVersions."""
from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from kafkalite.protocol.messages import messages_for
from kafkalite.protocol.non_nullable import NonNullableFieldError, check_non_nullable, plan_for
from kafkalite.server.handler import HANDLER_VERSIONS

P = ProduceRequest.TopicProduceData
D = P.PartitionProduceData


def produce(version: int, topic_data: Any) -> Any:
    return ProduceRequest[version](transactional_id=None, acks=1, timeout_ms=1000, topic_data=topic_data)


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_produce_nulls_by_name(version: int) -> None:
    ok = produce(version, [P(name="t", partition_data=[D(index=0, records=None)])])
    check_non_nullable(ProduceRequest, ok, version)     # records are nullable, as in Kafka
    with pytest.raises(NonNullableFieldError, match="^non-nullable field topicData was serialized as null$"):
        check_non_nullable(ProduceRequest, produce(version, None), version)
    with pytest.raises(NonNullableFieldError, match="^non-nullable field name was serialized as null$"):
        check_non_nullable(ProduceRequest, produce(version, [P(name=None, partition_data=[])]), version)
    with pytest.raises(NonNullableFieldError, match="^non-nullable field partitionData was serialized as null$"):
        check_non_nullable(ProduceRequest, produce(version, [P(name="t", partition_data=None)]), version)


def test_plans_visit_only_what_can_hold_a_forbidden_null() -> None:
    # Produce v13 names topics by id: no string left to check inside a topic but its partition
    # array, whose partitions hold nothing to check (and are not iterated)
    assert plan_for(ProduceRequest, 13) == (("topic_data", "topicData", False,
                                             (("partition_data", "partitionData", False, None),)),)
    assert plan_for(ProduceRequest, 3) == (("topic_data", "topicData", False,
                                            (("name", "name", False, None),
                                             ("partition_data", "partitionData", False, None))),)
    fetch = dict((step[0], step) for step in plan_for(FetchRequest, 12))
    topic_steps = dict((step[0], step) for step in fetch["topics"][3])
    assert topic_steps["partitions"] == ("partitions", "partitions", False, None)
    # a nullable field with nothing inside to check is no step at all
    assert plan_for(MetadataRequest, 10) == ()
    assert plan_for(MetadataRequest, 0) == (("topics", "topics", False, (("name", "name", False, None),)),)


def test_nullable_versions_follow_the_schema() -> None:
    T = MetadataRequest.MetadataRequestTopic
    check_non_nullable(MetadataRequest, MetadataRequest[1](topics=None), 1)
    with pytest.raises(NonNullableFieldError, match="topics"):
        check_non_nullable(MetadataRequest, MetadataRequest[0](topics=None), 0)
    with pytest.raises(NonNullableFieldError, match="name"):
        check_non_nullable(MetadataRequest, MetadataRequest[9](topics=[T(name=None)]), 9)
    check_non_nullable(MetadataRequest, MetadataRequest[10](topics=[T(name=None, topic_id=None)]), 10)


def test_string_array_elements() -> None:
    check_non_nullable(DescribeGroupsRequest, DescribeGroupsRequest[0](groups=["a", ""]), 0)
    with pytest.raises(NonNullableFieldError, match="^non-nullable field groups element was serialized as null$"):
        check_non_nullable(DescribeGroupsRequest, DescribeGroupsRequest[0](groups=["a", None]), 0)


def test_every_served_request_version_has_a_plan() -> None:
    """The schemas of every API and version the broker serves are readable by the planner."""
    for api_key, low, high in HANDLER_VERSIONS.values():
        msgs = messages_for(api_key)
        assert msgs is not None, api_key
        for version in range(low, high + 1):
            assert isinstance(plan_for(msgs.request, version), tuple)
