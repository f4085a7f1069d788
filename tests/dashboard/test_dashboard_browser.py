"""Every dashboard page in headless Chromium (Debian's ``chromium``, driven by Playwright) against
``conftest.py``'s world: the pages load with real data, a search finds the sent messages, the lag shown is
what ``rmqadmin consumerProgress`` prints, a reset and a dead-letter resend work from the page; a screenshot
of each page goes to ``target/dashboard-screenshots/`` (listed at the end of the pytest run)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from rmq.client.sync import Admin

from tests.acl.aclenv import ADMIN, APP, SECRETS
from tests.brokerproc import BrokerProcess
from tests.dashboard.world import (
    FIRST,
    JSON_BODY,
    MORE,
    SCREENSHOTS,
    World,
    dlq_message,
    eventually,
    group_flags,
    login,
    name,
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed (scripts/test installs it: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1360, "height": 860})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert errors == [], f"JavaScript errors: {errors}"


def open_page(page: Any, w: World, route: str, loaded: str) -> None:
    open_page_at(page, w.base, route, loaded)


def open_page_at(page: Any, base: str, route: str, loaded: str) -> None:
    # The marker goes first: a route within the page (a hash change) leaves the last page's marker until
    # the new page has loaded, and one group's page after another's would match it at once.
    page.evaluate("() => { const app = document.getElementById('app'); if (app) delete app.dataset.loaded; }")
    page.goto(f"{base}/#/{route}")
    page.wait_for_selector(f'#app[data-loaded="{loaded}"]')


@pytest.fixture
def screenshot(page: Any, saved_screenshots: list[Path]) -> Callable[[str], None]:
    """Saves a full-page screenshot as ``<name>.png`` (conftest.py lists them at the end of the run)."""

    def save(name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        saved_screenshots.append(path)

    return save


def cells(page: Any, testid: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f'[data-testid="{testid}"] tbody tr',
        "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))",
    )


def test_browser_cluster(world: World, page: Any, screenshot: Callable[[str], None]) -> None:
    open_page(page, world, "cluster", "cluster")
    rows = cells(page, "brokers")
    assert [r[:5] for r in rows] == [
        [world.cluster, world.broker_name, "0", "MASTER", world.broker.broker_addr]
    ]
    page.wait_for_selector('[data-testid="rate-chart"] path.put')
    assert page.inner_text("#mode") == "admin"
    screenshot("1-cluster")


def test_browser_topics(world: World, page: Any, screenshot: Callable[[str], None]) -> None:
    open_page(page, world, "topics", "topics")
    names = [r[0] for r in cells(page, "topics")]
    assert world.topic in names and world.dlq_topic in names and "TBW102" not in names
    page.check('input[data-kind="system"]')
    assert "TBW102" in [r[0] for r in cells(page, "topics")]
    screenshot("2-topics")
    page.fill("#topic-filter", world.topic)
    assert [r[0] for r in cells(page, "topics")] == [world.topic]
    page.click(f"text={world.topic}")
    page.wait_for_selector('#app[data-loaded="topic"]')
    assert page.inner_text('[data-testid="total-messages"]') == str(FIRST + MORE)
    assert [r[1:4] for r in cells(page, "topic-queues")] == [[str(i), "0", "3"] for i in range(4)]
    screenshot("3-topic")


def test_browser_group_lag_matches_consumer_progress(
    world: World, page: Any, screenshot: Callable[[str], None]
) -> None:
    # The rmqadmin console command itself (a subprocess: Playwright's loop runs in this thread).
    progress = subprocess.run(
        [sys.executable, "-m", "rmq.admin", "consumerProgress", "-n", world.ns, "-g", world.group, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert progress.returncode == 0, progress.stderr
    expected = [
        [
            o["topic"],
            o["brokerName"],
            str(o["queueId"]),
            str(o["brokerOffset"]),
            str(o["consumerOffset"]),
            str(o["diff"]),
        ]
        for o in json.loads(progress.stdout)["offsets"]
    ]
    open_page(page, world, "groups", "groups")
    row = next(r for r in cells(page, "groups") if r[0] == world.group)
    assert row[1:3] == ["0", str(MORE)]
    screenshot("4-groups")
    open_page(page, world, f"group/{world.group}", "group")
    assert [r[:6] for r in cells(page, "lag")] == expected
    assert page.inner_text('[data-testid="lag-total"]') == str(MORE)
    screenshot("5-group")
    # Reset offset (an admin dashboard), from the page: the reset group (at 0, test_reset_offset) to the end.
    open_page(page, world, f"group/{world.reset_group}", "group")
    page.select_option("#reset-form select[name=topic]", world.topic)
    page.fill("#reset-form input[name=time]", "2100-01-01T00:00:00")
    page.click("#reset-form button[type=submit]")
    page.wait_for_selector("#reset-result .ok")
    assert page.inner_text("#reset-result").strip() == "reset 4 queues"
    with Admin(namesrv_addr=world.ns) as admin:
        rows = admin.consume_stats(world.reset_group, world.topic).rows()
    assert [(o.consumer_offset, o.diff) for o in rows] == [(3, 0)] * 4


def test_browser_producers(world: World, page: Any, screenshot: Callable[[str], None]) -> None:
    def live() -> list[list[str]]:
        open_page(page, world, "producers", "producers")
        return [r for r in cells(page, "producers") if r[1] == world.producer_group]

    (row,) = eventually(live, "the live producer on the page")
    assert (row[0], row[2], row[4]) == (world.broker_name, world.producer_client_id, "PYTHON")
    screenshot("9-producers")


def test_browser_topic_and_group_operations(
    world: World, page: Any, screenshot: Callable[[str], None]
) -> None:
    page.on("dialog", lambda dialog: dialog.accept())  # the delete buttons' confirmation
    topic, group = name("PageOps"), name("cgpage")
    open_page(page, world, "topics", "topics")
    page.fill("#topic-form input[name=topic]", topic)
    page.fill("#topic-form input[name=read]", "2")
    page.fill("#topic-form input[name=write]", "2")
    page.click("#topic-form button[type=submit]")
    page.wait_for_selector('#app[data-loaded="topic"]')  # the new topic's page
    assert [r[1:4] for r in cells(page, "route-queues")] == [["2", "2", "6"]]
    page.select_option("#topic-form select[name=perm]", "4")
    page.check("#topic-form input[name=order]")
    page.click("#topic-form button[type=submit]")
    page.wait_for_selector("#topic-result .ok")
    assert page.inner_text("#topic-result") == f"saved {topic} on 1 broker(s)"
    page.reload()  # the same route: read back from the broker
    page.wait_for_selector('#app[data-loaded="topic"]')
    assert [r[1:4] for r in cells(page, "route-queues")] == [["2", "2", "4"]]
    assert page.is_checked("#topic-form input[name=order]")
    screenshot("10-topic-operations")
    page.click("#topic-delete")
    page.wait_for_selector('#app[data-loaded="topics"]')
    page.check('input[data-kind="normal"]')
    assert topic not in [r[0] for r in cells(page, "topics")]

    open_page(page, world, "groups", "groups")
    page.fill("#group-form input[name=group]", group)
    page.fill("#group-form input[name=retry]", "3")
    page.check("#group-form input[name=orderly]")
    page.click("#group-form button[type=submit]")
    page.wait_for_selector('#app[data-loaded="group"]')
    assert page.input_value("#group-form input[name=retry]") == "3"
    assert page.is_checked("#group-form input[name=orderly]")
    page.uncheck("#group-form input[name=enable]")
    page.click("#group-form button[type=submit]")
    page.wait_for_selector("#group-result .ok")
    with Admin(namesrv_addr=world.ns) as admin:
        config = admin.subscription_group_configs(world.broker.broker_addr)[group]
    assert group_flags(config) == (
        3,
        False,
        True,
    )
    screenshot("11-group-operations")
    page.click("#group-delete")
    page.wait_for_selector('#app[data-loaded="groups"]')
    assert group not in [r[0] for r in cells(page, "groups")]


def test_browser_search_finds_sent_messages(
    world: World, page: Any, screenshot: Callable[[str], None]
) -> None:
    open_page(page, world, f"messages?topic={world.topic}", "messages")
    page.click("button[type=submit]")  # the last hour
    page.wait_for_selector('[data-testid="result-count"]')
    ids = [r[0] for r in cells(page, "results")]
    assert sorted(ids) == sorted(r.msg_id for r in world.results)
    assert page.is_hidden("input[name=key]") and page.is_visible("input[name=begin]")
    page.select_option("select[name=by]", "key")
    assert page.is_visible("input[name=key]") and page.is_hidden("input[name=begin]")
    page.fill("input[name=key]", "k5")
    page.click("button[type=submit]")
    page.wait_for_function(
        "n => document.querySelector('[data-testid=result-count]')?.innerText.startsWith(n)", arg="1 message"
    )
    assert [r[0] for r in cells(page, "results")] == [world.results[5].msg_id]
    screenshot("6-messages")
    page.select_option("select[name=by]", "id")
    page.fill("input[name=id]", world.results[0].msg_id)  # the client id, looked up in the topic
    page.click("button[type=submit]")
    page.wait_for_selector('#app[data-loaded="message"]')
    assert json.loads(page.inner_text('[data-testid="body"]')) == json.loads(JSON_BODY)
    assert "k0 all" in page.inner_text('[data-testid="message-detail"]')
    props = dict((r[0], r[1]) for r in cells(page, "properties"))
    assert props["TAGS"] == "tag0"
    screenshot("7-message")
    page.click("button[data-mode=hex]")
    assert page.inner_text('[data-testid="body"]').startswith("00000000  7b 22 6f 72")


def test_browser_message_trace(world: World, page: Any, screenshot: Callable[[str], None]) -> None:
    first = world.results[0]
    open_page(page, world, f"message/{world.topic}/{first.offset_msg_id}", "message")
    page.wait_for_selector('[data-testid="trace"]')
    rows = cells(page, "trace")
    assert [(r[0], r[1], r[4], r[5]) for r in rows] == [
        ("Pub (sent)", "pg_traced", "3 ms", "success"),
        ("SubBefore (delivered)", world.group, "", "retry 0"),
        ("SubAfter (consumed)", world.group, "12 ms", "failed"),
    ]
    screenshot("12-message-trace")
    open_page(page, world, f"message/{world.topic}/{world.results[1].offset_msg_id}", "message")
    page.wait_for_selector('[data-testid="no-trace"]')


def test_browser_resend_dead_letter(world: World, page: Any, screenshot: Callable[[str], None]) -> None:
    dead = dlq_message(world)
    open_page(page, world, f"message/{quote(world.dlq_topic, safe='')}/{dead['offsetMsgId']}", "message")
    page.click('[data-testid="resend"]')
    result = page.wait_for_selector('[data-testid="resend-result"]')
    assert result.inner_text().startswith(f"sent to {world.dead_topic} as ")
    screenshot("8-dead-letter")


def test_browser_login(acl_broker: BrokerProcess, page: Any, screenshot: Callable[[str], None]) -> None:
    """ACL on: read-only (no forms) until a login with an admin account; a non-admin one is refused."""
    base = f"http://127.0.0.1:{acl_broker.ready['dashboard']}"
    page.goto(f"{base}/#/topics")
    page.wait_for_selector('#app[data-loaded="topics"]')
    assert page.inner_text("#mode") == "read-only" and page.is_hidden("#topic-form")
    page.click('[data-testid="login-link"]')
    page.wait_for_selector('#app[data-loaded="login"]')
    page.fill("input[name=accessKey]", APP[0])
    page.fill("input[name=secretKey]", APP[1])
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#login-result .error")
    assert "app is not an ACL admin account" in page.inner_text("#login-result")
    screenshot("13-login")
    page.fill("input[name=accessKey]", ADMIN[0])
    page.fill("input[name=secretKey]", ADMIN[1])
    page.click("#login-form button[type=submit]")
    page.wait_for_selector('#app[data-loaded="cluster"]')
    assert (page.inner_text("#mode"), page.inner_text('[data-testid="user"]')) == ("admin", ADMIN[0])
    open_page_at(page, base, "topics", "topics")
    assert page.is_visible("#topic-form")
    screenshot("14-logged-in")
    page.click("#logout")
    page.wait_for_selector('[data-testid="login-link"]')
    assert page.inner_text("#mode") == "read-only"


def test_browser_ops(world: World, page: Any, screenshot: Callable[[str], None]) -> None:
    """Wipe and add a broker's write permission; a name server list with a dead address is refused."""
    page.on("dialog", lambda dialog: dialog.accept())
    open_page(page, world, "ops", "ops")
    assert page.inner_text('[data-testid="namesrv-list"]') == world.ns
    row = f'[data-testid="write-perms"] tr:has-text("{world.broker_name}")'
    assert "writable" in page.inner_text(row)
    try:
        page.click(f'button[data-wipe="{world.broker_name}"]')
        page.wait_for_selector(f'{row}:has-text("read only")')
        assert "wiped write perm of" in page.inner_text('[data-testid="perm-result"]')
        screenshot("15-ops")
    finally:
        with Admin(namesrv_addr=world.ns) as admin:
            admin.add_write_perm_of_broker(world.ns, world.broker_name)
    page.fill("#namesrv-form input[name=addrs]", f"{world.ns};127.0.0.1:1")
    page.click("#namesrv-form button[type=submit]")
    page.wait_for_selector("#namesrv-result .error")
    assert "name server 127.0.0.1:1 does not answer" in page.inner_text("#namesrv-result")
    page.fill("#namesrv-form input[name=addrs]", world.ns)
    page.click("#namesrv-form button[type=submit]")
    page.wait_for_selector("#namesrv-result .ok")


