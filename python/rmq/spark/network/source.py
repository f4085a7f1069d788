"""The network source's batch reader: ranges planned on the driver, one partition per queue range."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from rmq.spark.network.cluster import ClusterClient
from rmq.spark.network.options import NetworkSpec
from rmq.spark.network.planning import NetPartition, plan_batch
from rmq.spark.network.reading import NetColumns, read_range

__all__ = ["NetworkReader", "read_partition"]

log = logging.getLogger(__name__)


def read_partition(
    spec: NetworkSpec, columns: NetColumns, partition: InputPartition
) -> Iterator[pa.RecordBatch]:
    """The rows of one planned partition (an empty plan's placeholder reads nothing)."""
    if type(partition) is InputPartition and partition.value is None:
        return iter(())
    if not isinstance(partition, NetPartition):
        raise TypeError(f"not a rocketmq network partition: {partition!r}")
    return read_range(spec, columns, partition.range)


class NetworkReader(DataSourceReader):
    """``spark.read.format("rocketmq").option("nameServer", ...)``: reads what the queues hold between
    the start and end offsets the options give, as of planning."""

    def __init__(self, spec: NetworkSpec, schema: StructType) -> None:
        self.spec = spec
        self.columns = NetColumns(schema)

    def partitions(self) -> list[InputPartition]:
        with ClusterClient(self.spec) as client:
            ranges = plan_batch(client, self.spec)
        log.info(
            "rocketmq network source: %s: %d partitions, %d messages",
            self.spec.describe(),
            len(ranges),
            sum(r.end - r.start for r in ranges),
        )
        return [NetPartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return read_partition(self.spec, self.columns, partition)
