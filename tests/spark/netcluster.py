"""A cluster the network-source tests read: a standalone name server and broker groups (real processes),
topics created on every master, messages sent by the real producer and remembered by body hash."""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rmq.acl import RequestSigner
from rmq.client import Message
from rmq.client.sync import Producer
from rmq.common.codes import RequestCode
from rmq.remoting.blocking import BlockingClient
from rmq.remoting.command import create_request

from tests.brokerproc import BrokerProcess, start_broker
from tests.integration.test_client_failover import NameServerProcess, start_namesrv

CLUSTER = "SparkNet"


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def call(addr: str, code: int, fields: dict[str, str], signer: RequestSigner | None = None) -> dict[str, str]:
    """One request (signed by `signer`, if given); its answer's ext fields (asserts success)."""
    with BlockingClient(rpc_hook=signer) as client:
        resp = client.invoke(addr, create_request(code, fields), 5000)
    assert resp.code == 0, resp.remark
    return resp.ext_fields


def create_topic(broker_addr: str, topic: str, queues: int = 4, signer: RequestSigner | None = None) -> None:
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(queues),
        "writeQueueNums": str(queues),
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
    }
    call(broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields, signer)


def consumer_offset(broker_addr: str, group: str, topic: str, broker: str, qid: int) -> int:
    fields = {"consumerGroup": group, "topic": topic, "queueId": str(qid), "bname": broker}
    with BlockingClient() as client:
        resp = client.invoke(broker_addr, create_request(RequestCode.QUERY_CONSUMER_OFFSET, fields), 5000)
    return int(resp.ext_fields["offset"]) if resp.code == 0 else -1


@dataclass
class SentMsg:
    topic: str
    broker: str
    queue_id: int
    queue_offset: int
    body: bytes
    tags: str | None


@dataclass
class Cluster:
    namesrv: NameServerProcess
    brokers: dict[str, BrokerProcess]
    """Each group's master, by broker name."""
    slaves: dict[str, BrokerProcess] = field(default_factory=dict)
    """Each group's slave (brokerId 1), by broker name, when the cluster has them."""
    sent: list[SentMsg] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return self.namesrv.addr

    def create(self, topic: str, queues: int = 4) -> None:
        for b in self.brokers.values():
            create_topic(b.broker_addr, topic, queues)

    def send(self, topic: str, n: int, prefix: str, tags: list[str] | None = None) -> list[SentMsg]:
        out = []
        with Producer(f"pg_{topic}", namesrv_addr=self.ns) as producer:
            for i in range(n):
                tag = tags[i % len(tags)] if tags else None
                body = f"{prefix}-{i}".encode()
                msg = Message(topic, body, tags=tag, properties={"n": str(i)})
                r = producer.send(msg)
                assert r.ok
                out.append(
                    SentMsg(
                        topic,
                        r.message_queue.broker_name,
                        r.message_queue.queue_id,
                        r.queue_offset,
                        body,
                        tag,
                    )
                )
        self.sent.extend(out)
        self.wait_visible(out)
        return out

    def wait_visible(self, sent: list[SentMsg], signer: RequestSigner | None = None) -> None:
        """Wait until each queue's max offset covers what was sent to it: a send is answered once it is in
        the CommitLog, its ConsumeQueue entry follows (the dispatch thread, RocketMQ's reput), and a batch
        read plans up to the max offsets it is then told. On a loaded machine that can take a while."""
        want: dict[tuple[str, str, int], int] = {}
        for m in sent:
            key = (m.topic, m.broker, m.queue_id)
            want[key] = max(want.get(key, 0), m.queue_offset + 1)
        deadline = time.monotonic() + 30
        for (topic, broker, qid), end in sorted(want.items()):
            fields = {"topic": topic, "queueId": str(qid)}
            addr = self.brokers[broker].broker_addr
            while int(call(addr, RequestCode.GET_MAX_OFFSET, fields, signer)["offset"]) < end:
                assert time.monotonic() < deadline, (
                    f"{topic} {broker} queue {qid}: offset {end - 1} not dispatched"
                )
                time.sleep(0.05)

    def wait_replicated(self, topic: str, queues: int = 4, timeout: float = 60.0) -> None:
        """Wait until each slave's max offsets of `topic` are its master's (the slave has every message)."""

        def max_offsets(addr: str) -> list[int]:
            return [
                int(call(addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)})["offset"])
                for q in range(queues)
            ]

        deadline = time.monotonic() + timeout
        for name, slave in self.slaves.items():
            while max_offsets(slave.broker_addr) != max_offsets(self.brokers[name].broker_addr):
                assert time.monotonic() < deadline, f"{name}'s slave did not catch up on {topic}"
                time.sleep(0.1)

    def stop(self) -> None:
        for b in [*self.slaves.values(), *self.brokers.values()]:
            b.stop()
        self.namesrv.stop()


def start_cluster(tmp: Path, names: list[str], *props: str, slaves: bool = False) -> Cluster:
    """A name server and a broker group per name: its master and, with `slaves`, a slave (brokerId 1)."""
    ns = start_namesrv(tmp)
    cluster = Cluster(ns, {})
    try:
        for name in names:
            group = (f"brokerName={name}", f"brokerClusterName={CLUSTER}", *props)
            cluster.brokers[name] = start_broker(tmp / name, *group, namesrv=ns.addr)
            if slaves:
                cluster.slaves[name] = start_slave(tmp / f"{name}-s", *group, namesrv=ns.addr)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def start_slave(store: Path, *props: str, namesrv: str) -> BrokerProcess:
    """A slave (brokerId 1) of the group `props` names; it finds its master through the name server."""
    return start_broker(store, *props, "brokerRole=SLAVE", "brokerId=1", namesrv=namesrv)


def hashes(bodies: list[bytes]) -> Counter[str]:
    return Counter(digest(b) for b in bodies)
