"""meta.properties: the file in every log dir naming the cluster and the broker its data belongs to.

Kafka 3.9's MetaProperties / MetaPropertiesEnsemble (metadata.properties) in ZooKeeper mode: at
start-up the broker reads the file of each log dir, refuses to start when one names another
cluster (the ZooKeeper's /cluster/id), another broker id, or a version other than 0, takes its
broker id from the files when broker.id is -1 (else generates one), and then writes the file
(version 0, broker.id, cluster.id) into every log dir lacking it or holding other values.

The pure part is here: parsing, verification, the file's text. KafkaServer.startup does the
wiring (kafkalite/server/broker.py).
"""
from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, TypeVar

from kafkalite.config.dynamic_broker_config import java_properties_order
from kafkalite.config.properties import (PropertiesSyntaxError, java_trim, parse_java_integer, parse_properties,
                                         store_properties)
from kafkalite.controller.zk.znodes import ZNodeDecodeError, uuid_from_kafka_string, uuid_to_kafka_string
from kafkalite.fileio import atomic_write

__all__ = ["META_PROPERTIES_NAME", "MetaProperties", "MetaPropertiesEnsemble", "MetaPropertiesError",
           "broker_id_of", "load_ensemble", "meta_properties_path", "meta_properties_text",
           "parse_meta_properties", "write_meta_properties"]

META_PROPERTIES_NAME = "meta.properties"

T = TypeVar("T")

VERSION_PROP = "version"
CLUSTER_ID_PROP = "cluster.id"
BROKER_ID_PROP = "broker.id"
NODE_ID_PROP = "node.id"
DIRECTORY_ID_PROP = "directory.id"

# DirectoryId.UNASSIGNED, LOST and MIGRATING: Uuid(0, 0..2), never a real directory's id
_RESERVED_DIRECTORY_IDS = frozenset(uuid.UUID(int=i) for i in range(3))


class MetaPropertiesError(Exception):
    """A meta.properties that stops the broker: unreadable, or naming another cluster or broker."""


@dataclass(frozen=True)
class MetaProperties:
    """One log dir's file. Version 0 (ZooKeeper mode) may lack cluster.id and broker.id;
    version 1 (KRaft) always has cluster.id and node.id."""
    version: int = 0
    cluster_id: Optional[str] = None
    node_id: Optional[int] = None
    directory_id: Optional[uuid.UUID] = None

    def to_properties(self) -> dict[str, str]:
        """MetaProperties.toProperties: the keys in Kafka's insertion order."""
        props = {VERSION_PROP: str(self.version)}
        if self.cluster_id is not None:
            props[CLUSTER_ID_PROP] = self.cluster_id
        if self.node_id is not None:
            props[BROKER_ID_PROP if self.version == 0 else NODE_ID_PROP] = str(self.node_id)
        if self.directory_id is not None:
            props[DIRECTORY_ID_PROP] = uuid_to_kafka_string(self.directory_id)
        return props


def _required_int(props: Mapping[str, str], key: str) -> int:
    """PropertiesUtils.loadRequiredIntProp."""
    value = props.get(key)
    if value is None:
        raise MetaPropertiesError(f"Failed to find {key}")
    number = parse_java_integer(value)
    if number is None:
        raise MetaPropertiesError(f"Unable to read {key} as a base-10 number.")
    return number


def _version(props: Mapping[str, str]) -> int:
    """MetaPropertiesVersion.fromNumberString (a missing version is 0)."""
    text = props.get(VERSION_PROP, "0")
    trimmed = java_trim(text)
    number = parse_java_integer(trimmed)
    if number is None:
        raise MetaPropertiesError(f"Invalid meta.properties version string '{text}'")
    if number not in (0, 1):
        raise MetaPropertiesError(f"Unknown meta.properties version number {number}")
    return number


