"""tests/go/gocheck (franz-go's kgo and kadm) built once and run as a subprocess.

`build()` compiles the program with the Go toolchain (`go` on PATH, else /usr/local/go/bin/go)
into `<test cache>/go/gocheck-<digest>`, the digest covering the sources, go.mod, go.sum and the
toolchain's version, so later sessions reuse the binary; a lock serialises concurrent builds.
Modules come from the Go module proxy into the default module cache (GOFLAGS=-mod=mod; go.sum,
committed, pins them). `GoCheck.run()` runs it against a broker and parses its JSON lines.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional

from tests.support.check_program import CheckRun, run_check
from tests.support.maven import cache_root

GO_DIR = Path(__file__).resolve().parent.parent / "go"
FALLBACK_GO = Path("/usr/local/go/bin/go")


class GoBuildError(RuntimeError):
    """No Go toolchain, or `go build` failed; the message carries its output."""


def go_binary() -> str:
    found = shutil.which("go")
    if found:
        return found
    if FALLBACK_GO.exists():
        return str(FALLBACK_GO)
    raise GoBuildError("no Go toolchain: `go` is not on PATH and /usr/local/go/bin/go is missing")


def _go_env() -> dict[str, str]:
    # -mod=mod: resolve from go.mod/go.sum even if a vendor dir or workspace says otherwise;
    # -buildvcs=false: no git stamping (a clone owned by another user would fail the build);
    # GOTOOLCHAIN=local: never try to download another toolchain (only the proxy is reachable).
    return {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false", "GOTOOLCHAIN": "local"}


def _digest(go: str) -> str:
    h = hashlib.sha256()
    for path in sorted(GO_DIR.glob("*.go")) + [GO_DIR / "go.mod", GO_DIR / "go.sum"]:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    version = subprocess.run([go, "version"], capture_output=True, text=True, env=_go_env())
    h.update(version.stdout.encode())
    return h.hexdigest()[:16]


def build(timeout: float = 600.0) -> Path:
    """The gocheck binary for the current sources, built if missing."""
    go = go_binary()
    target_dir = cache_root() / "go"
    target_dir.mkdir(parents=True, exist_ok=True)
    binary = target_dir / f"gocheck-{_digest(go)}"
    with open(target_dir / ".gocheck.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        partial = binary.with_name(binary.name + ".partial")
        try:
            done = subprocess.run([go, "build", "-o", str(partial), "."], cwd=GO_DIR,
                                  capture_output=True, text=True, timeout=timeout, env=_go_env())
        except subprocess.TimeoutExpired as exc:
            raise GoBuildError(f"go build timed out after {timeout:.0f} s") from exc
        if done.returncode != 0:
            raise GoBuildError(f"go build failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        partial.rename(binary)
        return binary


class GoRun(CheckRun):
    def errors(self) -> list[dict[str, Any]]:
        return self.of("error")

    def report(self) -> str:
        """What to show when an assertion fails: errors and franz-go's own log."""
        return "\n".join([
            f"exit code {self.returncode}",
            "errors: " + json.dumps(self.errors(), indent=1, ensure_ascii=False)[-6000:],
            "franz-go log (last 40 lines):", *self.stderr.splitlines()[-40:],
            "non-JSON stdout: " + repr(self.noise[-5:]),
        ])


class GoCheck:
    """Runs the gocheck binary against a broker."""

    def __init__(self, binary: Path, default_timeout: float = 90.0) -> None:
        self.binary = binary
        self.default_timeout = default_timeout

    def run(self, bootstrap: str, *commands: str, timeout: Optional[float] = None,
            debug: bool = False) -> GoRun:
        timeout = self.default_timeout if timeout is None else timeout
        # The program's own watchdog fires first and reports every goroutine's stack.
        cmd = [str(self.binary), f"-deadline={max(timeout - 10, 5):.0f}s",
               *(["-debug"] if debug else []), bootstrap, *commands]
        run = run_check(GoRun, cmd, timeout)
        if run.timed_out:
            run.stderr += f"\n[killed after {timeout} s]"
        return run
