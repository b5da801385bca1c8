"""`__consumer_offsets` record layouts (kafkalite.coordinator.group.records).

Golden bytes are computed by hand from Kafka's message specs (OffsetCommitKey/Value,
GroupMetadataKey/Value), field by field, big-endian:
  int16/int32/int64 -> 2/4/8 bytes; string -> int16 byte length + UTF-8; null string -> ffff;
  bytes -> int32 length + bytes; array -> int32 count + elements.
  Flexible versions (4+): compact string/bytes -> unsigned varint (length + 1) + data; compact
  array -> varint (count + 1); every struct ends with its tagged-field count (varint 0 here).
A key starts with its int16 record type (1 = offset commit, 2 = group metadata), a value with
its int16 version. The kafka-clients jar (the newest version of tests/support/java_clients.py,
from Maven Central) does not ship these record classes, so the jar is used for what it does
contain: String.hashCode + Utils.abs (partition_for), Kafka's own protocol.types encoder for the
flexible layout, and ConsumerProtocol subscriptions.
"""
from __future__ import annotations

import random
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.coordinator.group.records import (GroupKey, OffsetKey, RecordDecodeError,
                                                 UnknownRecordTypeError, decode_group_value,
                                                 decode_key, decode_offset_value, group_metadata_key,
                                                 group_metadata_value, java_abs, java_string_hash,
                                                 offset_commit_key, offset_commit_value,
                                                 partition_for)
from kafkalite.coordinator.group.types import GroupSnapshot, MemberSnapshot, OffsetAndMetadata
from tests.support import maven
from tests.support.java_clients import NEWEST as NEWEST_JAVA_CLIENT
from tests.support.java_clients import kafka_clients_jars

INT32 = st.integers(-2**31, 2**31 - 1)
INT64 = st.integers(-2**63, 2**63 - 1)
TEXT = st.text(max_size=40)


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", "").replace("|", ""))


# -- golden bytes ----------------------------------------------------------------------------------

def test_offset_commit_key_golden() -> None:
    key = offset_commit_key("group-1", "topic-a", 3)
    assert key == h("0001 | 0007 67726f75702d31 | 0007 746f7069632d61 | 00000003")
    assert decode_key(key) == OffsetKey("group-1", "topic-a", 3)


def test_legacy_offset_commit_key_type_0_decodes() -> None:
    assert decode_key(h("0000 | 0001 67 | 0001 74 | 7fffffff")) == OffsetKey("g", "t", 2**31 - 1)


def test_group_metadata_key_golden() -> None:
    key = group_metadata_key("group-1")
    assert key == h("0002 | 0007 67726f75702d31")
    assert decode_key(key) == GroupKey("group-1")


def test_offset_commit_value_v3_golden() -> None:
    # Kafka writes v3 when no expire timestamp: offset, leaderEpoch, metadata, commitTimestamp.
    o = OffsetAndMetadata(offset=100, leader_epoch=5, metadata="meta", commit_timestamp=1700000000000)
    value = offset_commit_value(o)
    assert value == h("0003 | 0000000000000064 | 00000005 | 0004 6d657461 | 0000018bcfe56800")
    assert decode_offset_value(value) == o


def test_offset_commit_value_v1_golden_when_expire_timestamp_set() -> None:
    # v1: offset, metadata, commitTimestamp, expireTimestamp (no leader epoch: it is lost).
    o = OffsetAndMetadata(offset=100, leader_epoch=7, metadata="", commit_timestamp=1000,
                          expire_timestamp=2000)
    value = offset_commit_value(o)
    assert value == h("0001 | 0000000000000064 | 0000 | 00000000000003e8 | 00000000000007d0")
    assert decode_offset_value(value) == OffsetAndMetadata(100, -1, "", 1000, 2000)


