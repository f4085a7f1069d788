"""The name server's own config (GET_NAMESRV_CONFIG 319 / UPDATE_NAMESRV_CONFIG 318, ``rmq.namesrv.config``):
what it lists, what an update may change, and what each refusal answers; no sockets."""

from __future__ import annotations

import pytest
from rmq.common.codes import NAMESPACE_ORDER_TOPIC_CONFIG, RequestCode, ResponseCode
from rmq.namesrv.config import NamesrvConfig, NamesrvConfigError, parse_properties
from rmq.namesrv.kv_config import KVConfigManager
from rmq.namesrv.processors import NamesrvProcessors
from rmq.namesrv.route_table import RouteInfoManager

from tests.unit.test_namesrv_routes import Namesrv, route_of


def config_of(ns: Namesrv) -> dict[str, str]:
    r = ns.call(RequestCode.GET_NAMESRV_CONFIG)
    assert r.code == ResponseCode.SUCCESS
    return parse_properties(bytes(r.body).decode())


def update(ns: Namesrv, text: str) -> tuple[int, str | None]:
    r = ns.call(RequestCode.UPDATE_NAMESRV_CONFIG, body=text.encode())
    return r.code, r.remark


def test_listed_properties() -> None:
    ns = Namesrv()
    assert config_of(ns) == {
        "listenPort": "0",
        "orderMessageEnable": "true",
        "scanNotActiveBrokerInterval": "10000",
        "serverChannelMaxIdleTimeSeconds": "120",
    }
    config = NamesrvConfig(
        listen_port=9876, kv_config_path="/x/kvConfig.json", server_channel_max_idle_time_seconds=None
    )
    assert config.properties() == {
        "kvConfigPath": "/x/kvConfig.json",
        "listenPort": "9876",
        "orderMessageEnable": "true",
        "scanNotActiveBrokerInterval": "10000",
    }
    assert config.text().splitlines()[0] == "kvConfigPath=/x/kvConfig.json"


def test_order_message_enable_gates_the_route_order_conf() -> None:
    ns = Namesrv()
    ns.register("broker-a", "10.0.0.1:10911", "DefaultCluster", {"TopicA": (4, 4)})
    put = {"namespace": NAMESPACE_ORDER_TOPIC_CONFIG, "key": "TopicA", "value": "broker-a:4"}
    assert ns.call(RequestCode.PUT_KV_CONFIG, put).code == ResponseCode.SUCCESS
    assert route_of(ns.route("TopicA")).order_topic_conf == "broker-a:4"
    assert update(ns, "orderMessageEnable=false\n") == (ResponseCode.SUCCESS, None)
    assert config_of(ns)["orderMessageEnable"] == "false"
    assert route_of(ns.route("TopicA")).order_topic_conf is None
    assert update(ns, "orderMessageEnable = TRUE\n") == (ResponseCode.SUCCESS, None)
    assert route_of(ns.route("TopicA")).order_topic_conf == "broker-a:4"


@pytest.mark.parametrize(
    ("text", "code", "remark"),
    [
        ("kvConfigPath=/tmp/x\n", ResponseCode.NO_PERMISSION, "Can not update config path"),
        (
            "configStorePath=/tmp/x\norderMessageEnable=false\n",
            ResponseCode.NO_PERMISSION,
            "Can not update config path",
        ),
        ("noSuchKey=1\n", ResponseCode.SYSTEM_ERROR, "unknown name server properties: noSuchKey"),
        ("clusterTest=true\n", ResponseCode.SYSTEM_ERROR, "not implemented by rmq: clusterTest"),
        (
            "listenPort=1\nserverChannelMaxIdleTimeSeconds=5\n",
            ResponseCode.SYSTEM_ERROR,
            "these properties cannot be changed at run time: listenPort, serverChannelMaxIdleTimeSeconds",
        ),
        (
            "zzz=1\nproductEnvName=x\n",
            ResponseCode.SYSTEM_ERROR,
            "unknown name server properties: zzz; not implemented by rmq: productEnvName",
        ),
        (
            "orderMessageEnable=yes\n",
            ResponseCode.SYSTEM_ERROR,
            "orderMessageEnable: 'yes' is not a boolean (true or false)",
        ),
    ],
)
def test_refused_updates_change_nothing(text: str, code: int, remark: str) -> None:
    ns = Namesrv()
    before = config_of(ns)
    assert update(ns, text) == (code, remark)
    assert config_of(ns) == before


def test_bodiless_and_empty_updates_succeed() -> None:
    ns = Namesrv()
    r = ns.call(RequestCode.UPDATE_NAMESRV_CONFIG)
    assert r.code == ResponseCode.SUCCESS
    assert update(ns, "# nothing\n\n") == (ResponseCode.SUCCESS, None)
    r = ns.call(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"\xff\xfe=1")
    assert r.code == ResponseCode.SYSTEM_ERROR and "not UTF-8" in r.remark


def test_config_object_alone() -> None:
    config = NamesrvConfig()
    assert config.update({"orderMessageEnable": "false"}) == {"orderMessageEnable": ("true", "false")}
    assert config.update({"orderMessageEnable": "false"}) == {}
    with pytest.raises(NamesrvConfigError) as info:
        config.update({"kvConfigPath": "/x"})
    assert info.value.path
    processors = NamesrvProcessors(RouteInfoManager(), KVConfigManager(None), config)
    assert processors.config is config
    assert parse_properties("a=1\nb: 2\n! c\nd\n") == {"a": "1", "b": "2", "d": ""}