def parse_meta_properties(props: Mapping[str, str]) -> MetaProperties:
    """MetaProperties.Builder(Properties).build(): the checks, in Kafka's order and words."""
    version = _version(props)
    node_id: Optional[int] = None
    if version == 0:
        if BROKER_ID_PROP in props:
            node_id = _required_int(props, BROKER_ID_PROP)
    else:
        node_id = _required_int(props, NODE_ID_PROP)
    cluster_id = props.get(CLUSTER_ID_PROP)
    directory_id: Optional[uuid.UUID] = None
    if DIRECTORY_ID_PROP in props:
        try:
            directory_id = uuid_from_kafka_string(props[DIRECTORY_ID_PROP])
        except ZNodeDecodeError as e:
            raise MetaPropertiesError(f"Unable to read {DIRECTORY_ID_PROP} as a Uuid: {e}") from None
    if version != 0:
        if cluster_id is None:
            raise MetaPropertiesError("cluster.id was not found.")
    return MetaProperties(version, cluster_id, node_id, directory_id)


def meta_properties_path(log_dir: str) -> str:
    """new File(logDir, "meta.properties"): the path as Kafka's messages show it."""
    return os.path.join(log_dir, META_PROPERTIES_NAME)


def read_meta_properties(log_dir: str) -> Optional[MetaProperties]:
    """The file of one log dir, None when there is none. Properties.load(InputStream) reads
    ISO-8859-1."""
    path = meta_properties_path(log_dir)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise MetaPropertiesError(e.strerror or str(e)) from None
    try:
        props = parse_properties(raw.decode("latin-1"))
    except PropertiesSyntaxError:
        raise MetaPropertiesError("Malformed \\uxxxx encoding.") from None
    return parse_meta_properties(props)


@dataclass(frozen=True)
class MetaPropertiesEnsemble:
    """The files of all log dirs (keyed by the log dir as configured): those without one in
    `empty_log_dirs`. An unreadable file stops kafkalite at once (load_ensemble): Kafka would
    take that dir offline, and kafkalite has no offline log dirs."""
    empty_log_dirs: frozenset[str]
    log_dir_props: Mapping[str, MetaProperties]

    def node_id(self) -> Optional[int]:
        """The first broker id found (in log dir order), None when no file has one."""
        for _, meta in sorted(self.log_dir_props.items()):
            if meta.node_id is not None:
                return meta.node_id
        return None

    def verify(self, expected_cluster_id: Optional[str], expected_node_id: Optional[int],
               require_v0: bool = True) -> None:
        """MetaPropertiesEnsemble.verify: every file of version 0 (ZooKeeper mode), with the
        expected cluster id and broker id (or, where none is expected, the same as the other
        files), directory ids neither reserved nor shared."""
        seen: dict[uuid.UUID, str] = {}
        for log_dir, meta in sorted(self.log_dir_props.items()):
            path = meta_properties_path(log_dir)
            if require_v0 and meta.version != 0:
                raise MetaPropertiesError(
                    f"Found unexpected version in {path}. ZK-based brokers that are not migrating only "
                    "support version 0 (which is implicit when the `version` field is missing).")
            expected_cluster_id = _agreed(
                meta.cluster_id, expected_cluster_id, meta.version != 0,
                f"cluster.id was not specified in the v1 file: {path}",
                lambda: f"Invalid cluster.id in: {path}. Expected {expected_cluster_id}, but read {meta.cluster_id}")
            expected_node_id = _agreed(
                meta.node_id, expected_node_id, meta.version != 0, f"node.id was not specified in {path}",
                lambda: f"Stored node id {meta.node_id} doesn't match previous node id {expected_node_id} in "
                        f"{path}. If you moved your data, make sure your configured node id matches. If you "
                        "intend to create a new node, you should remove all data in your data directories.")
            if meta.directory_id is not None:
                if meta.directory_id in _RESERVED_DIRECTORY_IDS:
                    raise MetaPropertiesError(f"Invalid resrved directory ID "
                                              f"{uuid_to_kafka_string(meta.directory_id)} found in {log_dir}")
                previous = seen.setdefault(meta.directory_id, log_dir)
                if previous != log_dir:
                    raise MetaPropertiesError(
                        f"Duplicate directory ID Optional[{uuid_to_kafka_string(meta.directory_id)}] found. "
                        f"It was the ID of {previous}, but also of {log_dir}")

    def rewritten(self, cluster_id: str, broker_id: int) -> dict[str, MetaProperties]:
        """The log dirs whose file must be (re)written, with its new content: every dir's file
        with this cluster id and broker id (its version and directory id kept), where it differs."""
        out: dict[str, MetaProperties] = {}
        for log_dir in sorted(self.empty_log_dirs | set(self.log_dir_props)):
            old = self.log_dir_props.get(log_dir)
            new = replace(old or MetaProperties(), cluster_id=cluster_id, node_id=broker_id)
            if new != old:
                out[log_dir] = new
        return out


