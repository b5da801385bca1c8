"""AlterConfigs (key 33), v0-2: replace a topic's whole set of config overrides (keys left out
are deleted). Values are validated as at CreateTopics: an unknown key, a null or an invalid value
is INVALID_CONFIG naming the key (Kafka's KRaft answer; a 3.x ZooKeeper broker said
INVALID_REQUEST "Invalid config value for resource ..." for unparsable values). The new configs
are stored in the metadata store and the live logs use them from their next operation.

BROKER resources are dynamic broker configs (`config/dynamic_broker_config.py`): the request's
configs replace the per-broker set (resource name = this broker's id) or the cluster-wide
defaults (resource name ""), validated as Kafka's ConfigAdminManager does before anything else —
every refusal is INVALID_REQUEST with Kafka's message — then stored and applied at once."""
from __future__ import annotations

from collections import Counter
from typing import Any, Awaitable, Callable

from kafka.protocol.admin.configs import AlterConfigsRequest, AlterConfigsResponse

from kafkalite.config.dynamic_broker_config import DynamicConfigError, PasswordConfigError
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.server.handler import ApiSpec
from kafkalite.server.handlers.describe_configs import (INVALID_REQUEST_DEFAULT_MESSAGE, RESOURCE_BROKER,
                                                       RESOURCE_TOPIC, RESOURCE_TYPE_NAMES, parse_broker_id,
                                                       resource_repr, resource_type_name)
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 33
MIN_VERSION, MAX_VERSION = 0, 2


def check_broker_resource(services: BrokerServices, name: str) -> None:
    """ConfigAdminManager.validateResourceNameIsCurrentNodeId ("" is the cluster default)."""
    if name and parse_broker_id(name, "Node id") != services.broker_id:
        raise KafkaApiError(ErrorCode.INVALID_REQUEST,
                            f"Unexpected broker id, expected {services.broker_id}, but received {name}")


async def flush_config_writes(services: BrokerServices) -> None:
    """In cluster mode a dynamic broker config is written to ZooKeeper before the answer."""
    if services.config_manager is not None:
        await services.config_manager.flush()


def alter_broker_configs(services: BrokerServices, name: str, props: dict[str, str], validate_only: bool) -> None:
    """Replace the entity's dynamic configs with `props` (validate only, or store and apply)."""
    assert services.dynamic_config is not None
    try:
        services.dynamic_config.alter(props, per_broker=bool(name), validate_only=validate_only)
    except DynamicConfigError as e:
        # ConfigAdminManager: "InvalidRequestException is not really the right exception here
        # ... but we should probably only change this in a KIP" (KAFKA-13609)
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, str(e)) from None
    except PasswordConfigError as e:
        # raised while storing, past the preprocessing: ZkAdminManager's ConfigException path
        raise KafkaApiError(ErrorCode.INVALID_CONFIG, f"Invalid config value for resource "
                            f"{resource_repr(RESOURCE_BROKER, name)}: {e}") from None


async def answer_per_resource(Resp: Any, resources: list[Any], apply: Callable[[Any], Awaitable[None]]) -> Any:
    """The answer AlterConfigs and IncrementalAlterConfigs share: an unknown resource type fails
    the whole request; otherwise each resource is answered on its own, a repeated resource or
    config key being INVALID_REQUEST, and `apply` raising KafkaApiError for anything else."""
    R = Resp.AlterConfigsResourceResponse
    if any(r.resource_type not in RESOURCE_TYPE_NAMES for r in resources):
        return Resp(throttle_time_ms=0, responses=[
            R(error_code=ErrorCode.INVALID_REQUEST, error_message=INVALID_REQUEST_DEFAULT_MESSAGE,
              resource_type=r.resource_type, resource_name=r.resource_name) for r in resources])
    seen = Counter((r.resource_type, r.resource_name) for r in resources)
    out = []
    for r in resources:
        try:
            if seen[(r.resource_type, r.resource_name)] > 1:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
            names = [c.name for c in r.configs]
            if len(set(names)) != len(names):
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            await apply(r)
            out.append(R(error_code=ErrorCode.NONE, error_message=None, resource_type=r.resource_type,
                         resource_name=r.resource_name))
        except KafkaApiError as e:
            out.append(R(error_code=e.code, error_message=e.message, resource_type=r.resource_type,
                         resource_name=r.resource_name))
    return Resp(throttle_time_ms=0, responses=out)


def make(services: BrokerServices) -> ApiSpec:
    admin = services.admin_manager

    async def alter(resource_type: int, name: str, configs: dict[str, str | None], validate_only: bool) -> None:
        nulls = [k for k, v in configs.items() if v is None]
        if nulls:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
        if resource_type == RESOURCE_TOPIC:
            code, message = await admin.alter_topic_configs(name, configs, validate_only)
            if code != ErrorCode.NONE:
                if message is not None and message.startswith("Invalid value "):
                    # ZkAdminManager wraps a value's ConfigException naming the resource
                    message = f"Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): {message}"
                raise KafkaApiError(code, message)
            return
        if resource_type == RESOURCE_BROKER:
            check_broker_resource(services, name)
            alter_broker_configs(services, name, {k: v for k, v in configs.items() if v is not None},
                                 validate_only)
            await flush_config_writes(services)
            return
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "AlterConfigs is only supported for topics and brokers, "
                            f"but resource type is {resource_type_name(resource_type)}")

    async def handle(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
        return await answer_per_resource(
            AlterConfigsResponse[ctx.api_version], req.resources,
            lambda r: alter(r.resource_type, r.resource_name, {c.name: c.value for c in r.configs},
                            bool(req.validate_only)))

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
