"""Checkpoint files of a log directory, in Apache Kafka's formats.

* offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``)::

      0                 <- version
      2                 <- number of entries
      my-topic 0 1234   <- topic partition offset
      my-topic 1 99

* ``partition.metadata`` in each partition directory::

      version: 0
      topic_id: <topic id, URL-safe base64 of the 16 UUID bytes, unpadded>

Writes are atomic (:func:`kafkalite.fileio.atomic_write`): a crash leaves the old or the new
file, never a torn one.
"""
from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path
from typing import Mapping

# Re-exported: the log layer's modules import them from here (they live in the leaf module).
from kafkalite.fileio import atomic_write, fsync_dir, fsync_file, syncfs  # noqa: F401

CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
PARTITION_METADATA_VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file is malformed."""


def format_offset_checkpoint(entries: Mapping[tuple[str, int], int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    for (topic, partition), offset in sorted(entries.items()):
        lines.append(f"{topic} {partition} {offset}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def parse_offset_checkpoint(text: str, name: str = "checkpoint") -> dict[tuple[str, int], int]:
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"Malformed {name}: missing version or count")
    try:
        version = int(lines[0].strip())
        count = int(lines[1].strip())
    except ValueError as e:
        raise CheckpointError(f"Malformed {name}: {e}") from e
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"Unrecognized version of the {name}: {version}")
    body = [line for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise CheckpointError(f"Malformed {name}: expected {count} entries, found {len(body)}")
    out: dict[tuple[str, int], int] = {}
    for line in body:
        parts = line.split()
        if len(parts) != 3:
            raise CheckpointError(f"Malformed line in {name}: {line!r}")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError as e:
            raise CheckpointError(f"Malformed line in {name}: {line!r}") from e
    return out


def write_offset_checkpoint(path: Path, entries: Mapping[tuple[str, int], int]) -> None:
    atomic_write(path, format_offset_checkpoint(entries))


def offset_checkpoint_unchanged(path: Path, data: bytes) -> bool:
    """Whether ``path`` already holds exactly ``data`` (then rewriting it is wasted fsyncs)."""
    try:
        return path.read_bytes() == data
    except OSError:
        return False


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Entries of a checkpoint file; {} when it does not exist. Raises CheckpointError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return parse_offset_checkpoint(text, path.name)


# -- topic ids --------------------------------------------------------------------------------

def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def topic_id_from_string(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise CheckpointError(f"Invalid topic id {text!r}")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(dir: Path, topic_id: uuid.UUID, *, sync: bool = True) -> None:
    data = (f"version: {PARTITION_METADATA_VERSION}\n"
            f"topic_id: {topic_id_to_string(topic_id)}\n").encode("ascii")
    atomic_write(dir / PARTITION_METADATA_FILE, data, sync=sync)


_SMALL_READ = 65536


def read_small_file(path: str | os.PathLike[str]) -> bytes:
    """A small file's bytes through the descriptor alone (``Path.read_bytes`` adds an fstat, an
    ioctl, lseeks and buffer objects per file: a start-up reads thousands of these files)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        # a read of a regular file returns less than asked only at its end: a file shorter than
        # the buffer is read with one call, not two (the second would only confirm the end)
        data = os.read(fd, _SMALL_READ)
        if len(data) < _SMALL_READ:
            return data
        chunks = [data]
        while chunk := os.read(fd, _SMALL_READ):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


_PARTITION_METADATA_HEAD = f"version: {PARTITION_METADATA_VERSION}\ntopic_id: "


def read_partition_metadata(dir: Path) -> uuid.UUID | None:
    """The topic id from ``partition.metadata``; None if the file does not exist."""
    try:
        text = read_small_file(os.path.join(dir, PARTITION_METADATA_FILE)).decode("ascii")
    except FileNotFoundError:
        return None
    if text.startswith(_PARTITION_METADATA_HEAD) and text.endswith("\n"):
        # the file as written (every log of a start-up): the id alone between the head and the
        # last newline, in base64's URL-safe letters; anything else is parsed line by line
        encoded = text[len(_PARTITION_METADATA_HEAD):-1]
        if encoded.isascii() and encoded.replace("-", "").replace("_", "").isalnum():
            return topic_id_from_string(encoded)
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    if fields.get("version") != str(PARTITION_METADATA_VERSION) or "topic_id" not in fields:
        raise CheckpointError(f"Malformed {PARTITION_METADATA_FILE} in {dir}: {text!r}")
    return topic_id_from_string(fields["topic_id"])