def test_offset_commit_value_old_and_flexible_versions_decode() -> None:
    # v0: offset, metadata, timestamp
    assert decode_offset_value(h("0000 | 000000000000002a | 0002 6869 | 0000000000000005")) == \
        OffsetAndMetadata(42, -1, "hi", 5, -1)
    # v2: offset, metadata, commitTimestamp
    assert decode_offset_value(h("0002 | 000000000000002a | 0000 | 0000000000000005")) == \
        OffsetAndMetadata(42, -1, "", 5, -1)
    # v4 (flexible): compact metadata string and an empty tagged-field buffer
    v4 = h("0004 | 0000000000000064 | 00000005 | 05 6d657461 | 00000000000003e8 | 00")
    assert decode_offset_value(v4) == OffsetAndMetadata(100, 5, "meta", 1000, -1)
    assert offset_commit_value(OffsetAndMetadata(100, 5, "meta", 1000), version=4) == v4


def _member(**kw) -> MemberSnapshot:
    base = dict(member_id="m-1", group_instance_id="i-1", client_id="c", client_host="/127.0.0.1",
                rebalance_timeout_ms=300000, session_timeout_ms=45000, subscription=b"\x00\x01",
                assignment=b"")
    base.update(kw)
    return MemberSnapshot(**base)


def test_group_metadata_value_v3_golden() -> None:
    g = GroupSnapshot("group-1", "consumer", 1, "range", "m-1", 1000, (_member(),))
    value = group_metadata_value(g)
    assert value == h(
        "0003 | 0008 636f6e73756d6572 | 00000001 | 0005 72616e6765 | 0003 6d2d31 | 00000000000003e8"
        "| 00000001"                                     # one member:
        "| 0003 6d2d31 | 0003 692d31 | 0001 63 | 000a 2f3132372e302e302e31"
        "| 000493e0 | 0000afc8 | 00000002 0001 | 00000000")
    assert decode_group_value("group-1", value) == g


def test_empty_group_metadata_value_golden() -> None:
    # What Kafka writes for a group that only stores offsets or just became empty:
    # protocolType "", generation 0, protocol null, leader null, no members.
    g = GroupSnapshot("g", "", 0, None, None, 1000)
    value = group_metadata_value(g)
    assert value == h("0003 | 0000 | 00000000 | ffff | ffff | 00000000000003e8 | 00000000")
    assert decode_group_value("g", value) == g
    assert decode_group_value("g", value).is_empty


def test_group_metadata_value_null_instance_id_and_old_versions() -> None:
    m = _member(group_instance_id=None, subscription=b"s", assignment=b"a")
    g = GroupSnapshot("g", "consumer", 2, "range", "m-1", 77, (m,))
    v3 = group_metadata_value(g)
    assert v3[2:].find(h("0003 6d2d31 | ffff | 0001 63")) > 0
    assert decode_group_value("g", v3) == g
    # v0: no rebalance timeout (Kafka uses the session timeout), no state timestamp, no instance id
    v0 = h("0000 | 0008 636f6e73756d6572 | 00000002 | 0005 72616e6765 | 0003 6d2d31 | 00000001"
           "| 0003 6d2d31 | 0001 63 | 0001 68 | 00001388 | 00000001 73 | 00000001 61")
    assert decode_group_value("g", v0) == GroupSnapshot(
        "g", "consumer", 2, "range", "m-1", -1,
        (MemberSnapshot("m-1", None, "c", "h", 5000, 5000, b"s", b"a"),))


def test_tombstones_decode_to_none() -> None:
    assert decode_offset_value(None) is None
    assert decode_group_value("g", None) is None


# -- malformed input -------------------------------------------------------------------------------

@pytest.mark.parametrize("data", [b"", b"\x00", h("0001 0005 6162"), h("0002 ffff"), h("0001 0001 67 ffff 00000001"),
                                  h("0002 0002 fffe")])
def test_malformed_keys_raise(data: bytes) -> None:
    with pytest.raises(RecordDecodeError):
        decode_key(data)


