"""The official Java client (org.apache.kafka:kafka-clients) from Maven Central, per version.

The Java tests run against the last 3.x release and the newest 4.x release Maven Central serves,
so a change of the client's request versions or behaviour between the two lines is seen. Each
version resolves (once, cached outside the repository by `tests/support/maven.py`) to the client
jar, its runtime dependencies (lz4, snappy, zstd, slf4j-api) and an slf4j binding: log4j2 via
`log4j-slf4j2-impl`, configured by `tests/java/log4j2.properties`, so a failing test shows what the
client logged. slf4j-api is pinned at 2.x for both: 3.9.1 asks for 1.7.36, whose callers the 2.x
API serves unchanged, and 1.7 would ignore the slf4j2 binding (no client log at all).
"""
from __future__ import annotations

from pathlib import Path

from tests.support import maven

#: Oldest first. 4.4.0 is the newest 4.x Maven Central serves here.
KAFKA_CLIENTS_VERSIONS: tuple[str, ...] = ("3.9.1", "4.4.0")
NEWEST: str = KAFKA_CLIENTS_VERSIONS[-1]

SLF4J_API = "org.slf4j:slf4j-api:2.0.17"
LOG4J = "2.25.3"


def artifacts(version: str) -> list[str]:
    return [f"org.apache.kafka:kafka-clients:{version}", SLF4J_API,
            f"org.apache.logging.log4j:log4j-slf4j2-impl:{LOG4J}",
            f"org.apache.logging.log4j:log4j-core:{LOG4J}"]


def kafka_clients_jars(version: str) -> list[Path]:
    """kafka-clients `version` with its runtime dependencies and the log binding; the client jar
    first, so a reader of a classpath sees at once which version it is."""
    jars = maven.resolve(f"kafka-clients-{version}", artifacts(version))
    client = [j for j in jars if j.name == f"kafka-clients-{version}.jar"]
    if len(client) != 1:
        raise maven.MavenError(f"kafka-clients-{version}.jar missing from {[j.name for j in jars]}")
    return client + [j for j in jars if j not in client]
