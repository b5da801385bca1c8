"""One local[2] SparkSession for the Spark tests, bound to 127.0.0.1, with the kafkalite format
registered and Spark's own Kafka connector (`format("kafka")`) on its classpath — one JVM serves
both, a second would cost too much on a small machine. Skipped when PySpark or Java is missing."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from tests.support.maven import MavenError
from tests.support.spark_kafka import connector_jars, jars_option

pytest.importorskip("pyspark.sql.datasource")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="session")
def spark_kafka_jars() -> tuple[list[Path], Optional[str]]:
    """The connector's jars, or why they could not be resolved (Maven Central unreachable, no
    mvn): the kafkalite-format tests still run then, the connector's tests fail with the reason."""
    try:
        return connector_jars(), None
    except MavenError as exc:
        return [], str(exc)


@pytest.fixture(scope="session")
def spark(spark_kafka_jars: tuple[list[Path], Optional[str]]) -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("PySpark needs Java 17+")
    jars, _ = spark_kafka_jars
    # before the JVM starts: every Spark socket on loopback, workers on this interpreter
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from kafkalite.spark import register

    builder = SparkSession.builder
    if jars:
        builder = builder.config("spark.jars", jars_option(jars))
    session = (builder.master("local[2]").appName("kafkalite-tests")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def spark_kafka(spark: Any, spark_kafka_jars: tuple[list[Path], Optional[str]]) -> Any:
    """The session, for tests of `format("kafka")`: fails (not skips) when the connector's jars
    are missing, so a broken resolution cannot pass silently."""
    if spark_kafka_jars[1] is not None:
        pytest.fail(f"Spark's Kafka connector is not available: {spark_kafka_jars[1]}")
    return spark