def _agreed(found: Optional[T], expected: Optional[T], required: bool, missing: str,
            mismatch: Callable[[], str]) -> Optional[T]:
    """One id of one file against the one expected: the expected one afterwards (the first found
    when none was expected); a required id missing, or another id, stops the broker."""
    if found is None:
        if required:
            raise MetaPropertiesError(missing)
        return expected
    if expected is not None and found != expected:
        raise MetaPropertiesError(mismatch())
    return found


def load_ensemble(log_dirs: Iterable[str]) -> MetaPropertiesEnsemble:
    """MetaPropertiesEnsemble.Loader.load: each log dir's file (dirs in sorted order, as Kafka's
    TreeSet). Kafka logs "Error while reading meta.properties file <path>" and takes the dir
    offline; kafkalite stops with that sentence and the cause."""
    empty: set[str] = set()
    props: dict[str, MetaProperties] = {}
    for log_dir in sorted(set(log_dirs)):
        try:
            meta = read_meta_properties(log_dir)
        except MetaPropertiesError as e:
            path = os.path.abspath(meta_properties_path(log_dir))
            raise MetaPropertiesError(f"Error while reading meta.properties file {path}: {e}") from None
        if meta is None:
            empty.add(log_dir)
        else:
            props[log_dir] = meta
    return MetaPropertiesEnsemble(frozenset(empty), props)


def broker_id_of(configured: int, ensemble: MetaPropertiesEnsemble, generation_enabled: bool) -> Optional[int]:
    """KafkaServer.getOrGenerateBrokerId without the generation: a configured id (>= 0) wins,
    else the one in meta.properties; None means "generate one" (broker.id.generation.enable)."""
    if configured >= 0:
        return configured
    stored = ensemble.node_id()
    if stored is not None:
        return stored
    if not generation_enabled:
        # Kafka's message, which interpolates the flag's value rather than its name
        raise MetaPropertiesError(f"No broker ID found, and {str(generation_enabled).lower()} is disabled.")
    return None


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def java_date_string(t: time.struct_time) -> str:
    """java.util.Date.toString ("EEE MMM dd HH:mm:ss zzz yyyy", English names whatever the locale)."""
    return (f"{_DAYS[t.tm_wday]} {_MONTHS[t.tm_mon - 1]} {t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:"
            f"{t.tm_sec:02d} {t.tm_zone} {t.tm_year}")


def meta_properties_text(meta: MetaProperties, now: Optional[time.struct_time] = None) -> str:
    """The file as Kafka writes it: Properties.store(writer, "") (an empty comment line, the date,
    then the entries in the iteration order of Java 17's Properties)."""
    props = meta.to_properties()
    ordered = {k: props[k] for k in java_properties_order(props)}
    return store_properties(ordered, comments="", date=java_date_string(now or time.localtime()))


def write_meta_properties(log_dir: str, meta: MetaProperties) -> None:
    """PropertiesUtils.writePropertiesFile with fsync: meta.properties.tmp written and synced,
    then renamed over meta.properties and the directory synced."""
    atomic_write(Path(meta_properties_path(log_dir)), meta_properties_text(meta).encode("utf-8"))
