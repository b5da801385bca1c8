"""What the client check programs (tests/java's ClientCheck and TxnCheck, tests/go's gocheck)
share: each runs as a subprocess in its own session, bounded by a timeout after which its whole
process group is killed, and prints one JSON object per line on stdout."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Any, TypeVar


@dataclass
class CheckRun:
    """One run: the events are stdout's JSON lines, the noise its other lines."""
    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)
    noise: list[str] = field(default_factory=list)

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == event]


RunT = TypeVar("RunT", bound=CheckRun)


def run_check(run_class: type[RunT], cmd: list[str], timeout: float) -> RunT:
    """Runs cmd to its end, or kills its process group after `timeout` seconds (timed_out), keeping
    what it printed either way."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            encoding="utf-8", start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    run = run_class(cmd, proc.returncode, out, err, timed_out)
    for line in out.splitlines():
        try:
            run.events.append(json.loads(line))
        except ValueError:
            run.noise.append(line)
    return run
