"""Kafka 3.9's znode paths and JSON documents, as small pure encode/decode functions.

Byte-compatible with what a Kafka 3.9 broker/controller writes (ZkData.scala), including the
order of JSON keys: Kafka builds its documents from Scala and Java hash maps, so its key order is
the maps' iteration order, which is a deterministic function of the keys' Java hash codes; the
`*_order` helpers below reproduce it (mutable.HashMap, immutable CHAMP HashMap, Java's
HashMap and ConcurrentHashMap behind java.util.Properties). Decoders accept every version Kafka
itself reads.

What Kafka 3.9.1 wrote in a test run (tests/integration/test_zk_layout_vs_kafka.py checks these
layouts against a live broker on every run):

    /cluster/id                      {"version":"1","id":"OEBsaw_4QtuA6vAbugbXgg"}
    /brokers/ids/0  (ephemeral, zkVersion 1)
        {"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
         "endpoints":["PLAINTEXT://127.0.0.1:58751"],"jmx_port":-1,"port":58751,
         "host":"127.0.0.1","version":5,"timestamp":"1795614306449"}
        (with broker.rack the "rack" key comes right after "endpoints")
    /brokers/topics/<t>
        {"partitions":{"0":[0],"1":[0],"2":[0]},"topic_id":"LgEDxExRTPGleSB9IPLLJQ",
         "adding_replicas":{},"removing_replicas":{},"version":3}
    /brokers/topics/<t>/partitions/<p>/state
        {"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}
        (a RECOVERING partition adds "leader_recovery_state":1 after "version")
    /brokers/seqid, /brokers/topics/<t>/partitions[/<p>]    no data (null)
    /config/topics/<t>               {"version":1,"config":{"cleanup.policy":"compact","retention.ms":"54321"}}
    /config/brokers/0                {"version":1,"config":{"log.cleaner.threads":"2"}}
    /config/changes/config_change_0000000000   {"version":2,"entity_path":"topics/dump-topic"}
    /controller  (ephemeral)         {"version":2,"brokerid":0,"timestamp":"1795614306510","kraftControllerEpoch":-1}
    /controller_epoch                1          (plain decimal, zkVersion 1 after the first election)
    /feature                         {"features":{},"version":2,"status":1}
    /latest_producer_id_block        {"version":1,"broker":0,"block_start":"0","block_end":"999"}
    /admin/reassign_partitions       {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}
    /admin/preferred_replica_election, /isr_change_notification/isr_change_<seq>
                                     {"version":1,"partitions":[{"topic":"t","partition":0}]}
    /log_dir_event_notification/log_dir_event_<seq>   {"version":1,"broker":0,"event":1}
"""
from __future__ import annotations

import base64
import functools
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

from kafkalite.cluster.topic_partition import TopicPartition
from kafkalite.controller.states import LeaderAndIsr, LeaderIsrAndControllerEpoch, LeaderRecoveryState


class ZNodeDecodeError(ValueError):
    """A znode's data is not a document Kafka would read."""


# ---- paths -------------------------------------------------------------------------------------

CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
FEATURE_PATH = "/feature"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONSUMERS_PATH = "/consumers"

# Kafka's ConfigType names: the children of /config
CONFIG_TYPE_TOPIC = "topics"
CONFIG_TYPE_CLIENT = "clients"
CONFIG_TYPE_USER = "users"
CONFIG_TYPE_BROKER = "brokers"
CONFIG_TYPE_IP = "ips"
CONFIG_TYPES = (CONFIG_TYPE_TOPIC, CONFIG_TYPE_CLIENT, CONFIG_TYPE_USER, CONFIG_TYPE_BROKER,
                CONFIG_TYPE_IP)

# The persistent paths every Kafka broker makes sure exist at start-up (ZkData.PersistentZkPaths).
PERSISTENT_ZK_PATHS = (CONSUMERS_PATH, BROKER_IDS_PATH, TOPICS_PATH, CONFIG_CHANGES_PATH,
                       DELETE_TOPICS_PATH, BROKER_SEQUENCE_ID_PATH, ISR_CHANGE_NOTIFICATION_PATH,
                       PRODUCER_ID_BLOCK_PATH, LOG_DIR_EVENT_NOTIFICATION_PATH) + \
    tuple(f"{CONFIG_PATH}/{t}" for t in CONFIG_TYPES)

