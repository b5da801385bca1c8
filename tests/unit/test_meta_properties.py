"""meta.properties (kafkalite/server/meta_properties.py): the file's text as Kafka 3.9 writes it,
parsing with Kafka's checks and messages (hostile files included), and the ensemble's verification
against the cluster id and broker id."""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from kafkalite.config.properties import store_properties
from kafkalite.server.meta_properties import (MetaProperties, MetaPropertiesEnsemble, MetaPropertiesError,
                                              broker_id_of, java_date_string, load_ensemble, meta_properties_text,
                                              parse_meta_properties, write_meta_properties)

CLUSTER = "AbCdEfGhIjKlMnOpQrStUv"
# 2026-11-28 02:51:54 UTC, a Saturday
WHEN = time.struct_time((2026, 11, 28, 2, 51, 54, 5, 332, 0, "UTC", 0))


def test_text_is_what_kafka_writes() -> None:
    # Kafka 3.9.1 on Java 17: Properties.store(writer, "") of version, cluster.id, broker.id
    assert meta_properties_text(MetaProperties(0, CLUSTER, 1001), WHEN) == (
        "#\n#Sat Nov 28 02:51:54 UTC 2026\nbroker.id=1001\nversion=0\ncluster.id=AbCdEfGhIjKlMnOpQrStUv\n")


def test_java_date_string_pads_the_day() -> None:
    t = time.struct_time((2025, 3, 2, 9, 5, 7, 6, 61, 0, "CET", 3600))
    assert java_date_string(t) == "Sun Mar 02 09:05:07 CET 2025"


def test_store_properties_escapes_as_java() -> None:
    text = store_properties({"a key": " lead = x:#!\\\t", "k": "é"}, comments=None, date="D")
    assert text == "#D\na\\ key=\\ lead \\= x\\:\\#\\!\\\\\\t\nk=é\n"


def _write(d: Path, content: bytes | str) -> str:
    d.mkdir(parents=True, exist_ok=True)
    data = content.encode("latin-1") if isinstance(content, str) else content
    (d / "meta.properties").write_bytes(data)
    return str(d)


def test_written_file_reads_back_and_leaves_no_tmp(tmp_path: Path) -> None:
    meta = MetaProperties(0, CLUSTER, 7)
    write_meta_properties(str(tmp_path), meta)
    assert sorted(os.listdir(tmp_path)) == ["meta.properties"]
    ensemble = load_ensemble([str(tmp_path)])
    assert ensemble.log_dir_props == {str(tmp_path): meta} and ensemble.empty_log_dirs == frozenset()


def test_parse_version_0_without_ids_and_with_comments() -> None:
    assert parse_meta_properties({}) == MetaProperties(0, None, None)
    assert parse_meta_properties({"broker.id": "+12", "cluster.id": "c"}) == MetaProperties(0, "c", 12)
    assert parse_meta_properties({"version": " 1 ", "node.id": "3", "cluster.id": "c"}) == MetaProperties(1, "c", 3)


@pytest.mark.parametrize("props, message", [
    ({"version": "abc"}, "Invalid meta.properties version string 'abc'"),
    ({"version": ""}, "Invalid meta.properties version string ''"),
    ({"version": "2"}, "Unknown meta.properties version number 2"),
    ({"version": "0", "broker.id": "x1"}, "Unable to read broker.id as a base-10 number."),
    ({"broker.id": "2147483648"}, "Unable to read broker.id as a base-10 number."),
    ({"broker.id": "5 "}, "Unable to read broker.id as a base-10 number."),
    ({"version": "1", "cluster.id": "c"}, "Failed to find node.id"),
    ({"version": "1", "node.id": "1"}, "cluster.id was not found."),
    ({"directory.id": "nope"}, "Unable to read directory.id as a Uuid: Invalid Kafka Uuid 'nope': not 16 bytes"),
])
def test_parse_refuses_like_kafka(props: dict[str, str], message: str) -> None:
    with pytest.raises(MetaPropertiesError) as e:
        parse_meta_properties(props)
    assert str(e.value) == message


@pytest.mark.parametrize("content, cause", [
    ("version=7\n", "Unknown meta.properties version number 7"),
    ("broker.id=\\u12G4\n", "Malformed \\uxxxx encoding."),
    (b"\x00\xff\xfe garbage\nversion=\xe9\x89PNG\r\n\x1a\n", "Invalid meta.properties version string '\xe9\x89PNG'"),
    ("version 0\nbroker.id = seven\n", "Unable to read broker.id as a base-10 number."),
])
def test_hostile_file_stops_with_its_path(tmp_path: Path, content: bytes | str, cause: str) -> None:
    d = _write(tmp_path / "d", content)
    with pytest.raises(MetaPropertiesError) as e:
        load_ensemble([d])
    path = tmp_path / "d" / "meta.properties"
    assert str(e.value).startswith(f"Error while reading meta.properties file {path}: {cause}")


def test_garbage_without_a_version_line_is_a_version_0_file(tmp_path: Path) -> None:
    # Properties.load reads any text: unknown keys are ignored, a missing version is 0
    d = _write(tmp_path / "d", b"\x00\xff junk\nbroker.id=4\n")
    assert load_ensemble([d]).log_dir_props == {d: MetaProperties(0, None, 4)}


