"""The network source's pulls name a consumer group: a broker that does not create groups on demand
(autoCreateSubscriptionGroup=false) refuses an unknown one, and the error says which option names it.
Runs the source's planning and reading in-process (no Spark session)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rmq.spark.network.cluster import ClusterClient, NetworkReadError
from rmq.spark.network.options import parse_network_options
from rmq.spark.network.planning import QueueRange, plan_batch
from rmq.spark.network.reading import NetColumns, network_schema, read_range

from tests.spark.helpers import wait_for
from tests.spark.netcluster import start_cluster


def test_an_unknown_group_is_an_error_naming_the_option(tmp_path: Path) -> None:
    c = start_cluster(tmp_path, ["broker-g"], "autoCreateSubscriptionGroup=false")
    try:
        c.create("NetGroup")
        c.send("NetGroup", 5, "g")
        spec = parse_network_options({"nameServer": c.ns, "topics": "NetGroup"})

        def planned() -> list[QueueRange]:
            with ClusterClient(spec) as client:
                return plan_batch(client, spec)

        wait_for(lambda: sum(r.end - r.start for r in planned()) == 5)  # dispatched to the queues
        ranges = planned()
        with pytest.raises(NetworkReadError) as e:
            for r in ranges:
                list(read_range(spec, NetColumns(network_schema(["body"])), r))
        assert "option consumerGroup" in str(e.value) and "rmq-spark-reader" in str(e.value)
    finally:
        c.stop()
