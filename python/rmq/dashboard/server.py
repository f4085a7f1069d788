"""The dashboard: a small HTTP server with a JSON API over :class:`rmq.client.Admin` and the static page
(``static/``: plain HTML, CSS and JS shipped in the package, nothing from a CDN).

::

    dashboard = Dashboard(namesrv_addr="127.0.0.1:9876", admin_enabled=False)
    await dashboard.start("127.0.0.1", 8080)      # dashboard.url
    ...
    await dashboard.stop()

JSON API (``GET`` unless marked; errors are ``{"error", "status"}``: 400 bad input, 403 an admin action
on a read-only dashboard, 404 not found, 502 refused by a broker, 504 unreachable or timed out)::

    /api/overview                        namesrv, admin flag
    /api/cluster                         brokers: role, address, version, TPS, disk ratio
    /api/rates                           the sampled put/get TPS history (the live charts)
    /api/topics                          every topic and its kind (normal, retry, dlq, system)
    /api/topic?topic=T                   route, queues with min/max offsets, TPS, consuming groups
    /api/groups                          every subscription group: members online, lag, TPS
    /api/group?group=G                   members, subscriptions, lag per queue (consumerProgress)
    /api/producers                       every master's producer connections by group (client id, address,
                                         language, version, last heartbeat)
    /api/messages?topic=T&begin=&end=    messages stored in [begin, end) epoch ms (limit=, default 200)
    /api/messages?topic=T&key=K          messages with the key
    /api/message?id=I[&topic=T]          one message by offset id (or, with topic, client id), body base64
    /api/trace?id=I[&traceTopic=T]      the message's trace records (Pub, SubBefore, SubAfter) in T
                                         (default RMQ_SYS_TRACE_TOPIC), I its client (unique) id
    POST /api/topic/update               {topic, readQueueNums=8, writeQueueNums=8, perm=6, order=false,
                                          cluster=every}: create or update a topic (admin only)
    POST /api/topic/delete               {topic, cluster=those serving it}: delete a topic (admin only)
    POST /api/group/update               {group, retryMaxTimes, consumeEnable, consumeMessageOrderly,
                                          consumeBroadcastEnable, cluster=every}: create or update a
                                          subscription group, unnamed fields kept (admin only)
    POST /api/group/delete               {group, removeOffset=false, cluster=every}: delete it (admin only)
    POST /api/group/reset                {group, topic, timestamp}: reset offsets by time (admin only)
    POST /api/dlq/resend                 {topic, msgId}: resend a dead-letter message (admin only)

    /api/acl                             per master: ACL on or off, global white list, accounts (secret keys
                                         masked), each rules file's version
    POST /api/acl/account/update         {accessKey, secretKey, admin=false, whiteRemoteAddress,
                                          defaultTopicPerm, defaultGroupPerm, topicPerms, groupPerms}: create
                                          or update an account on every broker (admin only)
    POST /api/acl/account/delete         {accessKey}: delete it from every broker (admin only)
    POST /api/acl/white                  {globalWhiteAddrs: [..]}: replace every broker's global white list
    /api/ops                             the name servers used and each broker's write permission in their
                                         routes
    POST /api/ops/namesrv                {namesrvAddr: "a:9876;b:9876"}: use these name servers from now on,
                                         each checked first (400 naming one that does not answer; admin only)
    POST /api/ops/wipeWritePerm          {brokerName}: take its write permission (every name server; admin)
    POST /api/ops/addWritePerm           {brokerName}: give it back (admin only)

    POST /api/login                      {accessKey, secretKey}: with ``login`` (ACL on), a session cookie for
                                         an ACL admin account (403 for any other)
    POST /api/logout                     ends the session

Read-only unless ``admin_enabled``: the POSTs answer 403 then, and the page hides their forms and buttons.
With ``login`` (the brokers have ACL on) the admin actions need a session instead: a login whose account
every master accepts for GET_BROKER_CLUSTER_ACL_INFO (an admin-only request), the actions then signed with
that account (so the brokers judge and audit them as its); ``client_config`` signs the reads.
Each admin action is logged at INFO, asked (with the caller's address and the request body) and done (with
the brokers changed), or at WARNING when refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from http.cookies import CookieError, SimpleCookie
from importlib import resources
from typing import Any, Final

from rmq.admin.base import Exit, exit_code_of
from rmq.client.admin_ext import Admin
from rmq.client.config import ClientConfig
from rmq.client.errors import MQBrokerError, MQClientError
from rmq.common.codes import TRACE_TOPIC
from rmq.dashboard import views
from rmq.dashboard.http import HttpServer, Request, Response
from rmq.remoting import RemotingError

__all__ = ["Dashboard"]

log = logging.getLogger(__name__)

RATE_SAMPLES: Final = 180
DEFAULT_SEARCH_LIMIT: Final = 200
SESSION_COOKIE: Final = "rmq_dashboard_session"
SESSION_S: Final = 8 * 3600
"""How long a login lasts."""
_CONTENT_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
_STATUS_OF_EXIT: Final = {Exit.NOT_FOUND: 404, Exit.BROKER_ERROR: 502, Exit.CONNECTION: 504}


def _static_files() -> dict[str, tuple[bytes, str]]:
    """Every file of ``static/`` by its URL path, read once (so no request names a path on disk)."""
    out: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files("rmq.dashboard").joinpath("static").iterdir():
        suffix = entry.name[entry.name.rfind(".") :]
        if entry.is_file() and suffix in _CONTENT_TYPES:
            out[f"/static/{entry.name}"] = (entry.read_bytes(), _CONTENT_TYPES[suffix])
    out["/"] = out["/static/index.html"]
    return out


def _int_arg(req: Request, name: str, default: int | None = None) -> int:
    text = req.query.get(name, "")
    if not text:
        if default is None:
            raise ValueError(f"missing parameter {name!r}")
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"parameter {name}={text!r} is not a whole number") from None


def _arg(req: Request, name: str) -> str:
    value = req.query.get(name, "").strip()
    if not value:
        raise ValueError(f"missing parameter {name!r}")
    return value


class Dashboard:
    """The dashboard of the cluster behind ``namesrv_addr``; ``sample_interval_s`` paces the rate charts."""

    def __init__(
        self,
        *,
        namesrv_addr: str,
        admin_enabled: bool = False,
        sample_interval_s: float = 2.0,
        timeout_ms: int = 5000,
        client_config: ClientConfig | None = None,
        login: bool = False,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.admin_enabled = admin_enabled
        self.login = login
        self.sample_interval_s = sample_interval_s
        self.timeout_ms = timeout_ms
        self.admin = Admin(namesrv_addr=namesrv_addr, timeout_ms=timeout_ms, client_config=client_config)
        self._closing: set[asyncio.Task[None]] = set()
        self._sessions: dict[str, tuple[str, Admin, float]] = {}
        """Session token -> (access key, the admin signed with its account, expiry on the monotonic clock)."""
        self.rates: deque[tuple[int, float, float]] = deque(maxlen=RATE_SAMPLES)
        self._http = HttpServer(self.handle)
        self._static = _static_files()
        self._sampler: asyncio.Task[None] | None = None
        self._host = ""
        self._routes: dict[tuple[str, str], Callable[[Request], Awaitable[Any]]] = {
            ("GET", "/api/overview"): self._overview,
            ("GET", "/api/cluster"): lambda r: views.cluster(self.admin),
            ("GET", "/api/rates"): self._rates,
            ("GET", "/api/topics"): lambda r: views.topics(self.admin),
            ("GET", "/api/topic"): lambda r: views.topic_detail(self.admin, _arg(r, "topic")),
            ("GET", "/api/groups"): lambda r: views.groups(self.admin),
            ("GET", "/api/group"): lambda r: views.group_detail(self.admin, _arg(r, "group")),
            ("GET", "/api/producers"): lambda r: views.producers(self.admin),
            ("GET", "/api/messages"): self._messages,
            ("GET", "/api/message"): lambda r: views.message(self.admin, r.query.get("topic"), _arg(r, "id")),
            ("GET", "/api/trace"): lambda r: views.message_trace(
                self.admin, _arg(r, "id"), r.query.get("traceTopic", "").strip() or TRACE_TOPIC
            ),
            ("POST", "/api/topic/update"): self._operation(
                "creating or updating a topic", views.update_topic
            ),
            ("POST", "/api/topic/delete"): self._operation("deleting a topic", views.delete_topic),
            ("POST", "/api/group/update"): self._operation(
                "creating or updating a subscription group", views.update_group
            ),
            ("POST", "/api/group/delete"): self._operation(
                "deleting a subscription group", views.delete_group
            ),
            ("GET", "/api/acl"): lambda r: views.acl(self.admin),
            ("POST", "/api/acl/account/update"): self._operation(
                "creating or updating an ACL account", views.update_acl_account
            ),
            ("POST", "/api/acl/account/delete"): self._operation(
                "deleting an ACL account", views.delete_acl_account
            ),
            ("POST", "/api/acl/white"): self._operation(
                "replacing the ACL global white list", views.update_global_white_addrs
            ),
            ("GET", "/api/ops"): lambda r: views.write_perms(self.admin),
            ("POST", "/api/ops/namesrv"): self._operation("switching the name servers", self._switch_namesrv),
            ("POST", "/api/ops/wipeWritePerm"): self._operation(
                "wiping a broker's write permission", views.wipe_write_perm
            ),
            ("POST", "/api/ops/addWritePerm"): self._operation(
                "adding a broker's write permission", views.add_write_perm
            ),
            ("POST", "/api/login"): self._login,
            ("POST", "/api/logout"): self._logout,
            ("POST", "/api/group/reset"): self._reset,
            ("POST", "/api/dlq/resend"): self._resend,
        }

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        host = self._host if self._host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return f"http://{host}:{self.port}/"

    async def start(self, host: str, port: int) -> None:
        await self.admin.start()
        await self._http.start(host, port)
        self._host = host
        self._sampler = asyncio.create_task(self._sample_rates(), name="dashboard-rates")
        log.info(
            "dashboard serving on %s (name server %s, %s)",
            self.url,
            self.namesrv_addr,
            "admin actions enabled" if self.admin_enabled else "read-only",
        )

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
            self._sampler = None
        await self._http.stop()
        for _, admin, _ in self._sessions.values():
            await admin.shutdown()
        self._sessions.clear()
        await self.admin.shutdown()

    async def _sample_rates(self) -> None:
        while True:
            try:
                put, get = await views.runtime_rates(self.admin)
                self.rates.append((int(time.time() * 1000), put, get))
            except (MQClientError, RemotingError, OSError, TimeoutError) as exc:
                log.debug("dashboard: rate sample failed: %s", exc)
            await asyncio.sleep(self.sample_interval_s)

    # --- requests ---------------------------------------------------------------------------------------

    async def handle(self, req: Request) -> Response:
        static = self._static.get(req.path) if req.method == "GET" else None
        if static is not None:
            return Response(200, static[0], static[1])
        route = self._routes.get((req.method, req.path))
        if route is None:
            known = any(path == req.path for _, path in self._routes)
            return Response.error(405 if known else 404, f"no {req.method} {req.path}")
        try:
            answer = await route(req)
            return answer if isinstance(answer, Response) else Response.json(answer)
        except PermissionError as exc:
            return Response.error(403, str(exc))
        except ValueError as exc:
            return Response.error(400, str(exc))
        except (MQClientError, RemotingError, OSError, TimeoutError) as exc:
            status = _STATUS_OF_EXIT.get(exit_code_of(exc), 500)
            if status == 500:
                log.warning("dashboard: %s %s failed: %s", req.method, req.path, exc)
            return Response.error(status, f"{type(exc).__name__}: {exc}")

    async def _overview(self, req: Request) -> dict[str, Any]:
        session = self._session(req)
        out: dict[str, Any] = {"namesrvAddr": self.namesrv_addr, "admin": self.admin_enabled}
        if self.login:
            out.update(admin=session is not None, login=True, user=session[0] if session else None)
        return out

    # --- login (ACL on) ---------------------------------------------------------------------------------

    def _session(self, req: Request) -> tuple[str, Admin, float] | None:
        cookies = SimpleCookie()
        with contextlib.suppress(CookieError):
            cookies.load(req.headers.get("cookie", ""))
        token = cookies[SESSION_COOKIE].value if SESSION_COOKIE in cookies else ""
        session = self._sessions.get(token)
        if session is not None and session[2] < time.monotonic():
            del self._sessions[token]
            log.info("dashboard: the session of %s expired", session[0])
            task = asyncio.get_running_loop().create_task(session[1].shutdown())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
            return None
        return session

    async def _login(self, req: Request) -> Response:
        if not self.login:
            raise ValueError("this dashboard has no login (the brokers have ACL off): see --admin")
        body = req.json()
        access_key, secret_key = body.get("accessKey"), body.get("secretKey")
        if (
            not isinstance(access_key, str)
            or not access_key
            or not isinstance(secret_key, str)
            or not secret_key
        ):
            raise ValueError("want {accessKey: str, secretKey: str}")
        config = ClientConfig(access_key=access_key, secret_key=secret_key)
        admin = Admin(namesrv_addr=self.namesrv_addr, timeout_ms=self.timeout_ms, client_config=config)
        await admin.start()
        try:
            for ref in await admin.masters():
                await admin.examine_broker_cluster_acl_version_info(ref.addr)  # admin accounts only
        except MQBrokerError as exc:
            await admin.shutdown()
            log.warning("dashboard: refused the login of %s from %s: %s", access_key, req.peer, exc)
            raise PermissionError(f"{access_key} is not an ACL admin account of the brokers: {exc}") from None
        except BaseException:
            await admin.shutdown()
            raise
        token = secrets.token_urlsafe(32)
        self._sessions[token] = (access_key, admin, time.monotonic() + SESSION_S)
        log.info("dashboard: %s logged in from %s", access_key, req.peer)
        cookie = f"{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={SESSION_S}"
        return Response.json({"user": access_key, "admin": True}).with_header("Set-Cookie", cookie)

    async def _logout(self, req: Request) -> Response:
        session = self._session(req)
        for token, s in list(self._sessions.items()):
            if s is session:
                del self._sessions[token]
                await s[1].shutdown()
                log.info("dashboard: %s logged out from %s", s[0], req.peer)
        cookie = f"{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
        return Response.json({"user": None}).with_header("Set-Cookie", cookie)

    async def _rates(self, req: Request) -> dict[str, Any]:
        return {
            "intervalMs": int(self.sample_interval_s * 1000),
            "samples": [{"t": t, "put": p, "get": g} for t, p, g in self.rates],
        }

    async def _messages(self, req: Request) -> dict[str, Any]:
        topic = _arg(req, "topic")
        limit = max(1, min(_int_arg(req, "limit", DEFAULT_SEARCH_LIMIT), 2000))
        key = req.query.get("key", "").strip()
        if key:
            return await views.search_by_key(self.admin, topic, key, limit)
        now = int(time.time() * 1000)
        begin = _int_arg(req, "begin", now - 3_600_000)
        end = _int_arg(req, "end", now + 1)
        if end <= begin:
            raise ValueError("the end of the time range must be after its beginning")
        return await views.search_by_time(self.admin, topic, begin, end, limit)

    def _check_admin(self, what: str, req: Request) -> Admin:
        """The admin to make the change with: the session's (login) or the dashboard's (``admin_enabled``);
        :class:`PermissionError` (403) otherwise."""
        if self.login:
            session = self._session(req)
            if session is None:
                log.warning("dashboard: refused %s from %s: not logged in", what, req.peer)
                raise PermissionError(f"{what} needs a login with an ACL admin account")
            return session[1]
        if not self.admin_enabled:
            log.warning("dashboard: refused %s: the dashboard is read-only", what)
            raise PermissionError(f"{what} needs an admin dashboard (dashboardAdmin=true / --admin)")
        return self.admin

    def _operation(
        self, what: str, change: Callable[[Admin, dict[str, Any]], Awaitable[dict[str, Any]]]
    ) -> Callable[[Request], Awaitable[dict[str, Any]]]:
        """A route that makes an admin change: refused on a read-only dashboard; logged when asked (who
        asked, with what) and when done (which brokers), or when a broker refuses it."""

        async def run(req: Request) -> dict[str, Any]:
            admin = self._check_admin(what, req)
            body = req.json()
            shown = {k: views.SECRET_MASK if k == "secretKey" else v for k, v in body.items()}
            log.info("dashboard: %s asked by %s%s: %s", what, req.peer, self._who(req), shown)
            try:
                result = await change(admin, body)
            except (MQClientError, RemotingError, OSError, TimeoutError, ValueError) as exc:
                log.warning("dashboard: %s (%s) failed: %s", what, shown, exc)
                raise
            log.info(
                "dashboard: %s done on %s: %s",
                what,
                ", ".join(result.get("brokers") or result.get("namesrvs") or []),
                shown,
            )
            return result

        return run

    async def _switch_namesrv(self, admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
        """Use another name server list (``"a:9876;b:9876"``) from now on, for the reads and every session;
        each must answer GET_NAMESRV_CONFIG first (:class:`ValueError`, 400, naming the one that does not)."""
        text = body.get("namesrvAddr")
        if not isinstance(text, str):
            raise ValueError("want {namesrvAddr: 'host:port;host:port'}")
        addrs = [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]
        if not addrs:
            raise ValueError("namesrvAddr names no name server")
        for addr in addrs:
            host, sep, port = addr.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"name server {addr!r} is not host:port")
            try:
                await admin.namesrv_config([addr])
            except (MQClientError, RemotingError, OSError, TimeoutError) as exc:
                raise ValueError(f"name server {addr} does not answer: {exc}") from None
        old = self.namesrv_addr
        self.namesrv_addr = ";".join(addrs)
        for each in (self.admin, *(s[1] for s in self._sessions.values())):
            each.instance.api.namesrv_addrs = list(addrs)
        log.info("dashboard: name servers switched from %s to %s", old, self.namesrv_addr)
        return {"namesrvAddr": self.namesrv_addr, "previous": old, "namesrvs": addrs}

    def _who(self, req: Request) -> str:
        session = self._session(req) if self.login else None
        return f" ({session[0]})" if session else ""

    async def _reset(self, req: Request) -> dict[str, Any]:
        admin = self._check_admin("resetting offsets", req)
        body = req.json()
        group, topic, ts = body.get("group"), body.get("topic"), body.get("timestamp")
        if not isinstance(group, str) or not isinstance(topic, str) or not isinstance(ts, int):
            raise ValueError("want {group: str, topic: str, timestamp: epoch ms}")
        log.info("dashboard: resetting offsets of %s on %s to %d%s", group, topic, ts, self._who(req))
        return await views.reset_offset(admin, group, topic, ts)

    async def _resend(self, req: Request) -> dict[str, Any]:
        admin = self._check_admin("resending a dead-letter message", req)
        body = req.json()
        topic, msg_id = body.get("topic"), body.get("msgId")
        if not isinstance(topic, str) or not isinstance(msg_id, str):
            raise ValueError("want {topic: '%DLQ%<group>', msgId: str}")
        return await views.resend_dlq(admin, topic, msg_id)
