"""The network source against a name server and broker that serve TLS only (tls.server.mode=enforcing;
certificates from tests/tls/tlsenv.py): tls=true with the CA reads every message, the server's
certificate checked; a plaintext read is an error naming the name server option."""

from __future__ import annotations

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
