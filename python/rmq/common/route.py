"""Route and topic-config bodies exchanged with the name server (REMOTING.md §3.5, §3.8).

Each class maps one Java bean: ``to_dict()`` gives the JSON object with the Java property names,
``from_dict()`` reads one back (tolerating fastjson's forms: numbers as strings, enum ordinals, integer map
keys, absent members = defaults), and ``to_json()`` / ``from_json()`` go through :mod:`rmq.common.fastjson`.
Written JSON is always strict (``brokerAddrs`` keys are quoted strings), which Java and C++ clients read.

``RegisterBrokerBody`` also has the compressed form (zlib stream of length-prefixed parts) brokers send when
``compressedRegister`` is on.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rmq.common import fastjson
from rmq.common.codes import MASTER_ID, PermName

__all__ = [
    "BrokerData",
    "ClusterInfo",
    "DataVersion",
    "QueueData",
    "RegisterBrokerBody",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicRouteData",
]

SINGLE_TAG = "SINGLE_TAG"
MULTI_TAG = "MULTI_TAG"
_FILTER_TYPES = (SINGLE_TAG, MULTI_TAG)
_INT = struct.Struct(">i")
_MAX_INFLATED_REGISTER_BODY = 256 * 1024 * 1024


def _as_int(value: Any, default: int = 0) -> int:
    return default if value is None else int(value)


def _as_bool(value: Any, default: bool = False) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value)


def _filter_type(value: Any) -> str:
    if value is None:
        return SINGLE_TAG
    if isinstance(value, int):
        return _FILTER_TYPES[value]
    if value not in _FILTER_TYPES:
        raise ValueError(f"unknown topicFilterType {value!r}")
    return str(value)


def _member(d: Mapping[str, Any], key: str, kind: type = Mapping) -> Any:
    """``d[key]`` if present and of the expected JSON kind (object by default), ``None`` if absent/null."""
    value = d.get(key)
    if value is not None and not isinstance(value, kind):
        raise ValueError(f"{key}: expected {'an object' if kind is Mapping else 'an array'}")
    return value


def _attributes(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"topic attributes must be a JSON object, not {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def _as_mapping(data: bytes | bytearray | memoryview | str | Mapping[str, Any]) -> Mapping[Any, Any]:
    obj = data if isinstance(data, Mapping) else fastjson.loads(data)
    if not isinstance(obj, Mapping):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


@dataclass(slots=True)
class DataVersion:
    """``{"counter": long, "timestamp": long}``; equal when both fields are equal (Java ``equals``)."""

    timestamp: int = 0
    counter: int = 0

    @classmethod
    def now(cls) -> DataVersion:
        return cls(timestamp=int(time.time() * 1000), counter=0)

    def next_version(self, now_ms: int | None = None) -> None:
        self.timestamp = int(time.time() * 1000) if now_ms is None else now_ms
        self.counter += 1

    def to_dict(self) -> dict[str, Any]:
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DataVersion:
        return cls(timestamp=_as_int(d.get("timestamp")), counter=_as_int(d.get("counter")))

    def to_json(self) -> bytes:
        return fastjson.dumps(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> DataVersion:
        return cls.from_dict(_as_mapping(data))


@dataclass(slots=True)
class TopicConfig:
    """A broker's configuration of one topic (``C/TopicConfig.java``)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PermName.READ | PermName.WRITE
    topic_filter_type: str = SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)
    """RocketMQ 5.x's topic attributes (:mod:`rmq.common.topic_attributes`); written only when there are
    some, so a topic without any looks as 4.9 writes it."""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }
        if self.attributes:
            d["attributes"] = dict(sorted(self.attributes.items()))
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], topic_name: str | None = None) -> TopicConfig:
        name = d.get("topicName", topic_name)
        if name is None:
            raise ValueError("TopicConfig without topicName")
        return cls(
            topic_name=str(name),
            read_queue_nums=_as_int(d.get("readQueueNums"), 16),
            write_queue_nums=_as_int(d.get("writeQueueNums"), 16),
            perm=_as_int(d.get("perm"), PermName.READ | PermName.WRITE),
            topic_filter_type=_filter_type(d.get("topicFilterType")),
            topic_sys_flag=_as_int(d.get("topicSysFlag")),
            order=_as_bool(d.get("order")),
            attributes=_attributes(d.get("attributes")),
        )

    def encode_compact(self) -> str:
        """Java's ``TopicConfig.encode()``: ``"<name> <read> <write> <perm> <filterType>"``.

        ``topicSysFlag`` and ``order`` are lost in this form.
        """
        return " ".join(
            (
                self.topic_name,
                str(self.read_queue_nums),
                str(self.write_queue_nums),
                str(self.perm),
                self.topic_filter_type,
            )
        )

    @classmethod
    def decode_compact(cls, text: str) -> TopicConfig:
        parts = text.split(" ")
        if len(parts) != 5:
            raise ValueError(f"bad compact TopicConfig {text!r}")
        return cls(
            topic_name=parts[0],
            read_queue_nums=int(parts[1]),
            write_queue_nums=int(parts[2]),
            perm=int(parts[3]),
            topic_filter_type=_filter_type(parts[4]),
        )


