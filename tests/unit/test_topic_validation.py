"""Topic name rules; expected messages are what org.apache.kafka.common.internals.Topic.validate
(kafka-clients 4.3.0) throws for the same names."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.cluster.topic_validation import (ADMIN_CLIENT_ID, GROUP_METADATA_TOPIC_NAME, INTERNAL_TOPICS,
                                               MAX_NAME_LENGTH, TRANSACTION_STATE_TOPIC_NAME, append_refused,
                                               has_collision,
                                               has_collision_chars, is_internal, topic_name_error,
                                               unify_collision_chars)

OTHER = "contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"


@pytest.mark.parametrize("name", [
    "a", "A", "0", "-", "_", "...", ".a", "a..", "__consumer_offsets", "ok.topic_-1",
    "x" * MAX_NAME_LENGTH, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
])
def test_legal_names(name: str) -> None:
    assert topic_name_error(name) is None


@pytest.mark.parametrize("name,message", [
    ("", "Topic name is invalid: the empty string is not allowed"),
    (None, "Topic name is invalid: the empty string is not allowed"),
    (".", "Topic name is invalid: '.' is not allowed"),
    ("..", "Topic name is invalid: '..' is not allowed"),
    ("x" * 250, f"Topic name is invalid: the length of '{'x' * 250}' is longer than the max allowed length 249"),
    ("a b", f"Topic name is invalid: 'a b' {OTHER}"),
    ("abc\n", f"Topic name is invalid: 'abc\n' {OTHER}"),   # a regex '$' would let this through
    ("\nabc", f"Topic name is invalid: '\nabc' {OTHER}"),
    ("é", f"Topic name is invalid: 'é' {OTHER}"),
    ("\u0661", f"Topic name is invalid: '\u0661' {OTHER}"),  # a non-ASCII digit
    ("topic/1", f"Topic name is invalid: 'topic/1' {OTHER}"),
    ("a+b", f"Topic name is invalid: 'a+b' {OTHER}"),
    ("\U0001F600" * 124, f"Topic name is invalid: '{chr(0x1F600) * 124}' {OTHER}"),
    # Java counts UTF-16 units: 125 emoji are 250 long, so the length rule fires first
    ("\U0001F600" * 125, "Topic name is invalid: the length of '" + "\U0001F600" * 125
     + "' is longer than the max allowed length 249"),
])
def test_illegal_names_get_kafkas_message(name: str | None, message: str) -> None:
    assert topic_name_error(name) == message


@given(st.text(max_size=300))
def test_rule_matches_kafkas_character_loop(name: str) -> None:
    legal_chars = all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    utf16_len = len(name.encode("utf-16-le", errors="surrogatepass")) // 2
    legal = name not in ("", ".", "..") and utf16_len <= 249 and legal_chars
    assert (topic_name_error(name) is None) == legal


def test_internal_topics() -> None:
    assert INTERNAL_TOPICS == {"__consumer_offsets", "__transaction_state"}
    assert GROUP_METADATA_TOPIC_NAME == "__consumer_offsets"
    assert TRANSACTION_STATE_TOPIC_NAME == "__transaction_state"
    assert is_internal("__consumer_offsets") and is_internal("__transaction_state")
    assert not is_internal("__consumer.offsets") and not is_internal("consumer_offsets")
    assert not is_internal("__cluster_metadata")  # KRaft's log, not a topic of a ZooKeeper-mode broker


@pytest.mark.parametrize("client_id", [None, "", "producer-1", "__admin_client ", "__ADMIN_CLIENT"])
def test_appends_to_internal_topics_are_refused_unless_from_the_admin_client_id(client_id: str | None) -> None:
    # Kafka's KafkaApis: internalTopicsAllowed = clientId == AdminUtils.ADMIN_CLIENT_ID, exactly
    assert ADMIN_CLIENT_ID == "__admin_client"
    for name in INTERNAL_TOPICS:
        assert append_refused(name, client_id) is True
        assert append_refused(name, ADMIN_CLIENT_ID) is False
    assert append_refused("consumer_offsets", client_id) is False
    assert append_refused("consumer_offsets", ADMIN_CLIENT_ID) is False


@pytest.mark.parametrize("a,b,collide", [
    ("a.b", "a_b", True), ("a_b", "a.b", True), ("a.b", "a.b", True), ("a..b", "a_.b", True),
    ("a.b", "a-b", False), ("a.b", "ab", False), ("a_b_", "a.b.", True), ("A.b", "a_b", False),
])
def test_collisions(a: str, b: str, collide: bool) -> None:
    assert has_collision(a, b) is collide
    assert (unify_collision_chars(a) == unify_collision_chars(b)) is collide


def test_unify_and_collision_chars() -> None:
    assert unify_collision_chars("a.b_c.d") == "a_b_c_d"
    assert unify_collision_chars("plain-name") == "plain-name"
    assert has_collision_chars("a.b") and has_collision_chars("a_b")
    assert not has_collision_chars("a-b")
