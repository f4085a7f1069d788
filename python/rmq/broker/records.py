"""Stored records as the broker's services see them: decoded views of `rmq._store` tuples, the
property codec, and re-encoding a record (CHECK_TRANSACTION_STATE carries one)."""

from __future__ import annotations

import socket
import struct
import zlib
from dataclasses import dataclass

from rmq.store import MessageStore, decode_records

__all__ = ["StoredMessage", "encode_record", "parse_properties", "properties_string", "put_to_real_topic"]

_SEP = "\x02"
_KV = "\x01"
MAGIC = 0xDAA320A7


def parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for seg in text.split(_SEP):
        i = seg.find(_KV)
        if 0 < i < len(seg) - 1:
            out[seg[:i]] = seg[i + 1 :]
    return out


def properties_string(props: dict[str, str]) -> str:
    return _SEP.join(f"{k}{_KV}{v}" for k, v in props.items() if k and v)


@dataclass
class StoredMessage:
    topic: str
    queue_id: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    properties: dict[str, str]
    store_size: int

    @classmethod
    def decode_all(cls, buffer: bytes) -> list[StoredMessage]:
        out = []
        for t in decode_records(buffer):
            out.append(
                cls(
                    t[0],
                    t[1],
                    t[2],
                    t[3],
                    t[4],
                    t[5],
                    t[6],
                    t[7],
                    t[8],
                    t[9],
                    t[10],
                    t[11],
                    t[12],
                    parse_properties(t[13]),
                    t[14],
                )
            )
        return out

    @classmethod
    def decode_one(cls, buffer: bytes) -> StoredMessage:
        return cls.decode_all(buffer)[0]


def _host(addr: str) -> tuple[bytes, bool]:
    host, _, port = addr.rpartition(":")
    host = host.strip("[]")
    if ":" in host:
        return socket.inet_pton(socket.AF_INET6, host) + struct.pack(">i", int(port)), True
    return socket.inet_aton(host) + struct.pack(">i", int(port)), False


def encode_record(m: StoredMessage) -> bytes:
    """The record layout of REMOTING.md §4.1 for `m` (its fields as given)."""
    born, born6 = _host(m.born_host)
    store, store6 = _host(m.store_host)
    sys_flag = m.sys_flag & ~0x30 | (0x10 if born6 else 0) | (0x20 if store6 else 0)
    topic = m.topic.encode()
    props = properties_string(m.properties).encode()
    body = m.body
    total = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + len(born) + 8 + len(store) + 4 + 8 + 4 + len(body)
    total += 1 + len(topic) + 2 + len(props)
    return b"".join(
        (
            struct.pack(
                ">iIiiiqqiq",
                total,
                MAGIC,
                zlib.crc32(body) & 0x7FFFFFFF,
                m.queue_id,
                m.flag,
                m.queue_offset,
                m.physical_offset,
                sys_flag,
                m.born_timestamp,
            ),
            born,
            struct.pack(">q", m.store_timestamp),
            store,
            struct.pack(">iqi", m.reconsume_times, m.prepared_transaction_offset, len(body)),
            body,
            struct.pack(">B", len(topic)),
            topic,
            struct.pack(">h", len(props)),
            props,
        )
    )


def put_to_real_topic(store: MessageStore, m: StoredMessage) -> bool:
    """Re-put a parked message (delay level, timer) to its REAL_TOPIC / REAL_QID, keeping body,
    flags, born time and host and reconsume times. The stored property string keeps DELAY /
    REAL_TOPIC / REAL_QID, as RocketMQ's does. False when the record does not say where it goes."""
    real_topic = m.properties.get("REAL_TOPIC")
    real_qid = m.properties.get("REAL_QID")
    if not real_topic or real_qid is None or not real_qid.lstrip("-").isdigit():
        return False
    store.put(
        real_topic,
        int(real_qid),
        m.body,
        properties_string(m.properties).encode(),
        m.flag,
        m.sys_flag,
        m.born_timestamp,
        m.born_host,
        m.reconsume_times,
        0,
    )
    return True
