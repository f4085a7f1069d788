"""Login with an ACL admin account (``conftest.py``'s ``acl_broker``: ACL on, the dashboard served by the
broker): read-only until a login, refused for a non-admin account or a wrong secret, changes signed with the
logged-in account, logout."""

from __future__ import annotations

from http.cookies import SimpleCookie

from tests.acl.aclenv import ADMIN, APP
from tests.brokerproc import BrokerProcess
from tests.dashboard.world import http_json, http_json_cookie, name


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