# KafkaController's first epoch: /controller_epoch is created with 0 and the first elected
# controller moves it to 1.
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def topic_partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def sequence_number(node_name: str, prefix: str) -> str:
    """The sequence suffix of a sequential node's name ("isr_change_0000000003" -> "0000000003")."""
    return node_name[node_name.rfind(prefix) + len(prefix):]


# ---- JSON in Kafka's byte form -----------------------------------------------------------------

def _dump(obj: Any) -> bytes:
    # Jackson's compact output: no spaces, non-ASCII as UTF-8, the same short escapes
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _load(data: Optional[bytes], what: str) -> Any:
    if not data:
        raise ZNodeDecodeError(f"empty {what} znode")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ZNodeDecodeError(f"Failed to parse {what}: {data[:200]!r}: {e}") from None


def _obj(data: Optional[bytes], what: str) -> dict:
    doc = _load(data, what)
    if not isinstance(doc, dict):
        raise ZNodeDecodeError(f"{what} is not a JSON object: {data[:200]!r}")
    return doc


def _int(doc: Mapping, key: str, what: str) -> int:
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        # Jackson converts numeric strings too where Kafka reads an Int (e.g. an old "version":"1")
        if isinstance(v, str):
            try:
                return int(v)
            except ValueError:
                pass
        raise ZNodeDecodeError(f"{what}: {key!r} is not an integer: {v!r}")
    return v


def _int_list(v: Any, what: str) -> tuple[int, ...]:
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise ZNodeDecodeError(f"{what}: not a list of integers: {v!r}")
    return tuple(v)


# ---- Java/Scala hash-map iteration orders (for Kafka's key order) ------------------------------

@functools.lru_cache(maxsize=1 << 16)
def java_string_hash(s: str) -> int:
    """Java's String.hashCode as an unsigned 32-bit value (over UTF-16 code units). Cached: the
    keys hashed are partition numbers, config names and topic names, the same ones again and
    again (the assignment of a 1,000-partition topic orders 1,000 keys: 0.8 -> 0.1 ms)."""
    h = 0
    if s.isascii():        # one UTF-16 unit per byte: the common case, twice as fast
        for c in s.encode("ascii"):
            h = (31 * h + c) & 0xFFFFFFFF
        return h
    b = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(b), 2):
        h = (31 * h + ((b[i] << 8) | b[i + 1])) & 0xFFFFFFFF
    return h


def _s32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


def scala_mutable_map_order(keys: Sequence[str], initial_table_size: int = 16) -> list[str]:
    """Iteration order of a Scala 2.13 mutable.HashMap holding `keys` (inserted in that order):
    buckets by the spread hash, ascending hash within a bucket; the table doubles once it is
    three quarters full."""
    size = initial_table_size
    while len(keys) >= size * 0.75:
        size *= 2

    def position(item: tuple[int, str]) -> tuple[int, int, int]:
        index, key = item
        h = java_string_hash(key)
        spread = h ^ (h >> 16)
        return spread & (size - 1), _s32(spread), index
    return [k for _, k in sorted(enumerate(keys), key=position)]


def _scala_improve(hcode: int) -> int:
    h = _s32(hcode)
    h = _s32(h + ~_s32(h << 9))
    h = _s32(h ^ ((h & 0xFFFFFFFF) >> 14))
    h = _s32(h + _s32(h << 4))
    return _s32(h ^ ((h & 0xFFFFFFFF) >> 10))


def _champ_order(items: list[tuple[str, int]], shift: int) -> list[str]:
    if shift >= 35:      # full hash collision: a collision node keeps insertion order
        return [k for k, _ in items]
    groups: dict[int, list[tuple[str, int]]] = {}
    for key, h in items:
        groups.setdefault(((h & 0xFFFFFFFF) >> shift) & 31, []).append((key, h))
    # a CHAMP node iterates its own entries first, then its sub-nodes, each in bit order
    data = [g[0][0] for _, g in sorted(groups.items()) if len(g) == 1]
    nodes = [k for _, g in sorted(groups.items()) if len(g) > 1 for k in _champ_order(g, shift + 5)]
    return data + nodes


def scala_immutable_map_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a Scala 2.13 immutable Map: insertion order up to 4 entries (Map1-4),
    the CHAMP trie's order beyond."""
    keys = list(dict.fromkeys(keys))
    if len(keys) <= 4:
        return keys
    return _champ_order([(k, _scala_improve(java_string_hash(k))) for k in keys], 0)