@dataclass(slots=True)
class QueueData:
    """One broker's queues of a topic in a route (``CP/route/QueueData.java``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    @classmethod
    def from_topic_config(cls, broker_name: str, tc: TopicConfig) -> QueueData:
        return cls(broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)

    def to_dict(self) -> dict[str, Any]:
        # Both spellings: ``topicSynFlag`` is the pre-4.9.0 name; clients ignore the field either way.
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSynFlag": self.topic_sys_flag,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QueueData:
        flag = d.get("topicSysFlag")
        if flag is None:
            flag = d.get("topicSynFlag")
        return cls(
            broker_name=str(d["brokerName"]),
            read_queue_nums=_as_int(d.get("readQueueNums")),
            write_queue_nums=_as_int(d.get("writeQueueNums")),
            perm=_as_int(d.get("perm")),
            topic_sys_flag=_as_int(flag),
        )


@dataclass(slots=True)
class BrokerData:
    """A broker group: name, cluster and ``brokerId -> "ip:port"`` (``CP/route/BrokerData.java``).

    ``enableActingMaster`` and ``zoneName`` are the 5.x additions. A 5.x name server always writes
    ``enableActingMaster`` (``false`` unless the group is a 5.x acting-master one, which no rmq broker is),
    and some 5.x clients (``rocketmq-client-rust`` 1.0) refuse a route without it; ``zoneName`` is written
    only when set, as fastjson drops null members. 4.x clients ignore both.
    """

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: str | None = None

    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)

    def copy(self) -> BrokerData:
        return BrokerData(
            self.cluster,
            self.broker_name,
            dict(self.broker_addrs),
            self.enable_acting_master,
            self.zone_name,
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "brokerAddrs": {str(k): v for k, v in self.broker_addrs.items()},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
        }
        if self.zone_name is not None:
            d["zoneName"] = self.zone_name
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BrokerData:
        addrs = _member(d, "brokerAddrs") or {}
        return cls(
            cluster=str(d.get("cluster") or ""),
            broker_name=str(d["brokerName"]),
            broker_addrs={int(k): str(v) for k, v in addrs.items()},
            enable_acting_master=_as_bool(d.get("enableActingMaster")),
            zone_name=None if d.get("zoneName") is None else str(d["zoneName"]),
        )


@dataclass(slots=True)
class TopicRouteData:
    """The route of one topic (``CP/route/TopicRouteData.java``), the GET_ROUTEINFO_BY_TOPIC body.

    5.x adds ``topicQueueMappingByBroker`` (static-topic queue mappings); a 5.x name server leaves it out for
    topics without such a mapping, and rmq has none, so it is never written (and ignored when read).
    """

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "brokerDatas": [b.to_dict() for b in self.broker_datas],
            "filterServerTable": self.filter_server_table,
            "queueDatas": [q.to_dict() for q in self.queue_datas],
        }
        if self.order_topic_conf is not None:
            d["orderTopicConf"] = self.order_topic_conf
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TopicRouteData:
        fst = _member(d, "filterServerTable") or {}
        return cls(
            queue_datas=[QueueData.from_dict(q) for q in _member(d, "queueDatas", list) or ()],
            broker_datas=[BrokerData.from_dict(b) for b in _member(d, "brokerDatas", list) or ()],
            filter_server_table={str(k): [str(a) for a in v or ()] for k, v in fst.items()},
            order_topic_conf=d.get("orderTopicConf"),
        )

    def to_json(self) -> bytes:
        return fastjson.dumps(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> TopicRouteData:
        return cls.from_dict(_as_mapping(data))


@dataclass(slots=True)
class TopicConfigSerializeWrapper:
    """``{"dataVersion": DataVersion, "topicConfigTable": {topic: TopicConfig}}`` (also ``topics.json``)."""

    data_version: DataVersion = field(default_factory=DataVersion)
    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataVersion": self.data_version.to_dict(),
            "topicConfigTable": {k: v.to_dict() for k, v in self.topic_config_table.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TopicConfigSerializeWrapper:
        dv = _member(d, "dataVersion")
        table = _member(d, "topicConfigTable") or {}
        return cls(
            data_version=DataVersion.from_dict(dv) if dv else DataVersion(),
            topic_config_table={str(k): TopicConfig.from_dict(v, str(k)) for k, v in table.items()},
        )

    def to_json(self) -> bytes:
        return fastjson.dumps(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> TopicConfigSerializeWrapper:
        return cls.from_dict(_as_mapping(data))


@dataclass(slots=True)
class RegisterBrokerBody:
    """The REGISTER_BROKER body: a broker's topic table plus its filter servers."""

    topic_config_wrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filter_server_list: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_wrapper.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RegisterBrokerBody:
        wrapper = _member(d, "topicConfigSerializeWrapper")
        return cls(
            topic_config_wrapper=(
                TopicConfigSerializeWrapper.from_dict(wrapper) if wrapper else TopicConfigSerializeWrapper()
            ),
            filter_server_list=[str(a) for a in _member(d, "filterServerList", list) or ()],
        )

    def encode(self, compress: bool = False) -> bytes:
        """JSON, or the compressed layout (REMOTING.md §3.5) when ``compress`` is true."""
        if not compress:
            return fastjson.dumps(self.to_dict())
        parts: list[bytes] = []

        def put(blob: bytes) -> None:
            parts.append(_INT.pack(len(blob)))
            parts.append(blob)

        put(self.topic_config_wrapper.data_version.to_json())
        parts.append(_INT.pack(len(self.topic_config_wrapper.topic_config_table)))
        for tc in self.topic_config_wrapper.topic_config_table.values():
            put(tc.encode_compact().encode("utf-8"))
        put(fastjson.dumps(list(self.filter_server_list)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, compressed: bool = False) -> RegisterBrokerBody:
        """Inverse of :meth:`encode`; raises ``ValueError`` on malformed input."""
        if not compressed:
            return cls.from_dict(_as_mapping(data))
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(data, _MAX_INFLATED_REGISTER_BODY)
        except zlib.error as exc:
            raise ValueError(f"bad compressed RegisterBrokerBody: {exc}") from None
        if inflater.unconsumed_tail:
            raise ValueError("compressed RegisterBrokerBody inflates beyond the limit")
        reader = _Reader(raw)
        data_version = DataVersion.from_json(reader.blob())
        table: dict[str, TopicConfig] = {}
        for _ in range(reader.int()):
            tc = TopicConfig.decode_compact(reader.blob().decode("utf-8"))
            table[tc.topic_name] = tc
        filters = fastjson.loads(reader.blob())
        return cls(
            TopicConfigSerializeWrapper(data_version, table),
            [str(a) for a in filters] if isinstance(filters, list) else [],
        )


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int(self) -> int:
        if self.pos + 4 > len(self.data):
            raise ValueError("compressed RegisterBrokerBody truncated")
        (value,) = _INT.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def blob(self) -> bytes:
        n = self.int()
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("compressed RegisterBrokerBody truncated")
        blob = self.data[self.pos : self.pos + n]
        self.pos += n
        return blob


@dataclass(slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO body: ``{"brokerAddrTable": {...}, "clusterAddrTable": {cluster: [...]}}``."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {k: v.to_dict() for k, v in self.broker_addr_table.items()},
            "clusterAddrTable": {k: sorted(v) for k, v in self.cluster_addr_table.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ClusterInfo:
        bat = _member(d, "brokerAddrTable") or {}
        cat: Mapping[str, Iterable[str]] = _member(d, "clusterAddrTable") or {}
        return cls(
            broker_addr_table={str(k): BrokerData.from_dict(v) for k, v in bat.items()},
            cluster_addr_table={str(k): {str(n) for n in v} for k, v in cat.items()},
        )

    def to_json(self) -> bytes:
        return fastjson.dumps(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes | bytearray | memoryview | str) -> ClusterInfo:
        return cls.from_dict(_as_mapping(data))
