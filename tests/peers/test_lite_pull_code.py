"""LITE_PULL_MESSAGE (361) against rmq and the Apache 4.9.7 broker.

The Java client 4.9.8's ``DefaultLitePullConsumer`` sends PULL_MESSAGE (11) with the lite-pull sysFlag bit
(``MQClientAPIImpl.pullMessage`` always builds code 11 in 4.9.8); code 361 is what 5.x clients (Java 5,
``rocketmq-client-rust`` 1.0) send for the same pull. rmq answers 361 exactly as it answers 11. The Apache
4.9.7 broker predates 361 and answers REQUEST_CODE_NOT_SUPPORTED, so rmq's own lite pull client keeps
sending 11, as the Java 4.9.8 client does (it must keep working against Apache 4.x brokers).
"""

from __future__ import annotations

from rmq._store import decode_records
from rmq.common.codes import PullSysFlag, RequestCode, ResponseCode
from rmq.remoting import create_request
from rmq.remoting.client import invoke_sync

from tests.peers.conftest import Peers, unique


def pull(addr: str, code: int, topic: str, group: str, queue_id: int, suspend: bool = False) -> tuple:
    flag = PullSysFlag.build(False, suspend, True) | PullSysFlag.LITE_PULL_MESSAGE
    fields = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": str(flag),
        "commitOffset": "0",
        "suspendTimeoutMillis": "1000",
        "subscription": "*",
        "subVersion": "0",
        "expressionType": "TAG",
    }
    response = invoke_sync(addr, create_request(code, fields), 10_000)
    bodies = sorted(r[12].decode() for r in decode_records(response.body)) if response.body else []
    return response.code, response.ext_fields.get("nextBeginOffset"), bodies


def test_lite_pull_code_361_is_a_pull_on_rmq_and_unknown_to_apache_4_9(peers: Peers) -> None:
    topic, group = unique("JLite361"), unique("JLite361G")
    peers.both("send", topic=topic, group=group, count=8, mode="orderly", shards=1)
    addrs = {"rmq": peers.rmq.broker_addr, "apache": peers.apache.broker_addr}
    want = sorted(f"{topic}#{i}" for i in range(8))
    for broker, addr in addrs.items():
        assert pull(addr, RequestCode.PULL_MESSAGE, topic, group, 0) == (ResponseCode.SUCCESS, "8", want), (
            broker
        )
    assert pull(addrs["rmq"], RequestCode.LITE_PULL_MESSAGE, topic, group, 0) == (
        ResponseCode.SUCCESS,
        "8",
        want,
    )
    # Past the end, without the suspend bit: answered at once, nothing held.
    code, nxt, _ = pull(addrs["rmq"], RequestCode.LITE_PULL_MESSAGE, topic, group, 1)
    assert (code, nxt) == (pull(addrs["rmq"], RequestCode.PULL_MESSAGE, topic, group, 1)[:2])
    code, _, bodies = pull(addrs["apache"], RequestCode.LITE_PULL_MESSAGE, topic, group, 0)
    assert (code, bodies) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED, [])
