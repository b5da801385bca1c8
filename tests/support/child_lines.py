"""Lines of a child process's pipe, read with a timeout."""
from __future__ import annotations

import os
import select
import time

# what was read from a pipe beyond the last line returned, per stream
_pending: dict[object, bytes] = {}


def read_line(stream: object, timeout: float, what: str) -> str:
    """The next line of a child's pipe within `timeout` ('' at its end); AssertionError naming
    `what` after that. Reads the descriptor itself: select() on a buffered text stream misses the
    lines its buffer already holds (several lines that came in one read on a loaded machine), and
    a test then waited for a line it had already received."""
    fd = stream.fileno()  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout
    buf = _pending.pop(stream, b"")
    while b"\n" not in buf:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            _pending[stream] = buf
            raise AssertionError(f"no line from {what} within {timeout} s")
        chunk = os.read(fd, 65536)
        if not chunk:
            return buf.decode()
        buf += chunk
    line, _, rest = buf.partition(b"\n")
    _pending[stream] = rest
    return line.decode() + "\n"