def test_browser_acl(
    world: World, acl_broker: BrokerProcess, page: Any, screenshot: Callable[[str], None]
) -> None:
    """ACL off: the page says so. ACL on: the accounts (secret keys masked); logged in, an account made and
    deleted from the page."""
    open_page(page, world, "acl", "acl")
    assert "ACL is off" in page.inner_text('[data-testid="acl-off-all"]')
    page.on("dialog", lambda dialog: dialog.accept())
    base = f"http://127.0.0.1:{acl_broker.ready['dashboard']}"
    open_page_at(page, base, "acl", "acl")
    assert APP[0] in page.inner_text('[data-testid="acl-accounts"]') and page.is_hidden("#acl-form")
    assert not any(s in page.content() for s in SECRETS)
    cookie = login(base).split("=", 1)[1]
    page.context.add_cookies([{"name": "rmq_dashboard_session", "value": cookie, "url": base}])
    page.reload()
    page.wait_for_selector("#acl-form")
    ak = name("web")
    page.fill("#acl-form input[name=accessKey]", ak)
    page.fill("#acl-form input[name=secretKey]", "web-secret-0005")
    page.fill("#acl-form input[name=topicPerms]", "Orders=PUB, Payments=SUB")
    page.select_option("#acl-form select[name=topicDefault]", "DENY")
    page.click("#acl-form button[type=submit]")
    row = f'[data-testid="acl-accounts"] tr:has-text("{ak}")'
    page.wait_for_selector(row)
    assert "Orders=PUB, Payments=SUB" in page.inner_text(row) and "DENY" in page.inner_text(row)
    assert "web-secret-0005" not in page.content()
    screenshot("16-acl")
    page.click(f'button[data-delete="{ak}"]')
    page.wait_for_selector(row, state="detached")