def java_hash_map_order(keys: Sequence[str], initial_table_size: int = 16,
                        resize_at_threshold: bool = False) -> list[str]:
    """Iteration order of java.util.HashMap (and of ConcurrentHashMap with
    `resize_at_threshold`): bins by the spread hash, insertion order within a bin."""
    size = initial_table_size
    while (len(keys) >= size * 0.75) if resize_at_threshold else (len(keys) > size * 0.75):
        size *= 2

    def position(item: tuple[int, str]) -> tuple[int, int]:
        index, key = item
        h = java_string_hash(key)
        return (h ^ (h >> 16)) & (size - 1), index
    return [k for _, k in sorted(enumerate(keys), key=position)]


def properties_order(keys: Sequence[str]) -> list[str]:
    """Order in which Jackson writes a java.util.Properties (a ConcurrentHashMap of 16 bins)."""
    return java_hash_map_order(list(dict.fromkeys(keys)), 16, resize_at_threshold=True)


def _ordered(doc: Mapping[str, Any], order: Iterable[str]) -> dict[str, Any]:
    return {k: doc[k] for k in order}


# ---- Kafka's Uuid ------------------------------------------------------------------------------

def uuid_to_kafka_string(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def uuid_from_kafka_string(s: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    except (ValueError, TypeError):
        raise ZNodeDecodeError(f"Invalid Kafka Uuid {s!r}") from None
    if len(s) != 22 or len(raw) != 16:
        raise ZNodeDecodeError(f"Invalid Kafka Uuid {s!r}: not 16 bytes")
    return uuid.UUID(bytes=raw)


# ---- /cluster/id -------------------------------------------------------------------------------

def encode_cluster_id(cluster_id: str) -> bytes:
    # "version" is a string here, unlike every other znode
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    doc = _obj(data, "cluster id")
    cid = doc.get("id")
    if not isinstance(cid, str):
        raise ZNodeDecodeError(f"Failed to parse the cluster id json {data!r}")
    return cid


# ---- /controller, /controller_epoch ------------------------------------------------------------

@dataclass(frozen=True)
class ControllerRegistration:
    broker_id: int
    timestamp: int = 0
    kraft_controller_epoch: int = -1      # -1: a ZooKeeper-mode controller
    version: int = 2


def encode_controller(reg: ControllerRegistration) -> bytes:
    return _dump({"version": 2, "brokerid": reg.broker_id, "timestamp": str(reg.timestamp),
                  "kraftControllerEpoch": reg.kraft_controller_epoch})


def decode_controller(data: bytes) -> ControllerRegistration:
    doc = _obj(data, "controller registration")
    ts = doc.get("timestamp", 0)
    try:
        timestamp = int(ts)
    except (TypeError, ValueError):
        timestamp = 0
    kraft_epoch = doc.get("kraftControllerEpoch")
    return ControllerRegistration(
        broker_id=_int(doc, "brokerid", "controller registration"), timestamp=timestamp,
        kraft_controller_epoch=-1 if kraft_epoch is None else int(kraft_epoch),
        version=_int(doc, "version", "controller registration") if "version" in doc else 1)


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode())
    except (ValueError, UnicodeDecodeError, AttributeError):
        raise ZNodeDecodeError(f"Invalid controller epoch {data!r}") from None


# ---- /brokers/ids/<id> -------------------------------------------------------------------------

# Kafka's default listener name -> security protocol map, for registrations without one
DEFAULT_SECURITY_PROTOCOL_MAP = {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}


@dataclass(frozen=True)
class EndPoint:
    host: Optional[str]
    port: int
    listener_name: str
    security_protocol: str

    @property
    def connection_string(self) -> str:
        if self.host is None:
            return f"{self.listener_name}://:{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


def parse_endpoint(connection_string: str, protocol_map: Mapping[str, str]) -> EndPoint:
    """"NAME://host:port" (host may be empty or a bracketed IPv6 address)."""
    name, sep, rest = connection_string.partition("://")
    host, colon, port = rest.rpartition(":")
    if not sep or not colon or not name:
        raise ZNodeDecodeError(f"Unable to parse {connection_string!r} to a broker endpoint")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port_number = int(port)
    except ValueError:
        raise ZNodeDecodeError(f"Invalid port in endpoint {connection_string!r}") from None
    listener = name.upper()
    protocol = protocol_map.get(listener)
    if protocol is None:
        raise ZNodeDecodeError(f"No security protocol defined for listener {listener} "
                               f"in {connection_string!r}")
    return EndPoint(host or None, port_number, listener, protocol)


@dataclass(frozen=True)
class SupportedVersionRange:
    min_version: int
    max_version: int


@dataclass(frozen=True)
class BrokerRegistration:
    """/brokers/ids/<id>: Kafka's BrokerInfo."""
    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: Optional[str] = None
    features: Mapping[str, SupportedVersionRange] = field(default_factory=dict)
    jmx_port: int = -1
    timestamp: int = 0          # ms; written as a string
    version: int = 5

    def endpoint(self, listener_name: str) -> Optional[EndPoint]:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


def encode_broker_registration(reg: BrokerRegistration) -> bytes:
    # the top-level host/port are the first PLAINTEXT endpoint's, for old clients
    plaintext = next((e for e in reg.endpoints if e.security_protocol == "PLAINTEXT"), None)
    doc: dict[str, Any] = {
        "version": reg.version,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [e.connection_string for e in reg.endpoints],
        "jmx_port": reg.jmx_port,
        "timestamp": str(reg.timestamp),
    }
    if reg.rack is not None and reg.version >= 3:
        doc["rack"] = reg.rack
    if reg.version >= 4:
        listener_map = {e.listener_name: e.security_protocol for e in reg.endpoints}
        doc["listener_security_protocol_map"] = _ordered(
            listener_map, scala_immutable_map_order(list(listener_map)))
    if reg.version >= 5:
        # Features.toMap: a java.util.HashMap of LinkedHashMaps {min_version, max_version}
        doc["features"] = {
            name: {"min_version": reg.features[name].min_version,
                   "max_version": reg.features[name].max_version}
            for name in java_hash_map_order(list(reg.features))}
    return _dump(_ordered(doc, scala_mutable_map_order(list(doc), 16)))


def decode_broker_registration(broker_id: int, data: bytes) -> BrokerRegistration:
    what = f"registration of broker {broker_id}"
    doc = _obj(data, what)
    version = _int(doc, "version", what)
    jmx_port = _int(doc, "jmx_port", what) if "jmx_port" in doc else -1
    if version < 1:
        raise ZNodeDecodeError(f"Unsupported version of broker registration: {data!r}")
    if version == 1:
        host = doc.get("host")
        endpoints: tuple[EndPoint, ...] = (
            EndPoint(host if isinstance(host, str) else None, _int(doc, "port", what),
                     "PLAINTEXT", "PLAINTEXT"),)
    else:
        protocol_map = doc.get("listener_security_protocol_map")
        if protocol_map is None:
            protocol_map = DEFAULT_SECURITY_PROTOCOL_MAP
        elif not isinstance(protocol_map, dict):
            raise ZNodeDecodeError(f"{what}: bad listener_security_protocol_map")
        raw = doc.get("endpoints")
        if not isinstance(raw, list) or not all(isinstance(e, str) for e in raw):
            raise ZNodeDecodeError(f"{what}: bad endpoints {raw!r}")
        endpoints = tuple(parse_endpoint(e, protocol_map) for e in raw)
    rack = doc.get("rack")
    features: dict[str, SupportedVersionRange] = {}
    for name, vr in (doc.get("features") or {}).items():
        try:
            features[name] = SupportedVersionRange(int(vr["min_version"]), int(vr["max_version"]))
        except (KeyError, TypeError, ValueError):
            raise ZNodeDecodeError(f"{what}: bad feature {name!r}: {vr!r}") from None
    try:
        timestamp = int(doc.get("timestamp", 0))
    except (TypeError, ValueError):
        timestamp = 0
    return BrokerRegistration(broker_id=broker_id, endpoints=endpoints,
                              rack=rack if isinstance(rack, str) else None, features=features,
                              jmx_port=jmx_port, timestamp=timestamp, version=version)


# ---- /brokers/topics/<t> -----------------------------------------------------------------------

@dataclass(frozen=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment completes (Kafka's targetReplicas)."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment started (Kafka's originReplicas)."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    def reassign_to(self, target: Sequence[int]) -> "ReplicaAssignment":
        """The assignment while moving to `target`: origin + target, with adding/removing."""
        full = tuple(dict.fromkeys(tuple(target) + self.origin_replicas))
        return ReplicaAssignment(full, tuple(r for r in full if r not in self.origin_replicas),
                                 tuple(r for r in full if r not in target))

    def remove_replica(self, replica: int) -> "ReplicaAssignment":
        return ReplicaAssignment(tuple(r for r in self.replicas if r != replica),
                                 tuple(r for r in self.adding_replicas if r != replica),
                                 tuple(r for r in self.removing_replicas if r != replica))


@dataclass(frozen=True)
class TopicAssignment:
    """/brokers/topics/<t>: Kafka's TopicIdReplicaAssignment."""
    topic: str
    topic_id: Optional[uuid.UUID]
    partitions: Mapping[int, ReplicaAssignment]


def encode_topic_assignment(topic_id: Optional[uuid.UUID],
                            partitions: Mapping[int, ReplicaAssignment]) -> bytes:
    def partition_map(pick) -> dict[str, list[int]]:
        m = {str(p): list(pick(a)) for p, a in partitions.items() if pick(a)}
        return _ordered(m, scala_mutable_map_order(list(m), 16))
    replicas = {str(p): list(a.replicas) for p, a in partitions.items()}
    doc: dict[str, Any] = {
        "version": 3,
        "partitions": _ordered(replicas, scala_mutable_map_order(list(replicas), 16)),
        "adding_replicas": partition_map(lambda a: a.adding_replicas),
        "removing_replicas": partition_map(lambda a: a.removing_replicas),
    }
    if topic_id is not None:
        doc["topic_id"] = uuid_to_kafka_string(topic_id)
    # mutable.Map of 4 entries: an 8-bucket table
    return _dump(_ordered(doc, scala_mutable_map_order(list(doc), 8)))


def decode_topic_assignment(topic: str, data: Optional[bytes]) -> TopicAssignment:
    if not data:
        return TopicAssignment(topic, None, {})
    what = f"assignment of topic {topic}"
    doc = _obj(data, what)
    raw_id = doc.get("topic_id")
    topic_id = uuid_from_kafka_string(raw_id) if isinstance(raw_id, str) else None
    adding = doc.get("adding_replicas") or {}
    removing = doc.get("removing_replicas") or {}
    partitions: dict[int, ReplicaAssignment] = {}
    # a topic of 10,000 partitions has few distinct assignments: equal ones share one value
    settled: dict[tuple[int, ...], ReplicaAssignment] = {}
    for p, replicas in (doc.get("partitions") or {}).items():
        try:
            partition = int(p)
        except ValueError:
            raise ZNodeDecodeError(f"{what}: bad partition {p!r}") from None
        replica_ids = _int_list(replicas, what)
        if p in adding or p in removing:
            partitions[partition] = ReplicaAssignment(
                replica_ids, _int_list(adding.get(p, []), what), _int_list(removing.get(p, []), what))
        else:
            assignment = settled.get(replica_ids)
            if assignment is None:
                assignment = settled[replica_ids] = ReplicaAssignment(replica_ids)
            partitions[partition] = assignment
    return TopicAssignment(topic, topic_id, dict(sorted(partitions.items())))


# ---- /brokers/topics/<t>/partitions/<p>/state --------------------------------------------------

# LeaderAndIsr and LeaderIsrAndControllerEpoch are the controller's own types (controller/states.py)
LEADER_RECOVERY_RECOVERED = int(LeaderRecoveryState.RECOVERED)
LEADER_RECOVERY_RECOVERING = int(LeaderRecoveryState.RECOVERING)


_STATE_KEYS = scala_immutable_map_order(["version", "leader", "leader_epoch", "controller_epoch", "isr"])
_STATE_KEYS_RECOVERY = scala_immutable_map_order(
    ["version", "leader", "leader_epoch", "controller_epoch", "isr", "leader_recovery_state"])


# A recovered leader's state (nearly every one) written without json.dumps: the controller writes
# one per partition it creates or moves, and 1,000 of them through json.dumps were ~4 ms of one step
# on the event loop (~0.8 ms this way). The keys in _STATE_KEYS' order; a test compares the bytes.
_STATE_FORMAT = b'{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":%d,"isr":[%b]}'
assert _STATE_KEYS == ["controller_epoch", "leader", "version", "leader_epoch", "isr"]


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    lai = state.leader_and_isr
    if lai.leader_recovery_state == LEADER_RECOVERY_RECOVERED:
        return _STATE_FORMAT % (state.controller_epoch, lai.leader, lai.leader_epoch,
                                b",".join(b"%d" % r for r in lai.isr))
    return encode_partition_state_json(state)


def encode_partition_state_json(state: LeaderIsrAndControllerEpoch) -> bytes:
    """Any state through the JSON writer (keys in Kafka's order; leader_recovery_state only when
    the leader is not recovered)."""
    lai = state.leader_and_isr
    doc = {"version": 1, "leader": lai.leader, "leader_epoch": lai.leader_epoch,
           "controller_epoch": state.controller_epoch, "isr": list(lai.isr)}
    if lai.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
        doc["leader_recovery_state"] = int(lai.leader_recovery_state)
        return _dump(_ordered(doc, _STATE_KEYS_RECOVERY))
    return _dump(_ordered(doc, _STATE_KEYS))


def decode_partition_state(data: bytes, zk_version: int = 0) -> LeaderIsrAndControllerEpoch:
    what = "partition state"
    doc = _obj(data, what)
    recovery = doc.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED)
    if recovery not in (LEADER_RECOVERY_RECOVERED, LEADER_RECOVERY_RECOVERING):
        raise ZNodeDecodeError(f"{what}: unknown leader_recovery_state {recovery!r}")
    return LeaderIsrAndControllerEpoch(
        LeaderAndIsr(leader=_int(doc, "leader", what), leader_epoch=_int(doc, "leader_epoch", what),
                     isr=_int_list(doc.get("isr"), what), leader_recovery_state=LeaderRecoveryState(recovery),
                     partition_epoch=zk_version),
        controller_epoch=_int(doc, "controller_epoch", what))


def partition_state_with_version(state: LeaderIsrAndControllerEpoch, zk_version: int) -> LeaderIsrAndControllerEpoch:
    """The same decoded state as read from a znode at `zk_version` (its partition epoch)."""
    lai = state.leader_and_isr
    if lai.partition_epoch == zk_version:
        return state
    return LeaderIsrAndControllerEpoch(
        LeaderAndIsr(lai.leader, lai.leader_epoch, lai.isr, lai.leader_recovery_state, zk_version),
        state.controller_epoch)


# ---- /config/<type>/<entity>, /config/changes --------------------------------------------------

def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """{"version":1,"config":{...}}; config values are strings, in java.util.Properties order."""
    return _dump({"version": 1, "config": _ordered(
        {k: str(v) for k, v in config.items()}, properties_order(list(config)))})


def decode_entity_config(data: Optional[bytes]) -> dict[str, str]:
    if not data:
        return {}
    doc = _load(data, "entity config")
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        return {}
    out: dict[str, str] = {}
    for k, v in config.items():
        if not isinstance(v, str):
            raise ZNodeDecodeError(f"entity config: value of {k!r} is not a string: {v!r}")
        out[k] = v
    return out


def encode_config_change(entity_path: str) -> bytes:
    """A /config/changes/config_change_<seq> notification: entity path "topics/<t>",
    "brokers/<id>", "brokers/<default>", "users/<u>/clients/<c>"..."""
    return _dump({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    """The entity path of a notification; version 1 ({"entity_type","entity_name"}) too."""
    what = "config change notification"
    doc = _obj(data, what)
    version = _int(doc, "version", what)
    if version == 1:
        etype, name = doc.get("entity_type"), doc.get("entity_name")
        if not isinstance(etype, str) or not isinstance(name, str):
            raise ZNodeDecodeError(f"{what}: version 1 needs entity_type and entity_name: {data!r}")
        return f"{etype}/{name}"
    if version == 2:
        path = doc.get("entity_path")
        if not isinstance(path, str) or "/" not in path:
            raise ZNodeDecodeError(f"{what}: bad entity_path in {data!r}")
        return path
    raise ZNodeDecodeError(f"{what}: unsupported version {version}")


# ---- /latest_producer_id_block -----------------------------------------------------------------

PRODUCER_ID_BLOCK_SIZE = 1000


@dataclass(frozen=True)
class ProducerIdsBlock:
    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


def encode_producer_id_block(block: ProducerIdsBlock) -> bytes:
    return _dump({"version": 1, "broker": block.assigned_broker_id,
                  "block_start": str(block.first_producer_id),
                  "block_end": str(block.last_producer_id)})


def decode_producer_id_block(data: bytes) -> ProducerIdsBlock:
    what = "producer id block"
    doc = _obj(data, what)
    try:
        start, end = int(doc["block_start"]), int(doc["block_end"])
    except (KeyError, TypeError, ValueError):
        raise ZNodeDecodeError(f"Failed to parse the producerId block json {data!r}") from None
    return ProducerIdsBlock(_int(doc, "broker", what), start, end - start + 1)


# ---- /feature ----------------------------------------------------------------------------------

FEATURE_STATUS_DISABLED = 0
FEATURE_STATUS_ENABLED = 1


@dataclass(frozen=True)
class FeatureZNode:
    version: int                      # 2 for IBP >= 3.3 (no min_version_level)
    status: int                       # FEATURE_STATUS_*
    features: Mapping[str, int]       # finalized max version level per feature


def encode_feature(node: FeatureZNode) -> bytes:
    def levels(level: int) -> dict[str, int]:
        # Map1/Map2: insertion order, max before min
        if node.version == 1:
            return {"max_version_level": level, "min_version_level": level}
        return {"max_version_level": level}
    features = {name: levels(node.features[name])
                for name in scala_immutable_map_order(list(node.features))}
    doc = {"version": node.version, "status": node.status, "features": features}
    return _dump(_ordered(doc, scala_mutable_map_order(list(doc), 8)))


def decode_feature(data: bytes) -> FeatureZNode:
    what = "feature information"
    doc = _obj(data, what)
    version = _int(doc, "version", what)
    if version not in (1, 2):
        raise ZNodeDecodeError(f"Unsupported version: {version} of {what}: {data!r}")
    status = doc.get("status")
    if status not in (FEATURE_STATUS_DISABLED, FEATURE_STATUS_ENABLED):
        raise ZNodeDecodeError(f"Malformed status {status!r} in {what}: {data!r}")
    raw = doc.get("features")
    if not isinstance(raw, dict):
        raise ZNodeDecodeError(f"Features map can not be absent in: {data!r}")
    features: dict[str, int] = {}
    for name, levels in raw.items():
        if not isinstance(levels, dict) or "max_version_level" not in levels or \
                (version == 1 and "min_version_level" not in levels):
            raise ZNodeDecodeError(f"{what}: bad levels of {name!r}: {levels!r}")
        max_level = int(levels["max_version_level"])
        if max_level < 1:
            raise ZNodeDecodeError(f"Expected maxValue >= 1, but received maxValue: {max_level}")
        features[name] = max_level
    return FeatureZNode(version, status, features)


# ---- /admin/reassign_partitions, /admin/preferred_replica_election -----------------------------

def encode_reassignment(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    return _dump({"version": 1, "partitions": [
        {"topic": tp[0], "partition": tp[1], "replicas": list(replicas)}
        for tp, replicas in reassignment.items()]})


def _partition_list(data: bytes, what: str, with_replicas: bool) -> list[tuple[TopicPartition, Any]]:
    doc = _obj(data, what)
    raw = doc.get("partitions")
    if not isinstance(raw, list):
        raise ZNodeDecodeError(f"{what}: no partitions list in {data!r}")
    out = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ZNodeDecodeError(f"{what}: bad entry {entry!r}")
        tp = TopicPartition(entry["topic"], _int(entry, "partition", what))
        out.append((tp, _int_list(entry.get("replicas"), what) if with_replicas else None))
    return out


def decode_reassignment(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    return dict(_partition_list(data, "partition reassignment", True))


def _encode_partition_set(partitions: Iterable[TopicPartition]) -> bytes:
    return _dump({"version": 1, "partitions": [
        {"topic": tp[0], "partition": tp[1]} for tp in partitions]})


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_set(partitions)


def decode_preferred_replica_election(data: bytes) -> set[TopicPartition]:
    return {tp for tp, _ in _partition_list(data, "preferred replica election", False)}


# ---- /isr_change_notification, /log_dir_event_notification -------------------------------------

def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_set(partitions)


def decode_isr_change_notification(data: bytes) -> set[TopicPartition]:
    return {tp for tp, _ in _partition_list(data, "isr change notification", False)}


LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    return _dump({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    return _int(_obj(data, "log dir event"), "broker", "log dir event")
