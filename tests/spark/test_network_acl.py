"""The network source against a broker with ACL on (the rules of tests/acl/aclenv.py): requests signed
with accessKey/secretKey read what the account may subscribe to; a denied topic, a wrong secret or no
credentials are errors that say access was denied and point at the options."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession
from rmq.acl import RequestSigner
from rmq.client import ClientConfig, Message
from rmq.client.sync import Producer

from tests.acl.aclenv import ADMIN, APP, DENIED_TOPIC, GROUP, TOPIC, write_rules
from tests.spark.netcluster import Cluster, SentMsg, create_topic, hashes, start_cluster


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, list[bytes]]]:
    tmp = tmp_path_factory.mktemp("netacl")
    rules = write_rules(tmp / "plain_acl.yml")
    c = start_cluster(tmp, ["broker-acl"], "aclEnable=true", f"aclFilePath={rules}")
    try:
        admin = RequestSigner(*ADMIN)
        for topic in (TOPIC, DENIED_TOPIC):
            create_topic(c.brokers["broker-acl"].broker_addr, topic, signer=admin)
        bodies = [f"acl-{i}".encode() for i in range(20)]
        config = ClientConfig(namesrv_addr=c.ns, access_key=ADMIN[0], secret_key=ADMIN[1])
        sent = []
        with Producer("pg_acl", client_config=config) as p:
            for b in bodies:
                r = p.send(Message(TOPIC, b))
                assert r.ok
                sent.append(
                    SentMsg(
                        TOPIC, r.message_queue.broker_name, r.message_queue.queue_id, r.queue_offset, b, None
                    )
                )
            assert p.send(Message(DENIED_TOPIC, b"not for app")).ok
        c.wait_visible(sent, signer=admin)
        yield c, bodies
    finally:
        c.stop()


def read(spark: SparkSession, cluster: Cluster, topic: str, **opts: str) -> list[bytes]:
    r = spark.read.format("rocketmq").option("nameServer", cluster.ns).option("topics", topic)
    for k, v in opts.items():
        r = r.option(k, v)
    return [bytes(row.body) for row in r.load().select("body").collect()]


def test_signed_reads_and_refusals(spark: SparkSession, acl_cluster: tuple[Cluster, list[bytes]]) -> None:
    cluster, bodies = acl_cluster
    creds = {"accessKey": APP[0], "secretKey": APP[1], "consumerGroup": GROUP}
    assert hashes(read(spark, cluster, TOPIC, **creds)) == hashes(bodies)

    for topic, opts in (
        (DENIED_TOPIC, creds),
        (TOPIC, {**creds, "secretKey": "not-the-secret"}),
        (TOPIC, {"consumerGroup": GROUP}),
    ):
        with pytest.raises(Exception) as e:
            read(spark, cluster, topic, **opts)
        text = str(e.value)
        assert "access denied" in text and "accessKey" in text, text
    with pytest.raises(Exception) as e:
        read(spark, cluster, TOPIC, accessKey=APP[0])
    assert "accessKey and secretKey" in str(e.value)


def test_jvm_network_reader_signs_its_requests(
    spark: SparkSession, acl_cluster: tuple[Cluster, list[bytes]]
) -> None:
    """``rmq.spark.load`` with ACL credentials through the JVM network reader: its route queries, offset
    queries and pulls are signed; a topic the account may not subscribe to, a wrong secret and no
    credentials are refused naming the topic and the broker's reason."""
    import rmq.spark

    cluster, bodies = acl_cluster
    creds = {"accessKey": APP[0], "secretKey": APP[1], "consumerGroup": GROUP}

    def jvm(topic: str, **opts: str) -> list[bytes]:
        df = rmq.spark.load(spark, nameServer=cluster.ns, topics=topic, columns="body", **opts)
        return [bytes(r.body) for r in df.collect()]

    assert hashes(jvm(TOPIC, **creds)) == hashes(bodies)
    for topic, opts, reason in (
        (DENIED_TOPIC, creds, "No permission|no permission|denied"),
        (TOPIC, {**creds, "secretKey": "not-the-secret"}, "Check signature failed"),
        (TOPIC, {"consumerGroup": GROUP}, "accessKey|AccessKey|No accessKey"),
    ):
        with pytest.raises(Exception, match=reason) as e:
            jvm(topic, **opts)
        assert f"{topic}" in str(e.value)
