"""Login with an ACL admin account (``conftest.py``'s ``acl_broker``: ACL on, the dashboard served by the
broker): read-only until a login, refused for a non-admin account or a wrong secret, changes signed with the
logged-in account, logout."""

from __future__ import annotations

import json
from http.cookies import SimpleCookie

from tests.acl.aclenv import ADMIN, APP, SECRETS
from tests.brokerproc import BrokerProcess
from tests.dashboard.world import http_json, http_json_cookie, login, name


def test_login_with_an_acl_admin_account(acl_broker: BrokerProcess) -> None:
    base = f"http://127.0.0.1:{acl_broker.ready['dashboard']}"
    status, overview = http_json(base + "/api/overview")
    assert (status, overview["login"], overview["admin"], overview["user"]) == (200, True, False, None)
    status, cluster = http_json(base + "/api/cluster")  # reads: signed with the broker's inner account
    assert status == 200 and cluster["brokers"][0]["version"], cluster
    topic = name("AclOps")
    status, err = http_json(base + "/api/topic/update", {"topic": topic})
    assert status == 403 and "needs a login with an ACL admin account" in err["error"]
    for ak, sk in (APP, (ADMIN[0], "wrong-secret-0000")):
        status, err, set_cookie = http_json_cookie(base + "/api/login", {"accessKey": ak, "secretKey": sk})
        assert (status, set_cookie) == (403, ""), err
        assert f"{ak} is not an ACL admin account of the brokers" in err["error"]
    assert http_json(base + "/api/login", {"accessKey": "x"})[0] == 400
    status, who, set_cookie = http_json_cookie(
        base + "/api/login", {"accessKey": ADMIN[0], "secretKey": ADMIN[1]}
    )
    assert (status, who["user"]) == (200, ADMIN[0])
    morsel = SimpleCookie(set_cookie)["rmq_dashboard_session"]
    assert morsel["httponly"] and morsel["samesite"] == "Strict"
    cookie = f"rmq_dashboard_session={morsel.value}"
    status, overview = http_json(base + "/api/overview", cookie=cookie)
    assert (overview["admin"], overview["user"]) == (True, ADMIN[0])
    status, r = http_json(base + "/api/topic/update", {"topic": topic}, cookie=cookie)
    assert (status, r["brokers"]) == (200, [acl_broker.broker_addr]), r
    assert http_json(base + f"/api/topic?topic={topic}")[0] == 200
    assert (
        http_json(base + "/api/topic/delete", {"topic": topic}, cookie="rmq_dashboard_session=forged")[0]
        == 403
    )
    assert http_json(base + "/api/logout", {}, cookie=cookie)[0] == 200
    assert http_json(base + "/api/overview", cookie=cookie)[1]["admin"] is False
    assert http_json(base + "/api/topic/delete", {"topic": topic}, cookie=cookie)[0] == 403


def test_acl_page(acl_broker: BrokerProcess) -> None:
    """The ACL config as getAclConfig shows it, never a secret key; account and white list changes need a
    login and reach the broker's rules file (its version counts them)."""
    base = f"http://127.0.0.1:{acl_broker.ready['dashboard']}"
    status, data = http_json(base + "/api/acl")
    assert status == 200 and data["aclEnabled"] is True, data
    (row,) = data["brokers"]
    assert row["globalWhiteAddrs"] == ["10.10.103.*"]
    accounts = {a["accessKey"]: a for a in row["accounts"]}
    assert accounts[APP[0]]["topicPerms"][0] == "AclTopic=PUB|SUB" and accounts[ADMIN[0]]["admin"] is True
    assert not any(s in json.dumps(data) for s in SECRETS)
    (version,) = row["versions"]
    assert version["aclFilePath"].endswith("plain_acl.yml")
    account = {"accessKey": name("dash"), "secretKey": "dash-secret-0004", "topicPerms": ["T1=PUB"]}
    assert http_json(base + "/api/acl/account/update", account)[0] == 403
    cookie = login(base)
    status, r = http_json(base + "/api/acl/account/update", {**account, "admin": False}, cookie=cookie)
    assert (status, r["brokers"]) == (200, [acl_broker.broker_addr]) and "secretKey" not in r["account"]
    status, err = http_json(
        base + "/api/acl/account/update", {**account, "secretKey": "short"}, cookie=cookie
    )
    assert status == 400 and "more than 6 characters" in err["error"]
    row = http_json(base + "/api/acl")[1]["brokers"][0]
    (added,) = [a for a in row["accounts"] if a["accessKey"] == account["accessKey"]]
    assert added["topicPerms"] == ["T1=PUB"] and added.get("secretKey") in (None, "******")
    assert row["versions"][0]["counter"] > version["counter"]
    white = ["10.10.103.*", "192.168.0.*"]
    assert http_json(base + "/api/acl/white", {"globalWhiteAddrs": white}, cookie=cookie)[0] == 200
    assert http_json(base + "/api/acl")[1]["brokers"][0]["globalWhiteAddrs"] == white
    assert http_json(base + "/api/acl/white", {"globalWhiteAddrs": white[:1]}, cookie=cookie)[0] == 200
    status, r = http_json(
        base + "/api/acl/account/delete", {"accessKey": account["accessKey"]}, cookie=cookie
    )
    assert status == 200, r
    row = http_json(base + "/api/acl")[1]["brokers"][0]
    assert account["accessKey"] not in {a["accessKey"] for a in row["accounts"]}
    logged = "\n".join(acl_broker.log)
    assert f"creating or updating an ACL account done on {acl_broker.broker_addr}" in logged
    assert "dash-secret-0004" not in logged
