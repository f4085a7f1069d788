"""The network source against a name server and broker that serve TLS only (tls.server.mode=enforcing;
certificates from tests/tls/tlsenv.py): tls=true with the CA reads every message, the server's
certificate checked; a plaintext read is an error naming the name server option."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from rmq.client import ClientConfig, Message
from rmq.client.sync import Producer

from tests.brokerproc import start_broker
from tests.spark.netcluster import hashes
from tests.tls.tlsenv import make_pki, server_props

TOPIC = "NetTls"


def test_tls_reads_and_plaintext_refused(spark: SparkSession, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    props = [f"{k}={v}" for k, v in server_props(pki, "enforcing").items()]
    broker = start_broker(tmp_path / "store", *props, "autoCreateTopicEnable=true")
    try:
        config = ClientConfig(namesrv_addr=broker.namesrv_addr, tls=True, tls_ca=str(pki.ca))
        bodies = [f"tls-{i}".encode() for i in range(15)]
        with Producer("pg_tls", client_config=config) as p:
            for b in bodies:
                assert p.send(Message(TOPIC, b)).ok

        def read(**opts: str) -> list[bytes]:
            r = (
                spark.read.format("rocketmq")
                .option("nameServer", broker.namesrv_addr)
                .option("topics", TOPIC)
            )
            for k, v in opts.items():
                r = r.option(k, v)
            return [bytes(row.body) for row in r.load().select("body").collect()]

        assert hashes(read(tls="true", tlsCa=str(pki.ca))) == hashes(bodies)
        with pytest.raises(Exception) as e:
            read(tls="true", tlsCa=str(pki.rogue_ca))  # the server's certificate does not verify
        assert "TLS handshake" in str(e.value) and "nameServer" in str(e.value)
        with pytest.raises(Exception) as e:
            read()
        assert "no name server of option nameServer" in str(e.value)
    finally:
        broker.stop()


def test_jvm_reader_and_sink_over_tls(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The JVM network reader and the JVM sink with ``tls=true`` against a TLS-only name server and broker:
    the sink writes and the reader reads every row with the CA checked; a CA that does not sign the
    server's certificate fails the handshake, naming it."""
    import rmq.spark

    pki = make_pki(tmp_path / "pki")
    props = [f"{k}={v}" for k, v in server_props(pki, "enforcing").items()]
    broker = start_broker(tmp_path / "store", *props, "autoCreateTopicEnable=true")
    try:
        config = ClientConfig(namesrv_addr=broker.namesrv_addr, tls=True, tls_ca=str(pki.ca))
        with Producer("pg_tls_jvm", client_config=config) as p:
            assert p.send(Message("NetTlsJvm", b"first")).ok  # the topic, auto-created
        ns = broker.namesrv_addr
        bodies = [f"tls-jvm-{i}".encode() for i in range(500)]
        df = spark.createDataFrame([(b,) for b in bodies], "body binary")
        caplog.set_level(logging.INFO, logger="rmq.spark")
        rmq.spark.save(df, nameServer=ns, topic="NetTlsJvm", tls=True, tlsCa=str(pki.ca))
        got = rmq.spark.load(
            spark, nameServer=ns, topics="NetTlsJvm", tls=True, tlsCa=str(pki.ca), columns="body"
        )
        assert hashes([bytes(r.body) for r in got.collect()]) == hashes([b"first", *bodies])
        assert "with the JVM network reader" in caplog.text and "writing with the JVM sink" in caplog.text
        unverified = rmq.spark.load(spark, nameServer=ns, topics="NetTlsJvm", tls=True, columns="")
        assert unverified.count() == 501  # tls=true without a CA: encrypted, the certificate not checked
        with pytest.raises(Exception, match=r"TLS handshake with 127\.0\.0\.1"):
            rmq.spark.load(
                spark, nameServer=ns, topics="NetTlsJvm", tls=True, tlsCa=str(pki.rogue_ca)
            ).count()
        with pytest.raises(Exception, match=r"TLS handshake with 127\.0\.0\.1"):
            rmq.spark.save(df, nameServer=ns, topic="NetTlsJvm", tls=True, tlsCa=str(pki.rogue_ca))
    finally:
        broker.stop()
