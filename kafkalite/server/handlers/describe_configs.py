"""DescribeConfigs (key 32), v0-4: topic and broker configs with Kafka's values, sources and
synonyms (v1), documentation and config types (v3). v0 has neither sources nor synonyms; its
IsDefault is false for every entry, as Kafka's ConfigHelper never sets it. Also the resource-type
helpers the two AlterConfigs handlers share.

Resource types kafkalite describes: TOPIC (every topic config, effective value, override or broker
default) and BROKER (name "": the dynamic cluster-wide defaults that are set; name = this broker's
id: every broker config with its current value, read-only unless Kafka can update it
dynamically). BROKER_LOGGER, CLIENT_METRICS and GROUP resources are answered INVALID_REQUEST
("Unsupported resource type"); an unknown type fails the whole request with INVALID_REQUEST, as
Kafka's authorization step does."""
from __future__ import annotations

from typing import Optional

from kafka.protocol.admin.configs import DescribeConfigsRequest, DescribeConfigsResponse

from kafkalite.config.broker_configs import BrokerConfigView, ConfigEntry
from kafkalite.config.properties import parse_java_integer
from kafkalite.config.topic_config import CONFIG_TYPE_IDS
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.server.handler import ApiSpec
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices
from kafkalite.cluster.topic_validation import topic_name_error

API_KEY = 32
MIN_VERSION, MAX_VERSION = 0, 4

# ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_TYPE_NAMES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}

# Errors.INVALID_REQUEST's default message (what a request-level failure carries per resource)
INVALID_REQUEST_DEFAULT_MESSAGE = ("This most likely occurs because of a request being malformed by the client "
                                   "library or the message was sent to an incompatible broker. See the broker "
                                   "logs for more details.")


def resource_type_name(resource_type: int) -> str:
    return RESOURCE_TYPE_NAMES.get(resource_type, "UNKNOWN")


def resource_repr(resource_type: int, name: str) -> str:
    """ConfigResource.toString, as Kafka's messages quote it."""
    return f"ConfigResource(type={resource_type_name(resource_type)}, name='{name}')"


def parse_broker_id(name: str, what: str = "Broker id") -> int:
    """Scala's String.toInt (Integer.parseInt) or INVALID_REQUEST."""
    broker_id = parse_java_integer(name)
    if broker_id is None:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"{what} must be an integer, but it is: {name}")
    return broker_id


def make(services: BrokerServices) -> ApiSpec:
    view = BrokerConfigView(services.config, services.dynamic_config)
    admin = services.admin_manager
    cache = services.metadata_cache

    async def describe(resource_type: int, name: str, keys: Optional[list[str]]) -> list[ConfigEntry]:
        if resource_type == RESOURCE_TOPIC:
            err = topic_name_error(name)
            if err is not None:
                raise KafkaApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, err)
            record = await admin.topic_record(name) if cache.contains(name) else None
            if record is None:
                # ConfigHelper sets only the code: the message keeps the schema default, ""
                raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "")
            return view.topic_entries(admin.log_config_for(record), record.configs, keys)
        if resource_type == RESOURCE_BROKER:
            if not name:
                return view.default_entries(keys)
            if parse_broker_id(name) != services.broker_id:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected "
                                    f"{services.broker_id} or empty string, but received {name}")
            return view.broker_entries(keys)
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {resource_type_name(resource_type)}")

    async def handle(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
        v = ctx.api_version
        Resp = DescribeConfigsResponse[v]
        R = Resp.DescribeConfigsResult
        E = R.DescribeConfigsResourceResult
        S = E.DescribeConfigsSynonym
        if any(r.resource_type not in RESOURCE_TYPE_NAMES for r in req.resources):
            return Resp(throttle_time_ms=0, results=[
                R(error_code=ErrorCode.INVALID_REQUEST, error_message=INVALID_REQUEST_DEFAULT_MESSAGE,
                  resource_type=r.resource_type, resource_name=r.resource_name, configs=[])
                for r in req.resources])
        include_synonyms = bool(req.include_synonyms)
        include_docs = v >= 3 and bool(req.include_documentation)
        results = []
        for r in req.resources:
            try:
                entries = await describe(r.resource_type, r.resource_name, r.configuration_keys)
            except KafkaApiError as e:
                results.append(R(error_code=e.code, error_message=e.message, resource_type=r.resource_type,
                                 resource_name=r.resource_name, configs=[]))
                continue
            # ConfigHelper leaves ErrorMessage at the schema's default, "" (not null)
            results.append(R(error_code=ErrorCode.NONE, error_message="", resource_type=r.resource_type,
                             resource_name=r.resource_name, configs=[
                                 E(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                                   is_sensitive=e.is_sensitive,
                                   synonyms=[S(name=s.name, value=s.value, source=s.source) for s in e.synonyms]
                                   if include_synonyms else [],
                                   config_type=CONFIG_TYPE_IDS[e.config_type],
                                   documentation=e.documentation if include_docs else None)
                                 for e in entries]))
        return Resp(throttle_time_ms=0, results=results)

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
