"""Jars from Maven Central for the tests and benchmarks, resolved once into a cache directory.

`resolve("kafka-3.9.1", ["org.apache.kafka:kafka_2.13:3.9.1"])` writes a throw-away pom naming
the artifacts, runs `mvn dependency:copy-dependencies` (runtime scope, transitive) into
`<cache>/maven/<name>/`, and returns the jars. A stamp file records the exact artifact list, so a
second call (or a second test session) reuses the directory without running Maven; a changed
list resolves again. An exclusive lock serialises concurrent resolutions of the same name, and
another one all runs of Maven (pytest-xdist workers share its local repository).

The cache is `$KAFKALITE_TEST_CACHE` or `~/.cache/kafkalite-tests`: outside the repository, so no
jar ever lands in git.
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence
from xml.sax.saxutils import escape


class MavenError(RuntimeError):
    """Maven could not resolve the artifacts; the message carries Maven's own output."""


def cache_root() -> Path:
    return Path(os.environ.get("KAFKALITE_TEST_CACHE") or Path.home() / ".cache" / "kafkalite-tests")


def _pom(artifacts: Sequence[str]) -> str:
    deps = []
    for coordinate in artifacts:
        parts = coordinate.split(":")
        if len(parts) == 3:
            group, artifact, version = parts
            classifier = ""
        elif len(parts) == 4:
            group, artifact, version, classifier = parts
        else:
            raise ValueError(f"expected group:artifact:version[:classifier], got {coordinate!r}")
        deps.append(
            "<dependency>"
            f"<groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
            f"<version>{escape(version)}</version>"
            + (f"<classifier>{escape(classifier)}</classifier>" if classifier else "")
            + "</dependency>")
    return ("<project xmlns=\"http://maven.apache.org/POM/4.0.0\"><modelVersion>4.0.0</modelVersion>"
            "<groupId>kafkalite.tests</groupId><artifactId>deps</artifactId><version>0</version>"
            "<packaging>pom</packaging>"
            f"<dependencies>{''.join(deps)}</dependencies></project>")


def resolve(name: str, artifacts: Sequence[str], timeout: float = 900.0) -> list[Path]:
    """The jars of `artifacts` and their runtime dependencies, resolved into the cache once."""
    if shutil.which("mvn") is None:
        raise MavenError("mvn is not on PATH (scripts/test.sh installs Debian's maven)")
    target = cache_root() / "maven" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    stamp_text = "\n".join(sorted(artifacts)) + "\n"
    stamp = target / ".resolved"
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == stamp_text:
            return sorted(target.glob("*.jar"))
        partial = target.with_name(f".{name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        with tempfile.TemporaryDirectory(prefix="kafkalite-mvn-") as work:
            pom = Path(work) / "pom.xml"
            pom.write_text(_pom(artifacts))
            command = ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                       f"-DoutputDirectory={partial}", "-DincludeScope=runtime"]
            # one mvn at a time over all names: Maven 3.8 does not lock its local repository
            # (~/.m2), and two test workers resolving two names would download into it at once
            with open(target.parent / ".mvn.lock", "w") as mvn_lock:
                fcntl.flock(mvn_lock, fcntl.LOCK_EX)
                try:
                    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
                except subprocess.TimeoutExpired as exc:
                    raise MavenError(f"mvn timed out after {timeout:.0f} s resolving {artifacts}") from exc
            if done.returncode != 0:
                raise MavenError(f"mvn failed ({done.returncode}) resolving {artifacts}:\n"
                                 f"{done.stdout[-4000:]}{done.stderr[-4000:]}")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        stamp.write_text(stamp_text)
        return sorted(target.glob("*.jar"))


def classpath(jars: Sequence[Path]) -> str:
    return os.pathsep.join(str(j) for j in jars)


def digest(artifacts: Sequence[str]) -> str:
    return hashlib.sha1("\n".join(sorted(artifacts)).encode()).hexdigest()[:12]