@pytest.mark.parametrize("record_type", [3, 4, 16, 0x6865, -1])
def test_unknown_record_types(record_type: int) -> None:
    with pytest.raises(UnknownRecordTypeError) as e:
        decode_key(struct.pack(">h", record_type) + b"\x00\x01g")
    assert e.value.record_type == record_type


@pytest.mark.parametrize("data", [b"\x00", h("0005 0000000000000001"), h("ffff 0000000000000001"),
                                  h("0003 00000000000000"), h("0003 0000000000000064 00000005 ffff 0000000000000001")])
def test_malformed_offset_values_raise(data: bytes) -> None:
    with pytest.raises(RecordDecodeError):
        decode_offset_value(data)


@pytest.mark.parametrize("data", [h("0005 0000"), h("0003 0000 00000000 ffff ffff 00000000000003e8 000000"),
                                  h("0003 ffff 00000000 ffff ffff 00000000000003e8 00000000")])
def test_malformed_group_values_raise(data: bytes) -> None:
    with pytest.raises(RecordDecodeError):
        decode_group_value("g", data)


def test_encoding_refuses_what_kafka_cannot_write() -> None:
    with pytest.raises(ValueError):
        offset_commit_key("g" * 40000, "t", 0)     # longer than an int16 string length
    with pytest.raises(ValueError):
        offset_commit_value(OffsetAndMetadata(1, metadata=None))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        offset_commit_value(OffsetAndMetadata(1), version=5)


# -- round trips -----------------------------------------------------------------------------------

@given(TEXT, TEXT, INT32)
def test_offset_key_round_trip(group: str, topic: str, partition: int) -> None:
    assert decode_key(offset_commit_key(group, topic, partition)) == OffsetKey(group, topic, partition)


@given(TEXT)
def test_group_key_round_trip(group: str) -> None:
    assert decode_key(group_metadata_key(group)) == GroupKey(group)


OFFSETS = st.builds(OffsetAndMetadata, offset=INT64, leader_epoch=INT32, metadata=TEXT,
                    commit_timestamp=INT64, expire_timestamp=st.one_of(st.just(-1), INT64))


@given(OFFSETS)
def test_offset_value_round_trip(o: OffsetAndMetadata) -> None:
    decoded = decode_offset_value(offset_commit_value(o))
    if o.expire_timestamp == -1:
        assert decoded == o
    else:
        # v1 carries the expire timestamp but no leader epoch, exactly as in Kafka.
        assert decoded == OffsetAndMetadata(o.offset, -1, o.metadata, o.commit_timestamp,
                                            o.expire_timestamp)


@given(OFFSETS, st.integers(0, 4))
def test_offset_value_every_version_keeps_its_fields(o: OffsetAndMetadata, version: int) -> None:
    d = decode_offset_value(offset_commit_value(o, version=version))
    assert (d.offset, d.metadata, d.commit_timestamp) == (o.offset, o.metadata, o.commit_timestamp)
    assert d.leader_epoch == (o.leader_epoch if version >= 3 else -1)
    assert d.expire_timestamp == (o.expire_timestamp if version == 1 else -1)


MEMBERS = st.builds(MemberSnapshot, member_id=TEXT, group_instance_id=st.one_of(st.none(), TEXT),
                    client_id=TEXT, client_host=TEXT, rebalance_timeout_ms=st.integers(0, 2**31 - 1),
                    session_timeout_ms=INT32, subscription=st.binary(max_size=64),
                    assignment=st.binary(max_size=64))
GROUPS = st.builds(GroupSnapshot, group_id=TEXT, protocol_type=TEXT, generation=INT32,
                   protocol_name=st.one_of(st.none(), TEXT), leader=st.one_of(st.none(), TEXT),
                   current_state_timestamp=INT64,
                   members=st.lists(MEMBERS, max_size=4).map(tuple))


@settings(max_examples=150)
@given(GROUPS, st.sampled_from([3, 4]))
def test_group_value_round_trip(g: GroupSnapshot, version: int) -> None:
    assert decode_group_value(g.group_id, group_metadata_value(g, version)) == g


