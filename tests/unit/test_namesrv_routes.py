"""Name server processors and route table, driven without sockets through a fake request context."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from rmq.common.codes import NAMESPACE_ORDER_TOPIC_CONFIG, PermName, RequestCode, ResponseCode
from rmq.common.route import (
    ClusterInfo,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from rmq.namesrv.kv_config import KVConfigManager
from rmq.namesrv.processors import NamesrvProcessors
from rmq.namesrv.route_table import RouteInfoManager
from rmq.remoting.command import RemotingCommand, create_request
from rmq.remoting.dispatcher import Dispatcher
from rmq.remoting.errors import HeaderError


class FakeContext:
    def __init__(self, channel_id: int, remote_addr: str = "10.0.0.99:50000") -> None:
        self.channel_id = channel_id
        self.remote_addr = remote_addr
        self.sent: list[RemotingCommand] = []

    def send_response(self, response: RemotingCommand) -> bool:
        self.sent.append(response)
        return True


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Namesrv:
    """Processors over a fresh route table and KV config, with a manual clock."""

    def __init__(self, kv_path: Path | None = None) -> None:
        self.clock = Clock()
        self.routes = RouteInfoManager(clock=self.clock)
        self.kv = KVConfigManager(kv_path)
        self.procs = NamesrvProcessors(self.routes, self.kv)
        self.table = self.procs.table()

    def call(self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None, **kw: Any) -> Any:
        ctx: Any = kw.pop("ctx", None) or FakeContext(1)
        req = create_request(code, ext or {}, body)
        for k, v in kw.items():
            setattr(req, k, v)
        return self.table[code](ctx, req)

    def register(
        self,
        broker_name: str,
        addr: str,
        cluster: str,
        topics: dict[str, tuple[int, int]],
        *,
        broker_id: int = 0,
        version: DataVersion | None = None,
        compressed: bool = False,
        ctx: FakeContext | None = None,
        crc: bool = False,
    ) -> RemotingCommand:
        wrapper = TopicConfigSerializeWrapper(
            version or DataVersion(1, 1),
            {t: TopicConfig(t, r, w, 6) for t, (r, w) in topics.items()},
        )
        body = RegisterBrokerBody(wrapper, []).encode(compressed)
        host = addr.rsplit(":", 1)[0]
        ext = {
            "brokerName": broker_name,
            "brokerAddr": addr,
            "clusterName": cluster,
            "haServerAddr": f"{host}:10912",
            "brokerId": str(broker_id),
            "compressed": "true" if compressed else "false",
        }
        if crc:
            ext["bodyCrc32"] = str(zlib.crc32(body) & 0x7FFFFFFF)
        resp: RemotingCommand = self.call(RequestCode.REGISTER_BROKER, ext, body, ctx=ctx or FakeContext(1))
        return resp

    def route(self, topic: str) -> RemotingCommand:
        resp: RemotingCommand = self.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return resp


A1 = "10.0.0.1:10911"
A2 = "10.0.0.3:10911"  # slave of broker-a
B1 = "10.0.0.2:10911"


@pytest.fixture
def ns() -> Namesrv:
    ns = Namesrv()
    ns.register("broker-a", A1, "c1", {"TopicA": (4, 4), "TBW102": (8, 8)}, ctx=FakeContext(11))
    ns.register(
        "broker-b", B1, "c2", {"TopicA": (2, 2), "TopicB": (1, 1)}, ctx=FakeContext(12), compressed=True
    )
    return ns


def route_of(resp: RemotingCommand) -> TopicRouteData:
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.body is not None
    return TopicRouteData.from_json(bytes(resp.body))


def test_routes_over_two_clusters(ns: Namesrv) -> None:
    resp = ns.route("TopicA")
    raw = json.loads(bytes(resp.body or b""))  # strict JSON: brokerAddrs keys are strings
    assert {b["brokerName"]: b["brokerAddrs"] for b in raw["brokerDatas"]} == {
        "broker-a": {"0": A1},
        "broker-b": {"0": B1},
    }
    assert "orderTopicConf" not in raw
    assert [b["enableActingMaster"] for b in raw["brokerDatas"]] == [False, False]  # as 5.x name servers
    route = route_of(resp)
    assert {(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas} == {
        ("broker-a", 4, 4, 6),
        ("broker-b", 2, 2, 6),
    }
    assert {b.cluster for b in route.broker_datas} == {"c1", "c2"}
    assert [q.broker_name for q in route_of(ns.route("TopicB")).queue_datas] == ["broker-b"]


def test_unknown_topic_is_17(ns: Namesrv) -> None:
    resp = ns.route("Nope")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark == "No topic route info in name server for the topic: Nope"
    assert resp.body is None


def test_slave_learns_master_and_appears_in_route(ns: Namesrv) -> None:
    resp = ns.register("broker-a", A2, "c1", {"TopicA": (4, 4)}, broker_id=1, ctx=FakeContext(13))
    assert resp.code == 0
    assert resp.ext_fields == {"masterAddr": A1, "haServerAddr": "10.0.0.1:10912"}
    route = route_of(ns.route("TopicA"))
    addrs = {b.broker_name: b.broker_addrs for b in route.broker_datas}
    assert addrs["broker-a"] == {0: A1, 1: A2}
    # a master gets no master address back
    assert ns.register("broker-a", A1, "c1", {"TopicA": (4, 4)}).ext_fields == {}


def test_cluster_info_and_topic_lists(ns: Namesrv) -> None:
    info = ClusterInfo.from_json(bytes(ns.call(RequestCode.GET_BROKER_CLUSTER_INFO).body))
    assert info.cluster_addr_table == {"c1": {"broker-a"}, "c2": {"broker-b"}}
    assert info.broker_addr_table["broker-b"].broker_addrs == {0: B1}

    topics = json.loads(ns.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body)
    assert sorted(topics["topicList"]) == ["TBW102", "TopicA", "TopicB"]
    by_cluster = json.loads(ns.call(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "c2"}).body)
    assert sorted(by_cluster["topicList"]) == ["TopicA", "TopicB"]
    assert json.loads(ns.call(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "zz"}).body) == {"topicList": []}

    system = json.loads(ns.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS).body)
    assert sorted(system["topicList"]) == ["broker-a", "broker-b", "c1", "c2"]
    assert system["brokerAddr"] in (A1, B1)


def test_expiry_with_injected_clock(ns: Namesrv) -> None:
    ns.clock.now += 60_000
    ns.register("broker-a", A1, "c1", {"TopicA": (4, 4), "TBW102": (8, 8)})  # a keeps heart-beating
    ns.clock.now += 60_001  # b silent for 120.001 s
    expired = ns.routes.scan_not_active()
    assert [(addr, live.channel_id) for addr, live in expired] == [(B1, 12)]
    assert ns.route("TopicB").code == ResponseCode.TOPIC_NOT_EXIST
    assert [q.broker_name for q in route_of(ns.route("TopicA")).queue_datas] == ["broker-a"]
    assert ns.routes.cluster_addr_table == {"c1": {"broker-a"}}
    ns.clock.now += 59_999
    assert ns.routes.scan_not_active() == []  # a last seen exactly 120 s ago: still alive
    ns.clock.now += 1
    assert [addr for addr, _ in ns.routes.scan_not_active()] == [A1]
    assert ns.routes.get_all_topics() == []


def test_unregister(ns: Namesrv) -> None:
    ns.register("broker-a", A2, "c1", {"TopicA": (4, 4)}, broker_id=1)
    ext = {"brokerName": "broker-a", "clusterName": "c1", "brokerAddr": A1, "brokerId": "0"}
    assert ns.call(RequestCode.UNREGISTER_BROKER, ext, ctx=FakeContext(11)).code == 0  # its connection
    # the slave keeps broker-a (and its topics) alive, without a master
    route = route_of(ns.route("TopicA"))
    assert {b.broker_name: b.broker_addrs for b in route.broker_datas}["broker-a"] == {1: A2}
    ext.update(brokerAddr=A2, brokerId="1")
    assert ns.call(RequestCode.UNREGISTER_BROKER, ext).code == 0
    assert [q.broker_name for q in route_of(ns.route("TopicA")).queue_datas] == ["broker-b"]
    assert "c1" not in ns.routes.cluster_addr_table
    assert ns.route("TBW102").code == ResponseCode.TOPIC_NOT_EXIST


def test_channel_closed_removes_every_broker_on_it(ns: Namesrv) -> None:
    ns.register("broker-c", "10.0.0.5:10911", "c2", {"TopicC": (1, 1)}, ctx=FakeContext(12))
    assert sorted(ns.routes.on_channel_destroyed(12)) == [B1, "10.0.0.5:10911"]
    assert ns.route("TopicB").code == ResponseCode.TOPIC_NOT_EXIST
    assert ns.route("TopicC").code == ResponseCode.TOPIC_NOT_EXIST
    assert ns.routes.on_channel_destroyed(999) == []
    assert ns.route("TopicA").code == 0


def test_reconnect_then_late_close_of_old_channel_keeps_broker(ns: Namesrv) -> None:
    ns.register("broker-b", B1, "c2", {"TopicB": (1, 1)}, ctx=FakeContext(99), version=DataVersion(2, 2))
    assert ns.routes.on_channel_destroyed(12) == []  # the old connection's close arrives late
    assert ns.route("TopicB").code == 0


def test_delete_topic(ns: Namesrv) -> None:
    assert ns.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicA", "clusterName": "c1"}).code == 0
    assert [q.broker_name for q in route_of(ns.route("TopicA")).queue_datas] == ["broker-b"]
    assert ns.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicB"}).code == 0
    assert ns.route("TopicB").code == ResponseCode.TOPIC_NOT_EXIST
    # the same data version re-registered does not bring it back (Java semantics) ...
    ns.register(
        "broker-b", B1, "c2", {"TopicA": (2, 2), "TopicB": (1, 1)}, ctx=FakeContext(12), compressed=True
    )
    assert ns.route("TopicB").code == ResponseCode.TOPIC_NOT_EXIST
    # ... a new one does
    ns.register("broker-b", B1, "c2", {"TopicB": (1, 1)}, ctx=FakeContext(12), version=DataVersion(5, 2))
    assert ns.route("TopicB").code == 0


def test_query_data_version(ns: Namesrv) -> None:
    ext = {"brokerName": "broker-a", "brokerAddr": A1, "clusterName": "c1", "brokerId": "0"}
    ns.clock.now += 100_000
    same = ns.call(RequestCode.QUERY_DATA_VERSION, ext, DataVersion(1, 1).to_json())
    assert same.ext_fields == {"changed": "false"}
    assert DataVersion.from_json(bytes(same.body)) == DataVersion(1, 1)
    assert ns.routes.broker_live_table[A1].last_update_ms == ns.clock.now  # refreshed
    changed = ns.call(RequestCode.QUERY_DATA_VERSION, ext, DataVersion(9, 2).to_json())
    assert changed.ext_fields == {"changed": "true"}
    unknown = ns.call(
        RequestCode.QUERY_DATA_VERSION, dict(ext, brokerAddr="1.1.1.1:1"), DataVersion().to_json()
    )
    assert unknown.ext_fields == {"changed": "true"} and unknown.body is None


def test_write_perm(ns: Namesrv) -> None:
    wipe = ns.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert wipe.ext_fields == {"wipeTopicCount": "2"}
    perms = {q.broker_name: q.perm for q in route_of(ns.route("TopicA")).queue_datas}
    assert perms == {"broker-a": PermName.READ, "broker-b": 6}
    add = ns.call(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert add.ext_fields == {"addTopicCount": "2"}
    assert {q.perm for q in route_of(ns.route("TopicA")).queue_datas} == {6}
    assert ns.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "zz"}).ext_fields == {
        "wipeTopicCount": "0"
    }


def test_kv_config_and_order_topic_conf(ns: Namesrv) -> None:
    put = {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": "TopicA", "value": "broker-a:4;broker-b:2"}
    assert ns.call(RequestCode.PUT_KV_CONFIG, put).code == 0
    got = ns.call(RequestCode.GET_KV_CONFIG, {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": "TopicA"})
    assert got.ext_fields == {"value": "broker-a:4;broker-b:2"}
    assert route_of(ns.route("TopicA")).order_topic_conf == "broker-a:4;broker-b:2"
    assert route_of(ns.route("TopicB")).order_topic_conf is None
    # the broker receives the ORDER_TOPIC_CONFIG table when it registers
    resp = ns.register("broker-a", A1, "c1", {"TopicA": (4, 4)})
    assert json.loads(bytes(resp.body or b"")) == {"table": {"TopicA": "broker-a:4;broker-b:2"}}
    listed = ns.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG})
    assert json.loads(listed.body) == {"table": {"TopicA": "broker-a:4;broker-b:2"}}

    assert (
        ns.call(
            RequestCode.DELETE_KV_CONFIG, {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": "TopicA"}
        ).code
        == 0
    )
    missing = ns.call(RequestCode.GET_KV_CONFIG, {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": "TopicA"})
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    assert missing.remark == "No config item, Namespace: ORDER_TOPIC_CONFIG Key: TopicA"
    nothing = ns.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "never"})
    assert (nothing.code, nothing.remark) == (
        ResponseCode.QUERY_NOT_FOUND,
        "No config item, Namespace: never",
    )
    assert route_of(ns.route("TopicA")).order_topic_conf is None


def test_kv_config_persists_atomically(tmp_path: Path) -> None:
    path = tmp_path / "namesrv" / "kvConfig.json"
    ns = Namesrv(path)
    ns.call(RequestCode.PUT_KV_CONFIG, {"namespace": "ns1", "key": "k", "value": "v"})
    ns.call(RequestCode.PUT_KV_CONFIG, {"namespace": "ns2", "key": "k2", "value": "v2"})
    assert json.loads(path.read_bytes()) == {"configTable": {"ns1": {"k": "v"}, "ns2": {"k2": "v2"}}}
    assert not path.with_name("kvConfig.json.tmp").exists()
    reloaded = KVConfigManager(path)
    reloaded.load()
    assert reloaded.get("ns2", "k2") == "v2"
    # Java's file (fastjson, pretty-printed) loads too
    path.write_text('{\n\t"configTable":{\n\t\t"ORDER_TOPIC_CONFIG":{\n\t\t\t"T":"b:1"\n\t\t}\n\t}\n}')
    java = KVConfigManager(path)
    java.load()
    assert java.get("ORDER_TOPIC_CONFIG", "T") == "b:1"


def test_compressed_register_and_crc(ns: Namesrv) -> None:
    resp = ns.register("broker-c", "10.0.0.7:10911", "c3", {"TopicZ": (3, 3)}, compressed=True, crc=True)
    assert resp.code == 0
    assert [q.read_queue_nums for q in route_of(ns.route("TopicZ")).queue_datas] == [3]
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(DataVersion(1, 1), {})).encode()
    ext = {
        "brokerName": "broker-d",
        "brokerAddr": "10.0.0.8:10911",
        "clusterName": "c3",
        "haServerAddr": "10.0.0.8:10912",
        "brokerId": "0",
        "bodyCrc32": str((zlib.crc32(body) & 0x7FFFFFFF) ^ 1),
    }
    bad = ns.call(RequestCode.REGISTER_BROKER, ext, body)
    assert (bad.code, bad.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert "broker-d" not in ns.routes.broker_addr_table


def test_register_body_forms(ns: Namesrv) -> None:
    ext = {
        "brokerName": "broker-e",
        "brokerAddr": "10.0.0.9:10911",
        "clusterName": "c4",
        "haServerAddr": "10.0.0.9:10912",
        "brokerId": "0",
    }
    # no body: registered, no topics
    assert ns.call(RequestCode.REGISTER_BROKER, ext, None).code == 0
    assert ns.routes.broker_addr_table["broker-e"].broker_addrs == {0: "10.0.0.9:10911"}
    # a pre-3.0.11 broker sends a bare TopicConfigSerializeWrapper
    old = TopicConfigSerializeWrapper(DataVersion(3, 3), {"Old": TopicConfig("Old", 2, 2, 6)}).to_json()
    assert ns.call(RequestCode.REGISTER_BROKER, ext, old, version=36).code == 0
    assert route_of(ns.route("Old")).queue_datas[0].broker_name == "broker-e"
    # garbage bodies are a SYSTEM_ERROR, not a crash
    bad = ns.call(RequestCode.REGISTER_BROKER, dict(ext, compressed="true"), b"not zlib at all")
    assert bad.code == ResponseCode.SYSTEM_ERROR and (bad.remark or "").startswith("Failed to decode")
    bad_json = ns.call(RequestCode.REGISTER_BROKER, ext, b'{"topicConfigSerializeWrapper":[]}')
    assert bad_json.code == ResponseCode.SYSTEM_ERROR


def test_fastjson_register_body_from_a_java_broker(ns: Namesrv) -> None:
    body = (
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":7,"timestamp":1},'
        b'"topicConfigTable":{"J":{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG",'
        b'"topicName":"J","topicSysFlag":0,"writeQueueNums":8}}}}'
    )
    ext = {
        "brokerName": "broker-j",
        "brokerAddr": "10.0.1.1:10911",
        "clusterName": "DefaultCluster",
        "haServerAddr": "10.0.1.1:10912",
        "brokerId": "0",
        "compressed": "false",
        "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
    }
    assert ns.call(RequestCode.REGISTER_BROKER, ext, body).code == 0
    assert route_of(ns.route("J")).queue_datas[0].write_queue_nums == 8


def test_missing_header_fields() -> None:
    ns = Namesrv()
    with pytest.raises(HeaderError, match="<topic>"):
        ns.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {})
    # through the dispatcher that becomes a SYSTEM_ERROR response
    dispatcher = Dispatcher()
    for code, processor in ns.table.items():
        dispatcher.register(code, processor)
    ctx = FakeContext(1)
    dispatcher.dispatch(ctx, create_request(RequestCode.REGISTER_BROKER, {"brokerName": "x"}))  # type: ignore[arg-type]
    [resp] = ctx.sent
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == "the custom field <brokerAddr> is null"


def test_unit_topic_lists(ns: Namesrv) -> None:
    ns.routes.topic_queue_table["TopicA"]["broker-a"].topic_sys_flag = 1
    ns.routes.topic_queue_table["TopicB"]["broker-b"].topic_sys_flag = 2
    assert json.loads(ns.call(RequestCode.GET_UNIT_TOPIC_LIST).body)["topicList"] == ["TopicA"]
    assert json.loads(ns.call(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST).body)["topicList"] == ["TopicB"]
    assert json.loads(ns.call(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST).body)["topicList"] == ["TopicB"]


def test_promoted_slave_replaces_its_old_id(ns: Namesrv) -> None:
    ns.register("broker-a", A2, "c1", {"TopicA": (4, 4)}, broker_id=1)
    ns.routes.unregister_broker("c1", A1, "broker-a", 0)
    ns.register("broker-a", A2, "c1", {"TopicA": (4, 4)}, broker_id=0, version=DataVersion(8, 8))
    assert ns.routes.broker_addr_table["broker-a"].broker_addrs == {0: A2}


# --- takeover protection ----------------------------------------------------------------------------------

EVIL = "10.0.0.66:10911"


def unregister(ns: Namesrv, name: str, addr: str, broker_id: int, ctx: FakeContext) -> RemotingCommand:
    ext = {"brokerName": name, "clusterName": "c1", "brokerAddr": addr, "brokerId": str(broker_id)}
    resp: RemotingCommand = ns.call(RequestCode.UNREGISTER_BROKER, ext, ctx=ctx)
    return resp


def broker_a_addrs(ns: Namesrv) -> dict[int, str]:
    return dict(ns.routes.broker_addr_table["broker-a"].broker_addrs)


def test_takeover_of_a_live_registration_is_refused_and_logged(
    ns: Namesrv, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", "rmq.namesrv")
    ns.clock.now += 5_000
    resp = ns.register("broker-a", EVIL, "evil", {"TopicEvil": (1, 1)}, ctx=FakeContext(66, "10.9.9.9:4000"))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark is not None
    assert f"brokerName=broker-a brokerId=0 is registered live at {A1} (heard 5000 ms ago)" in resp.remark
    assert f"{EVIL} may take it over once {A1} unregisters" in resp.remark
    assert "brokerTakeoverAllowed=false" in resp.remark
    # nothing of the refused registration is kept: not its address, cluster, topics or liveness
    assert broker_a_addrs(ns) == {0: A1}
    assert "evil" not in ns.routes.cluster_addr_table
    assert ns.route("TopicEvil").code == ResponseCode.TOPIC_NOT_EXIST
    assert EVIL not in ns.routes.broker_live_table
    assert {b.broker_addrs[0] for b in route_of(ns.route("TopicA")).broker_datas} == {A1, B1}
    [record] = [r for r in caplog.records if "refusing" in r.getMessage()]
    assert record.levelname == "WARNING"
    for part in (EVIL, A1, "10.9.9.9:4000", "REGISTER_BROKER of broker-a id 0", "(1 refused so far)"):
        assert part in record.getMessage()
    assert ns.procs.refusals.count == 1


def test_takeover_refusals_are_rate_limited(ns: Namesrv, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", "rmq.namesrv")
    now = [100.0]
    ns.procs.refusals.clock = lambda: now[0]
    for _ in range(5):
        assert ns.register("broker-a", EVIL, "c1", {}, ctx=FakeContext(66)).code == ResponseCode.NO_PERMISSION
    assert len([r for r in caplog.records if "refusing" in r.getMessage()]) == 1
    now[0] += 10
    ns.procs.refusals.tick()  # the name server's scan task ticks it every 10 s
    summary = [r.getMessage() for r in caplog.records if "more" in r.getMessage()]
    assert summary == [
        "refused 4 more broker (un)registrations in the last 10 s: "
        f"REGISTER_BROKER of broker-a id 0 at {EVIL} (held by {A1})"
    ]
    assert ns.procs.refusals.count == 5


def test_same_address_and_other_ids_are_accepted(ns: Namesrv) -> None:
    # re-registering every 30 s, also over a new connection with another remote address (NAT, reconnect)
    for ctx in (FakeContext(11), FakeContext(77, "192.168.1.1:999"), FakeContext(77, "192.168.1.1:999")):
        ns.clock.now += 30_000
        assert ns.register("broker-a", A1, "c1", {"TopicA": (4, 4)}, ctx=ctx).code == 0
    # a slave: same brokerName, another brokerId, another address
    assert ns.register("broker-a", A2, "c1", {"TopicA": (4, 4)}, broker_id=1, ctx=FakeContext(13)).code == 0
    assert broker_a_addrs(ns) == {0: A1, 1: A2}
    # but not another address for the slave's id while the slave lives
    evil = ns.register("broker-a", EVIL, "c1", {}, broker_id=1, ctx=FakeContext(66))
    assert evil.code == ResponseCode.NO_PERMISSION
    assert f"is registered live at {A2}" in (evil.remark or "")


def test_name_freed_when_the_old_connection_closes(ns: Namesrv) -> None:
    assert ns.register("broker-a", EVIL, "c1", {"TopicN": (1, 1)}, ctx=FakeContext(66)).code == 16
    assert ns.routes.on_channel_destroyed(11) == [A1]  # broker-a killed: its connection closes
    resp = ns.register("broker-a", "10.0.0.1:20911", "c1", {"TopicN": (1, 1)}, ctx=FakeContext(21))
    assert resp.code == 0
    assert broker_a_addrs(ns) == {0: "10.0.0.1:20911"}
    assert [b.broker_addrs for b in route_of(ns.route("TopicN")).broker_datas] == [{0: "10.0.0.1:20911"}]


def test_name_freed_when_the_old_one_unregisters(ns: Namesrv) -> None:
    assert unregister(ns, "broker-a", A1, 0, FakeContext(11)).code == 0
    assert ns.register("broker-a", "10.0.0.1:20911", "c1", {"T": (1, 1)}, ctx=FakeContext(21)).code == 0
    assert broker_a_addrs(ns) == {0: "10.0.0.1:20911"}


def test_name_freed_when_the_old_one_expires(ns: Namesrv) -> None:
    ns.clock.now += 120_000  # heard exactly 120 s ago: still live (as the scan judges it)
    assert ns.register("broker-a", EVIL, "c1", {}, ctx=FakeContext(66)).code == ResponseCode.NO_PERMISSION
    ns.clock.now += 1  # expired, before the scan has swept it
    assert ns.register("broker-a", "10.0.0.1:20911", "c1", {"T": (1, 1)}, ctx=FakeContext(21)).code == 0
    assert broker_a_addrs(ns) == {0: "10.0.0.1:20911"}
    ns.routes.scan_not_active()  # sweeping the old address leaves the new registration alone
    assert broker_a_addrs(ns) == {0: "10.0.0.1:20911"}


def test_unregister_of_a_live_registration_needs_its_connection(ns: Namesrv) -> None:
    other = FakeContext(66, "10.9.9.9:4000")
    resp = unregister(ns, "broker-a", A1, 0, other)
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "only that connection may unregister it" in (resp.remark or "")
    # naming another address with broker-a's id does not remove it either
    assert unregister(ns, "broker-a", EVIL, 0, other).code == ResponseCode.NO_PERMISSION
    assert broker_a_addrs(ns) == {0: A1}
    assert A1 in ns.routes.broker_live_table
    assert ns.procs.refusals.count == 2
    # an expired registration may be unregistered by anyone
    ns.clock.now += 120_001
    assert unregister(ns, "broker-a", A1, 0, other).code == 0
    assert "broker-a" not in ns.routes.broker_addr_table


def test_takeover_allowed_replaces_as_apache_does() -> None:
    ns = Namesrv()
    ns.routes.broker_takeover_allowed = True
    ns.register("broker-a", A1, "c1", {"TopicA": (4, 4)}, ctx=FakeContext(11))
    assert ns.register("broker-a", EVIL, "c1", {"TopicA": (4, 4)}, ctx=FakeContext(66)).code == 0
    assert broker_a_addrs(ns) == {0: EVIL}
    assert unregister(ns, "broker-a", EVIL, 0, FakeContext(99)).code == 0
    assert "broker-a" not in ns.routes.broker_addr_table
