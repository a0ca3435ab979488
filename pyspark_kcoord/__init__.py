"""Makes ``spark.read.format("kcoord")`` work with no registration step.

PySpark 4 discovers Python data sources by importing installed top-level modules named
``pyspark_*`` that define ``DefaultSource`` (pyspark.sql.worker.lookup_data_sources); this module
is that entry point for kcoord's data source (kcoord.spark, the ``spark`` extra).
"""

from kcoord.spark.source import KcoordDataSource as DefaultSource

__all__ = ["DefaultSource"]