# -- partitioning ----------------------------------------------------------------------------------

def test_java_hash_known_values() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2**31        # Integer.MIN_VALUE
    assert java_abs(-2**31) == 0 and java_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0


@given(TEXT, st.integers(1, 1000))
def test_partition_in_range(group: str, n: int) -> None:
    assert 0 <= partition_for(group, n) < n


def test_partition_for_rejects_no_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for("g", 0)


# -- cross-checks against the kafka-clients jar ----------------------------------------------------

JAVA_SOURCE = r"""
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.*;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.types.*;
import org.apache.kafka.common.utils.Utils;

public class GroupRecordsRef {
    static String hex(ByteBuffer b) {
        StringBuilder sb = new StringBuilder();
        while (b.hasRemaining()) sb.append(String.format("%02x", b.get()));
        return sb.toString();
    }
    static String ser(Schema s, Struct st) {
        ByteBuffer b = ByteBuffer.allocate(s.sizeOf(st));
        s.write(b, st); b.flip(); return hex(b);
    }
    public static void main(String[] args) {
        // GroupMetadataValue v4 (flexible) built with Kafka's own protocol types.
        Schema member4 = new Schema(
            new Field("member_id", Type.COMPACT_STRING), new Field("group_instance_id", Type.COMPACT_NULLABLE_STRING),
            new Field("client_id", Type.COMPACT_STRING), new Field("client_host", Type.COMPACT_STRING),
            new Field("rebalance_timeout", Type.INT32), new Field("session_timeout", Type.INT32),
            new Field("subscription", Type.COMPACT_BYTES), new Field("assignment", Type.COMPACT_BYTES),
            Field.TaggedFieldsSection.of());
        Schema gmv4 = new Schema(
            new Field("protocol_type", Type.COMPACT_STRING), new Field("generation", Type.INT32),
            new Field("protocol", Type.COMPACT_NULLABLE_STRING), new Field("leader", Type.COMPACT_NULLABLE_STRING),
            new Field("current_state_timestamp", Type.INT64), new Field("members", new CompactArrayOf(member4)),
            Field.TaggedFieldsSection.of());
        Struct m = new Struct(member4);
        m.set("member_id", "m1"); m.set("group_instance_id", null); m.set("client_id", "c");
        m.set("client_host", "/h"); m.set("rebalance_timeout", 300); m.set("session_timeout", 10);
        m.set("subscription", ByteBuffer.wrap("sub".getBytes(StandardCharsets.UTF_8)));
        m.set("assignment", ByteBuffer.wrap("asg".getBytes(StandardCharsets.UTF_8)));
        m.set("_tagged_fields", new TreeMap<Integer, Object>());
        Struct g = new Struct(gmv4);
        g.set("protocol_type", "consumer"); g.set("generation", 3); g.set("protocol", "range");
        g.set("leader", "m1"); g.set("current_state_timestamp", 77L); g.set("members", new Object[]{m});
        g.set("_tagged_fields", new TreeMap<Integer, Object>());
        System.out.println("GMV4\t" + ser(gmv4, g));
        // GroupMetadataValue v3 members / OffsetCommitValue v3 with the classic types.
        Schema ocv3 = new Schema(new Field("offset", Type.INT64), new Field("leader_epoch", Type.INT32),
            new Field("metadata", Type.STRING), new Field("commit_timestamp", Type.INT64));
        Struct o = new Struct(ocv3);
        o.set("offset", 123456789012L); o.set("leader_epoch", -1); o.set("metadata", "h\u00e9\uD83D\uDE00");
        o.set("commit_timestamp", 1L);
        System.out.println("OCV3\t" + ser(ocv3, o));
        // A consumer subscription of the newest version, as the Java consumer sends it.
        Subscription sub = new Subscription(Arrays.asList("orders", "payments"),
            ByteBuffer.wrap(new byte[]{1, 2}), Arrays.asList(new TopicPartition("orders", 0)), 5, Optional.of("rack-a"));
        System.out.println("SUB\t" + hex(ConsumerProtocol.serializeSubscription(sub)));
        for (String a : args) {
            byte[] raw = new byte[a.length() / 2];
            for (int i = 0; i < raw.length; i++) raw[i] = (byte) Integer.parseInt(a.substring(2 * i, 2 * i + 2), 16);
            String s = new String(raw, StandardCharsets.UTF_8);
            int hc = s.hashCode();
            System.out.println("HASH\t" + a + "\t" + hc + "\t" + Utils.abs(hc) + "\t" + (Utils.abs(hc) % 50)
                + "\t" + (Utils.abs(hc) % 7));
        }
    }
}
"""