def test_meta_properties_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d" / "meta.properties").mkdir(parents=True)
    with pytest.raises(MetaPropertiesError) as e:
        load_ensemble([str(tmp_path / "d")])
    path = tmp_path / "d" / "meta.properties"
    assert str(e.value) == f"Error while reading meta.properties file {path}: Is a directory"


def test_missing_files_and_dirs_are_empty(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    os.mkdir(a)
    ensemble = load_ensemble([b, a])
    assert ensemble.empty_log_dirs == {a, b} and ensemble.log_dir_props == {}
    assert ensemble.node_id() is None
    fresh = MetaProperties(0, CLUSTER, 1001)
    assert ensemble.rewritten(CLUSTER, 1001) == {a: fresh, b: fresh}


def _ensemble(**dirs: MetaProperties) -> MetaPropertiesEnsemble:
    return MetaPropertiesEnsemble(frozenset(), dirs)


def test_verify_refuses_another_cluster() -> None:
    with pytest.raises(MetaPropertiesError) as e:
        _ensemble(a=MetaProperties(0, "other", 1)).verify(CLUSTER, None)
    assert str(e.value) == f"Invalid cluster.id in: a/meta.properties. Expected {CLUSTER}, but read other"


def test_verify_refuses_another_broker_id() -> None:
    with pytest.raises(MetaPropertiesError) as e:
        _ensemble(a=MetaProperties(0, CLUSTER, 1001)).verify(CLUSTER, 3)
    assert str(e.value) == (
        "Stored node id 1001 doesn't match previous node id 3 in a/meta.properties. If you moved your data, "
        "make sure your configured node id matches. If you intend to create a new node, you should remove "
        "all data in your data directories.")


def test_verify_refuses_dirs_that_disagree() -> None:
    with pytest.raises(MetaPropertiesError) as e:
        _ensemble(a=MetaProperties(0, CLUSTER, 1), b=MetaProperties(0, CLUSTER, 2)).verify(CLUSTER, None)
    assert str(e.value).startswith("Stored node id 2 doesn't match previous node id 1 in b/meta.properties.")
    with pytest.raises(MetaPropertiesError) as e:
        _ensemble(a=MetaProperties(0, "x"), b=MetaProperties(0, "y")).verify(None, None)
    assert str(e.value) == "Invalid cluster.id in: b/meta.properties. Expected x, but read y"


def test_verify_refuses_a_kraft_file_in_zookeeper_mode() -> None:
    with pytest.raises(MetaPropertiesError) as e:
        _ensemble(a=MetaProperties(1, CLUSTER, 1)).verify(CLUSTER, 1)
    assert str(e.value) == ("Found unexpected version in a/meta.properties. ZK-based brokers that are not "
                            "migrating only support version 0 (which is implicit when the `version` field is missing).")


def test_verify_directory_ids() -> None:
    with pytest.raises(MetaPropertiesError) as e:
        _ensemble(a=MetaProperties(0, CLUSTER, 1, uuid.UUID(int=1))).verify(CLUSTER, 1)
    assert str(e.value) == "Invalid resrved directory ID AAAAAAAAAAAAAAAAAAAAAQ found in a"
    same = uuid.UUID(int=99 << 64)
    with pytest.raises(MetaPropertiesError) as e:
        _ensemble(a=MetaProperties(0, CLUSTER, 1, same), b=MetaProperties(0, CLUSTER, 1, same)).verify(CLUSTER, 1)
    assert str(e.value) == ("Duplicate directory ID Optional[AAAAAAAAAGMAAAAAAAAAAA] found. "
                            "It was the ID of a, but also of b")


def test_verify_accepts_matching_and_id_less_files() -> None:
    _ensemble(a=MetaProperties(0, CLUSTER, 5), b=MetaProperties(0, None, None)).verify(CLUSTER, 5)
    _ensemble(a=MetaProperties(0, CLUSTER, 5)).verify(CLUSTER, None)


def test_broker_id_configured_then_stored_then_generated() -> None:
    stored = _ensemble(a=MetaProperties(0, CLUSTER, None), b=MetaProperties(0, CLUSTER, 1002))
    assert broker_id_of(4, stored, True) == 4
    assert broker_id_of(-1, stored, True) == 1002
    assert broker_id_of(-1, _ensemble(), True) is None
    with pytest.raises(MetaPropertiesError) as e:
        broker_id_of(-1, _ensemble(), False)
    assert str(e.value) == "No broker ID found, and false is disabled."


def test_rewritten_only_where_it_differs_keeping_the_directory_id() -> None:
    dir_id = uuid.UUID(int=42 << 64)
    ensemble = MetaPropertiesEnsemble(frozenset({"c"}), {"a": MetaProperties(0, CLUSTER, 1001),
                                                         "b": MetaProperties(0, None, None, dir_id)})
    assert ensemble.rewritten(CLUSTER, 1001) == {"b": MetaProperties(0, CLUSTER, 1001, dir_id),
                                                 "c": MetaProperties(0, CLUSTER, 1001)}
