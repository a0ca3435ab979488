"""A Spark Structured Streaming job reading click events from kcoord: counts per action and
10-second window, printed to the console.

Two routes to the same topic:

- Spark's own Kafka connector (needs the connector jar, of the same version as the Spark it runs
  in: here the installed PySpark's)::

      SPARK_VERSION=$(python -c 'import pyspark; print(pyspark.__version__)')
      spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:$SPARK_VERSION \\
          examples/spark_events_stream.py --format kafka

- kcoord's PySpark data source (``pip install 'kcoord[spark]'``, no JVM jars), which also commits
  the query's progress as the offsets of consumer group ``--group`` so lag tools see the job::

      python examples/spark_events_stream.py --format kcoord

Options: --bootstrap (env BOOTSTRAP, localhost:9092), --topic (env TOPIC, events), --checkpoint
(env CHECKPOINT), --group (kcoord route; default spark-events-by-action), --seconds (stop after
that long; default: run until stopped).
"""

from __future__ import annotations

import argparse
import os
import tempfile

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

EVENT = StructType(
    [
        StructField("id", LongType()),
        StructField("user", StringType()),
        StructField("action", StringType()),
        StructField("ts", LongType()),
    ]
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--format", choices=["kafka", "kcoord"], default="kafka")
    ap.add_argument("--bootstrap", default=os.environ.get("BOOTSTRAP", "localhost:9092"))
    ap.add_argument("--topic", default=os.environ.get("TOPIC", "events"))
    ap.add_argument("--checkpoint", default=os.environ.get("CHECKPOINT"))
    ap.add_argument("--group", default="spark-events-by-action")
    ap.add_argument("--seconds", type=int, default=0)
    args = ap.parse_args()

    spark = (
        SparkSession.builder.appName(f"kcoord-events-{args.format}")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    if args.format == "kcoord":
        import kcoord.spark

        kcoord.spark.register(spark)
    reader = spark.readStream.format(args.format)
    if args.format == "kcoord":
        reader = reader.option("kafka.group.id", args.group)
    events = (
        reader.option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "5000")
        .load()
    )
    counts = (
        events.select(F.from_json(F.col("value").cast("string"), EVENT).alias("e"), "timestamp")
        .select("e.action", "timestamp")
        .withWatermark("timestamp", "30 seconds")
        .groupBy(F.window("timestamp", "10 seconds"), "action")
        .count()
    )
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix=f"kcoord-events-{args.format}-")
    query = (
        counts.writeStream.outputMode("update")
        .format("console")
        .option("truncate", "false")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="5 seconds")
        .start()
    )
    if args.seconds:
        query.awaitTermination(args.seconds)
        query.stop()
    else:
        query.awaitTermination()


if __name__ == "__main__":
    main()
