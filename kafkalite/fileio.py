"""Durable file writes, shared by every layer that keeps state on disk (log directories, the
metadata store, meta.properties): fsync by name, atomic replace, one syncfs of a whole file
system. A leaf module (standard library only), so that importing it pulls in no layer.

Atomic writes: write ``<file>.tmp``, fsync it, rename over the target, fsync the directory
— a crash leaves the old or the new file, never a torn one. ``sync=False`` leaves the fsyncs to
the caller (a later :func:`fsync_file`, or one :func:`syncfs` of the whole file system at
shutdown): the file is still replaced atomically, but a crash may keep the old one.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
from pathlib import Path

__all__ = ["NamedFile", "atomic_write", "fsync_dir", "fsync_file", "syncfs"]


def _fsync_path(path: Path, flags: int) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    _fsync_path(path, os.O_DIRECTORY)


def fsync_file(path: Path) -> None:
    """fsync an existing file by name (a file written earlier with ``sync=False``)."""
    _fsync_path(path, 0)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """``path`` replaced whole: ``<name>.tmp`` written (and fsynced), renamed over it, the directory
    fsynced. A failure before the rename removes the temp file and leaves ``path`` as it was."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        fsync_dir(path.parent)


_libc_syncfs = None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _libc_syncfs = _libc.syncfs
    _libc_syncfs.argtypes = [ctypes.c_int]
    _libc_syncfs.restype = ctypes.c_int
except (OSError, AttributeError):   # not Linux/glibc: fall back to sync(2)
    _libc_syncfs = None


def syncfs(path: Path) -> None:
    """Make everything written to the file system holding ``path`` durable with one call
    (Linux syncfs(2), which reports writeback errors since 5.8): a shutdown that wrote
    thousands of files pays one journal commit instead of thousands of fsyncs."""
    if _libc_syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if _libc_syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


class NamedFile:
    """A file known by its name as a string, for the system calls, and by a Path made only when
    asked for: a start-up opens thousands of segments' index files, and each Path costs more
    than the system calls made with it."""

    _fspath: str
    _path: Path | None

    def _set_file_name(self, path: Path | str) -> None:
        self._fspath = os.fspath(path)
        self._path = path if isinstance(path, Path) else None

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = Path(self._fspath)
        return self._path
