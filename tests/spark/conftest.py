"""One local[2] SparkSession for the Spark tests, bound to 127.0.0.1, with the kafkalite format
registered. Skipped when PySpark or Java is missing."""
from __future__ import annotations

import os
import shutil
import sys
from typing import Any, Iterator

import pytest

pytest.importorskip("pyspark.sql.datasource")
pytest.importorskip("pyarrow")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("PySpark needs Java 17+")
    # before the JVM starts: every Spark socket on loopback, workers on this interpreter
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from kafkalite.spark import register

    session = (SparkSession.builder.master("local[2]").appName("kafkalite-tests")
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
