"""Kafka's parsers refuse a null where the schema allows none: a string, bytes or array field
(or an array's string element) read with a negative length in a version where the field is not
nullable throws "non-nullable field X was serialized as null", and the broker closes the
connection. kafka-python's decoder is lenient there and hands back None; `check_non_nullable`
finds those Nones in a decoded request, from the message's JSON schema (nullableVersions), so
that the request is refused before any handler sees it.

The checks for one (message, version) are planned once: only fields that can hold a forbidden
None are visited, and arrays of structs with nothing to check inside are not iterated (a Fetch
or Produce request's thousands of partitions cost nothing here)."""
from __future__ import annotations

from typing import Any, Optional

# simple field types the wire can carry as null (a negative or zero compact length)
_NULLABLE_ON_WIRE = frozenset({"string", "bytes", "records"})


class NonNullableFieldError(ValueError):
    pass


# one check: (attribute, Kafka's field name, nullable, elements: None | "string" (non-nullable
# string elements) | a nested plan for the struct(s) inside)
_Step = tuple[str, str, bool, Any]
_Plan = tuple[_Step, ...]

_plans: dict[tuple[type, int], _Plan] = {}


def _java_name(json_name: str) -> str:
    return json_name[:1].lower() + json_name[1:]


def _plan(struct: Any, version: int) -> _Plan:
    steps: list[_Step] = []
    for f in struct.fields.values():
        if not f.for_version_q(version) or f.tagged_field_q(version):
            continue    # absent at this version, or tagged (a tagged field is never required)
        nullable = f.nullable_for_version_q(version)
        name, java = f.name, _java_name(f._name)
        if f.is_struct_array() or f.is_struct():
            inner: Optional[_Plan] = _plan(f, version) or None
            if inner is not None or not nullable:
                steps.append((name, java, nullable, inner))
        elif f.is_array():
            strings = "string" if f.type_str == "[]string" else None
            if strings is not None or not nullable:
                steps.append((name, java, nullable, strings))
        elif f.type_str in _NULLABLE_ON_WIRE and not nullable:
            steps.append((name, java, False, None))
    return tuple(steps)


def plan_for(message_class: Any, version: int) -> _Plan:
    key = (message_class, version)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _plan(message_class._struct, version)
    return plan


def _check(plan: _Plan, item: Any) -> None:
    for name, java, nullable, inner in plan:
        value = getattr(item, name)
        if value is None:
            if not nullable:
                raise NonNullableFieldError(f"non-nullable field {java} was serialized as null")
            continue
        if inner is None:
            continue
        if isinstance(inner, str):      # "string": an array of non-nullable strings
            if None in value:
                raise NonNullableFieldError(f"non-nullable field {java} element was serialized as null")
        elif isinstance(value, list):
            for element in value:
                _check(inner, element)
        else:
            _check(inner, value)


def check_non_nullable(message_class: Any, message: Any, version: int) -> None:
    """Raise NonNullableFieldError (a ValueError) for the first null in a field that Kafka's
    schema says is not nullable at `version`."""
    plan = plan_for(message_class, version)
    if plan:
        _check(plan, message)
