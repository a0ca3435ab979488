"""kcoord beside Spark: ``format("kcoord")``, a PySpark 4 data source for Kafka topics.

Install with the ``spark`` extra (``pip install 'kcoord[spark]'``); PySpark 4 then finds
``format("kcoord")`` by itself through the installed ``pyspark_kcoord`` module (call
``kcoord.spark.register(spark)`` only where kcoord is on the path without being installed)::

    df = (spark.read.format("kcoord")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events")
          .load())

The option parsing (:mod:`kcoord.spark.options`) and the Kafka client side
(:mod:`kcoord.spark.client`) do not need pyspark; :mod:`kcoord.spark.source` does, and is loaded
on first use of the names below.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KcoordDataSource", "kafka_schema", "register"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kcoord.spark import source

        return getattr(source, name)
    raise AttributeError(f"module 'kcoord.spark' has no attribute {name!r}")
