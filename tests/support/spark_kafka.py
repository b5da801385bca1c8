"""Spark's own Kafka connector (`format("kafka")`) for the Spark tests: its jars from Maven
Central, minus what the PySpark package already ships.

Maven resolves `spark-sql-kafka-0-10_2.13` with its runtime dependencies, which include jars
PySpark has in `$SPARK_HOME/jars` at other versions (scala-library, hadoop-client, lz4-java,
snappy-java, slf4j-api, ...). Two versions of one library on the classpath is how a JVM
ends up with mixed classes, so only the artifacts PySpark lacks are handed to `spark.jars`:
the connector, spark-token-provider-kafka-0-10, kafka-clients and commons-pool2.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

from tests.support.maven import resolve

SPARK_VERSION = "4.2.0"
CONNECTOR = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_VERSION}"
# "<artifact>-<version>[-classifier].jar" with a dotted version ("1.5.7-7", "2.3.10-core"):
# artifact ids such as "spark-sql-kafka-0-10_2.13" contain "-<digit>" parts of their own, so the
# version is the last "-<digits>.<digits>..." part
_JAR_RE = re.compile(r"^(?P<artifact>.+)-\d+(?:\.\d+)+(?:[-.]\w+)*\.jar$")


def artifact_name(jar: str) -> str:
    """`kafka-clients-3.9.2.jar` -> `kafka-clients`; `spark-sql-kafka-0-10_2.13-4.2.0.jar` ->
    `spark-sql-kafka-0-10_2.13`."""
    m = _JAR_RE.match(jar)
    return m.group("artifact") if m else jar


def spark_home_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def missing_from(resolved: Iterable[Path], shipped: Iterable[str]) -> list[Path]:
    """The resolved jars whose artifact PySpark does not ship (at any version)."""
    have = {artifact_name(j) for j in shipped}
    return sorted(j for j in resolved if artifact_name(j.name) not in have)


def connector_jars() -> list[Path]:
    """The jars to add to a PySpark session for `format("kafka")` (resolved once, cached)."""
    resolved = resolve(f"spark-sql-kafka-{SPARK_VERSION}", [CONNECTOR])
    return missing_from(resolved, (p.name for p in spark_home_jars().glob("*.jar")))


def jars_option(jars: Sequence[Path]) -> str:
    """`spark.jars` takes a comma-separated list."""
    return ",".join(str(j) for j in jars)
