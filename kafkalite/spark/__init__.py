"""PySpark Python Data Source for kafkalite (and any Kafka broker): format `kafkalite`.

Needs the `spark` extra (`pip install '.[spark]'` in a checkout, or the wheel with `[spark]`:
PySpark 4.2+ and pyarrow)::

    from kafkalite.spark import register
    register(spark)
    df = spark.read.format("kafkalite").option("kafka.bootstrap.servers", "127.0.0.1:9092") \\
        .option("subscribe", "events").load()
"""
from kafkalite.spark.datasource import FORMAT_NAME, KafkaLiteDataSource, register

__all__ = ["FORMAT_NAME", "KafkaLiteDataSource", "register"]
