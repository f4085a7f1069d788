"""A raw Remoting POP consumer for tests: POP_MESSAGE / ACK_MESSAGE / BATCH_ACK_MESSAGE /
CHANGE_MESSAGE_INVISIBLETIME requests as RocketMQ 5.x's client and proxy send them, and the receipt
handles built from a pop's answer as the Java client's ``MQClientAPIImpl.processPopResponse`` builds
them (the broker's ``POP_CK`` property for retry-topic records, else startOffsetInfo / msgOffsetInfo)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import orjson
from rmq.broker.pop.wire import (
    ACK_MESSAGE,
    BATCH_ACK_MESSAGE,
    CHANGE_MESSAGE_INVISIBLETIME,
    POP_MESSAGE,
    BatchAck,
    ExtraInfo,
    real_topic,
    retry_mark,
)
from rmq.broker.records import parse_properties
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, create_request
from rmq.store import decode_records


@dataclass
class PopMsg:
    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    properties: dict[str, str]
    reconsume_times: int
    handle: ExtraInfo

    @property
    def real_topic(self) -> str:
        return real_topic(self.topic, self.group, self.handle.retry)

    group: str = ""


@dataclass
class PopAnswer:
    response: RemotingCommand
    messages: list[PopMsg]

    @property
    def code(self) -> int:
        return self.response.code


def _info_map(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for one in (text or "").split(";"):
        if one:
            mark, qid, value = one.split(" ")
            out[f"{mark}@{qid}"] = value
    return out


class PopDriver:
    def __init__(self, addr: str, broker_name: str = "broker-a") -> None:
        self.addr = addr
        self.broker_name = broker_name
        self.client = RemotingClient()

    async def close(self) -> None:
        await self.client.close()

    async def call(self, request: RemotingCommand, timeout_ms: int = 10_000) -> RemotingCommand:
        return await self.client.invoke(self.addr, request, timeout_ms)

    async def create_topic(self, topic: str, queues: int = 4) -> None:
        f = {"topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues), "perm": "6"}
        f.update({"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        r = await self.call(create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, f))
        assert r.code == ResponseCode.SUCCESS, r.remark

    async def create_group(self, group: str, **extra: object) -> None:
        body = {"groupName": group, "consumeEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16}
        body.update(extra)
        r = await self.call(
            create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, orjson.dumps(body))
        )
        assert r.code == ResponseCode.SUCCESS, r.remark

    async def send(self, topic: str, qid: int, body: bytes, tags: str = "") -> int:
        props = f"TAGS\x01{tags}\x02" if tags else ""
        f = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(qid), "f": "0"}
        f.update({"g": str(int(time.time() * 1000)), "h": "0", "i": props + "WAIT\x01true", "j": "0"})
        f.update({"k": "false", "m": "false"})
        r = await self.call(create_request(RequestCode.SEND_MESSAGE_V2, f, body))
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        return int(r.ext_fields["queueOffset"])

    async def wait_dispatched(self, topic: str, qid: int, count: int, deadline_s: float = 30.0) -> None:
        """Sends are answered before their consume queue is dispatched: wait until ``qid`` holds ``count``."""
        end = time.monotonic() + deadline_s
        while True:
            f = {"topic": topic, "queueId": str(qid)}
            r = await self.call(create_request(RequestCode.GET_MAX_OFFSET, f))
            if r.code == ResponseCode.SUCCESS and int(r.ext_fields["offset"]) >= count:
                return
            assert time.monotonic() < end, f"{topic}:{qid} did not reach {count} messages"
            await asyncio.sleep(0.02)

    async def pop(
        self,
        group: str,
        topic: str,
        *,
        queue_id: int = -1,
        max_msgs: int = 32,
        invisible_ms: int = 60_000,
        poll_ms: int = 0,
        order: bool = False,
        exp: str = "*",
        exp_type: str = "TAG",
        init_mode: int = 0,
        attempt_id: str | None = None,
    ) -> PopAnswer:
        f = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": str(queue_id),
            "maxMsgNums": str(max_msgs),
            "invisibleTime": str(invisible_ms),
            "pollTime": str(poll_ms),
            "bornTime": str(int(time.time() * 1000)),
            "initMode": str(init_mode),
            "expType": exp_type,
            "exp": exp,
            "order": "true" if order else "false",
        }
        if attempt_id:
            f["attemptId"] = attempt_id
        r = await self.call(create_request(POP_MESSAGE, f), poll_ms + 10_000)
        if r.code != ResponseCode.SUCCESS:
            return PopAnswer(r, [])
        h = r.ext_fields
        starts = _info_map(h.get("startOffsetInfo"))
        out = []
        for rec in decode_records(r.body, check_crc=True):
            props = parse_properties(rec[13])
            if "POP_CK" in props:
                handle = ExtraInfo.parse(props["POP_CK"])
            else:
                key = f"{retry_mark(rec[0])}@{rec[1]}"
                handle = ExtraInfo(
                    int(starts[key]),
                    int(h["popTime"]),
                    int(h["invisibleTime"]),
                    int(h["reviveQid"]),
                    retry_mark(rec[0]),
                    self.broker_name,
                    rec[1],
                    rec[2],
                )
            out.append(PopMsg(rec[0], rec[1], rec[2], rec[12], props, rec[10], handle, group))
        return PopAnswer(r, out)

    async def ack(self, m: PopMsg) -> RemotingCommand:
        f = {
            "consumerGroup": m.group,
            "topic": m.real_topic,
            "queueId": str(m.handle.queue_id),
            "extraInfo": str(m.handle),
            "offset": str(m.handle.msg_queue_offset),
        }
        return await self.call(create_request(ACK_MESSAGE, f))

    async def batch_ack(self, msgs: list[PopMsg]) -> RemotingCommand:
        groups: dict[tuple[str, str, int, int, int], list[PopMsg]] = {}
        for m in msgs:
            key = (m.topic, m.handle.retry, m.handle.queue_id, m.handle.ck_queue_offset, m.handle.pop_time)
            groups.setdefault(key, []).append(m)
        acks = []
        for (topic, retry, qid, start, pop_time), ms in groups.items():
            h = ms[0].handle
            bits = [int(m.handle.msg_queue_offset or 0) - start for m in ms]
            b = BatchAck(
                ms[0].group, topic, retry, start, qid, h.revive_qid, pop_time, h.invisible_time, bits
            )
            acks.append(b.to_dict())
        body = orjson.dumps({"acks": acks, "brokerName": self.broker_name})
        return await self.call(create_request(BATCH_ACK_MESSAGE, {}, body))

    async def change_invisible(self, m: PopMsg, invisible_ms: int) -> RemotingCommand:
        f = {
            "consumerGroup": m.group,
            "topic": m.real_topic,
            "queueId": str(m.handle.queue_id),
            "extraInfo": str(m.handle),
            "offset": str(m.handle.msg_queue_offset),
            "invisibleTime": str(invisible_ms),
        }
        r = await self.call(create_request(CHANGE_MESSAGE_INVISIBLETIME, f))
        if r.code == ResponseCode.SUCCESS:
            h = r.ext_fields
            m.handle = ExtraInfo(
                int(m.handle.msg_queue_offset or 0),
                int(h["popTime"]),
                int(h["invisibleTime"]),
                int(h["reviveQid"]),
                m.handle.retry,
                m.handle.broker_name,
                m.handle.queue_id,
                m.handle.msg_queue_offset,
            )
        return r
