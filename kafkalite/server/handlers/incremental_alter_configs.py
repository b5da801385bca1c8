"""IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND and SUBTRACT on a topic's config
overrides, then the same validation and live effect as AlterConfigs.

APPEND and SUBTRACT apply to LIST configs only (cleanup.policy, the throttled-replica lists);
they start from the topic's override, or from the config's Kafka default when there is none
(ConfigDef's default, not the broker's synonym, as in Kafka). The value is split at commas;
APPEND adds the elements not yet present, SUBTRACT removes them. Errors as a 3.9 ZooKeeper-mode
broker's ZkAdminManager answers them (checked against Kafka 3.9.1 through franz-go's kadm): on
another type INVALID_CONFIG "Config value append is not allowed for config key: k"; on a key
LogConfig does not define UNKNOWN_SERVER_ERROR with no message (a Scala Map lookup's
NoSuchElementException); a value ConfigDef refuses (a ConfigException, "Invalid value v for
configuration k: ...") INVALID_CONFIG prefixed "Invalid config value for resource
ConfigResource(type=TOPIC, name='t'): ".

BROKER resources (dynamic broker configs): the operations apply to the entity's stored dynamic
configs as Kafka's ConfigAdminManager.prepareIncrementalConfigs does (APPEND/SUBTRACT on LIST
broker configs start from Kafka's ConfigDef default; on other types INVALID_CONFIG "Config value
append is not allowed for config key: k"; on a key KafkaConfig does not define
UNKNOWN_SERVER_ERROR, Kafka's NoSuchElementException), then the result is validated, stored and
applied as AlterConfigs does."""
from __future__ import annotations

from typing import Any, Callable, Container, Optional

from kafka.protocol.admin.configs import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from kafkalite.config.broker_configs import BrokerConfigView
from kafkalite.config.kafka_config_def import KAFKA_BROKER_CONFIG_TYPES
from kafkalite.config.log_config import TOPIC_CONFIG_ATTRS
from kafkalite.config.topic_config import is_list_config, list_default
from kafkalite.protocol.errors import ErrorCode, KafkaApiError
from kafkalite.server.handler import ApiSpec
from kafkalite.server.handlers.alter_configs import (alter_broker_configs, answer_per_resource, flush_config_writes,
                                                    check_broker_resource)
from kafkalite.server.handlers.describe_configs import RESOURCE_BROKER, RESOURCE_TOPIC, resource_type_name
from kafkalite.server.request_context import RequestContext
from kafkalite.server.services import BrokerServices

API_KEY = 44
MIN_VERSION, MAX_VERSION = 0, 1

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


Ops = list[tuple[str, int, Optional[str]]]


def _apply_ops(current: dict[str, str], ops: Ops, defined: Container[str], is_list: Callable[[str], bool],
               default: Callable[[str], Optional[str]],
               combine: Callable[[Optional[str], int, Optional[str]], list[str]]) -> dict[str, str]:
    """current after the operations, as both of Kafka's managers apply them: SET and DELETE as given;
    APPEND and SUBTRACT only on a key the config set defines (else UNKNOWN_SERVER_ERROR) of type
    LIST (else INVALID_CONFIG), the new list combine(start, op, value) where start is the current
    value, else default(key). Pure; raises KafkaApiError."""
    props = dict(current)
    for key, op, value in ops:
        if op == OP_SET:
            assert value is not None
            props[key] = value
        elif op == OP_DELETE:
            props.pop(key, None)
        else:
            if key not in defined:
                # Kafka looks the key up in a Scala Map: NoSuchElementException, no message sent
                raise KafkaApiError(ErrorCode.UNKNOWN_SERVER_ERROR, None)
            if not is_list(key):
                what = "append" if op == OP_APPEND else "subtract"
                raise KafkaApiError(ErrorCode.INVALID_CONFIG,
                                    f"Config value {what} is not allowed for config key: {key}")
            start = props[key] if key in props else default(key)
            props[key] = ",".join(combine(start, op, value))
    return props


def _parts(value: Optional[str]) -> list[str]:
    return [p for p in (value or "").split(",") if p]


