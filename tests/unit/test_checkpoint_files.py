"""Small files read at start-up: partition.metadata in the form kafkalite and Kafka write it and
in the forms only the line parser reads, and files at and past the single read's size."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafkalite.log.checkpoint import (PARTITION_METADATA_FILE, CheckpointError, read_partition_metadata,
                                      read_small_file, topic_id_to_string, write_partition_metadata)

TOPIC_ID = uuid.UUID("d8d0a9e2-5a8b-4b7e-9c3a-0f1e2d3c4b5a")


def test_partition_metadata_as_written_is_read_back(tmp_path: Path) -> None:
    write_partition_metadata(tmp_path, TOPIC_ID)
    assert (tmp_path / PARTITION_METADATA_FILE).read_text() == \
        f"version: 0\ntopic_id: {topic_id_to_string(TOPIC_ID)}\n"
    assert read_partition_metadata(tmp_path) == TOPIC_ID


@pytest.mark.parametrize("text", [
    "version: 0\ntopic_id:   {id}  \n",            # spaces around the id
    "version:0\ntopic_id:{id}\n",                  # none after the colons
    "version: 0\r\ntopic_id: {id}\r\n",            # CRLF lines
    "version: 0\ntopic_id: {id}",                  # no final newline
    "topic_id: {id}\nversion: 0\n",                # the other order
])
def test_partition_metadata_in_other_layouts_is_read_by_lines(tmp_path: Path, text: str) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_bytes(
        text.format(id=topic_id_to_string(TOPIC_ID)).encode("ascii"))
    assert read_partition_metadata(tmp_path) == TOPIC_ID


@pytest.mark.parametrize("text", ["version: 1\ntopic_id: {id}\n", "version: 0\n", "version: 0\ntopic_id: {id}x\n"])
def test_malformed_partition_metadata_raises(tmp_path: Path, text: str) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_bytes(
        text.format(id=topic_id_to_string(TOPIC_ID)).encode("ascii"))
    with pytest.raises((CheckpointError, ValueError)):
        read_partition_metadata(tmp_path)


@pytest.mark.parametrize("size", [0, 1, 65535, 65536, 65537, 200_000])
def test_read_small_file_reads_every_byte(tmp_path: Path, size: int) -> None:
    data = bytes(i % 251 for i in range(size))
    (tmp_path / "f").write_bytes(data)
    assert read_small_file(tmp_path / "f") == data