def _group_ids() -> list[str]:
    rng = random.Random(20240611)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/ é中🙂"
    ids = ["", "a", "console-consumer-12345", "polygenelubricants", "GydZG_", "DESIGNING WORKHOUSES",
           "grüße", "组", "🙂🙂", "\u0000", "connect-cluster", "x" * 300]
    ids += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    return ids


@pytest.fixture(scope="module")
def java_ref() -> dict[str, list[list[str]]]:
    # No skip: like the Java client tests, a missing JDK fails (scripts/test.sh installs one).
    assert shutil.which("java") is not None, "needs Java (scripts/test.sh installs default-jdk-headless)"
    cp = maven.classpath(kafka_clients_jars(NEWEST_JAVA_CLIENT))
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "GroupRecordsRef.java"
        f.write_text(JAVA_SOURCE)
        args = [g.encode("utf-8").hex() for g in _group_ids()]
        out = subprocess.run(["java", "-cp", cp, str(f), *args], capture_output=True, text=True,
                             timeout=60)
    assert out.returncode == 0, out.stderr
    lines: dict[str, list[list[str]]] = {}
    for line in out.stdout.splitlines():
        tag, *rest = line.split("\t")
        lines.setdefault(tag, []).append(rest)
    return lines


@pytest.mark.java
def test_partition_for_matches_java(java_ref) -> None:
    rows = java_ref["HASH"]
    assert len(rows) == len(_group_ids())
    for hexid, hashcode, absval, p50, p7 in rows:
        gid = bytes.fromhex(hexid).decode("utf-8")
        assert java_string_hash(gid) == int(hashcode), gid
        assert java_abs(int(hashcode)) == int(absval), gid
        assert partition_for(gid, 50) == int(p50), gid
        assert partition_for(gid, 7) == int(p7), gid


@pytest.mark.java
def test_flexible_group_value_matches_kafka_types(java_ref) -> None:
    g = GroupSnapshot("grp", "consumer", 3, "range", "m1", 77,
                      (MemberSnapshot("m1", None, "c", "/h", 300, 10, b"sub", b"asg"),))
    (java_hex,), = java_ref["GMV4"]
    assert group_metadata_value(g, version=4) == struct.pack(">h", 4) + bytes.fromhex(java_hex)
    assert decode_group_value("grp", struct.pack(">h", 4) + bytes.fromhex(java_hex)) == g


@pytest.mark.java
def test_offset_value_utf8_metadata_matches_kafka_types(java_ref) -> None:
    o = OffsetAndMetadata(123456789012, -1, "h\u00e9\U0001F600", 1)
    (java_hex,), = java_ref["OCV3"]
    assert offset_commit_value(o) == struct.pack(">h", 3) + bytes.fromhex(java_hex)


@pytest.mark.java
def test_java_consumer_subscription_topics_are_parsed(java_ref) -> None:
    from kafkalite.coordinator.group.group_metadata_manager import subscribed_topics
    (sub_hex,), = java_ref["SUB"]
    sub = bytes.fromhex(sub_hex)
    assert struct.unpack_from(">h", sub)[0] == 3      # the newest subscription version
    assert subscribed_topics("consumer", "range", [sub]) == frozenset({"orders", "payments"})