def _combine_topic_list(start: Optional[str], op: int, value: Optional[str]) -> list[str]:
    """ZkAdminManager: empty elements dropped, APPEND adds each given element once."""
    old = _parts(start)
    given = (value or "").split(",")
    if op == OP_APPEND:
        return old + [p for p in dict.fromkeys(given) if p and p not in old]
    return [p for p in old if p not in given]


def apply_ops(current: dict[str, str], ops: Ops) -> dict[str, str]:
    """The topic's overrides after the operations (pure; raises KafkaApiError)."""
    return _apply_ops(current, ops, TOPIC_CONFIG_ATTRS, is_list_config, list_default, _combine_topic_list)


def java_split(value: str) -> list[str]:
    """String.split(","): trailing empty strings dropped, but "" is [""]."""
    parts = value.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return [""] if parts == [] else parts


def _combine_broker_list(start: Optional[str], op: int, value: Optional[str]) -> list[str]:
    """ConfigAdminManager: java_split elements; SUBTRACT is Scala's List.diff."""
    assert value is not None
    if op == OP_APPEND:
        old = java_split(start) if start else []
        return old + [p for p in java_split(value) if p not in old]
    new = java_split(start or "")
    for p in java_split(value):     # Scala's List.diff: one occurrence per element
        if p in new:
            new.remove(p)
    return new


def apply_broker_ops(current: dict[str, str], ops: Ops, defaults: dict[str, str]) -> dict[str, str]:
    """A broker entity's dynamic configs after the operations (ConfigAdminManager.
    prepareIncrementalConfigs over KafkaConfig's keys; pure; raises KafkaApiError)."""
    return _apply_ops(current, ops, KAFKA_BROKER_CONFIG_TYPES, lambda key: KAFKA_BROKER_CONFIG_TYPES[key] == "LIST",
                      defaults.get, _combine_broker_list)


def topic_config_error_message(topic: str, code: ErrorCode, message: Optional[str]) -> Optional[str]:
    """ZkAdminManager.incrementalAlterConfigs wraps a ConfigException (ConfigDef's "Invalid value v
    for configuration k: reason", its fixed format) naming the resource; other refusals (unknown
    names, LogConfig's cross-config checks) keep their own message."""
    if code == ErrorCode.INVALID_CONFIG and message is not None and message.startswith("Invalid value "):
        return f"Invalid config value for resource ConfigResource(type=TOPIC, name='{topic}'): {message}"
    return message


def make(services: BrokerServices) -> ApiSpec:
    admin = services.admin_manager
    view = BrokerConfigView(services.config, services.dynamic_config)

    async def alter(resource_type: int, name: str, ops: Ops, validate_only: bool) -> None:
        if resource_type == RESOURCE_TOPIC:
            if not name:
                raise KafkaApiError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
            record = await admin.topic_record(name)
            if record is None:
                raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            code, message = await admin.alter_topic_configs(name, apply_ops(record.configs, ops), validate_only)
            if code != ErrorCode.NONE:
                raise KafkaApiError(code, topic_config_error_message(name, code, message))
            return
        if resource_type == RESOURCE_BROKER:
            check_broker_resource(services, name)
            assert services.dynamic_config is not None
            props = apply_broker_ops(services.dynamic_config.stored_props(per_broker=bool(name)), ops,
                                     view.defaults)
            alter_broker_configs(services, name, props, validate_only)
            await flush_config_writes(services)
            return
        raise KafkaApiError(ErrorCode.INVALID_REQUEST, "AlterConfigs is only supported for topics and brokers, "
                            f"but resource type is {resource_type_name(resource_type)}")

    async def apply(r: Any, validate_only: bool) -> None:
        unknown_ops = [c.config_operation for c in r.configs if c.config_operation not in OP_NAMES]
        if unknown_ops:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {unknown_ops[0]}")
        nulls = [c.name for c in r.configs if c.config_operation != OP_DELETE and c.value is None]
        if nulls:
            raise KafkaApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
        await alter(r.resource_type, r.resource_name, [(c.name, c.config_operation, c.value) for c in r.configs],
                    validate_only)

    async def handle(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
        return await answer_per_resource(IncrementalAlterConfigsResponse[ctx.api_version], req.resources,
                                   lambda r: apply(r, bool(req.validate_only)))

    return ApiSpec(API_KEY, MIN_VERSION, MAX_VERSION, handle)
