"""``rmqadmin dashboard``: serve the web dashboard (:mod:`rmq.dashboard`) of the cluster behind ``-n`` until
interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

import click

from rmq.admin.base import acl_credentials, cli

__all__: list[str] = []


async def _serve(namesrv_addr: str, host: str, port: int, admin: bool, login: bool) -> None:
    from rmq.dashboard import Dashboard

    config = acl_credentials()
    dashboard = Dashboard(namesrv_addr=namesrv_addr, admin_enabled=admin, client_config=config, login=login)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await dashboard.start(host, port)
    mode = "login for admin actions" if login else "admin" if admin else "read-only"
    click.echo(f"rmqadmin dashboard: {dashboard.url} ({mode}); Ctrl-C stops")
    try:
        await stop.wait()
    finally:
        await dashboard.stop()


@cli.command("dashboard")
@click.option(
    "-n",
    "--namesrvAddr",
    "namesrv_addr",
    envvar="NAMESRV_ADDR",
    required=True,
    help="Name server address list, host:port;host:port (default: $NAMESRV_ADDR).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8080, show_default=True, help="0: any free port."
)
@click.option(
    "--admin", is_flag=True, help="Allow changes: topics, groups, offset resets, dead-letter resends."
)
@click.option(
    "--login",
    is_flag=True,
    help="The brokers have ACL on: changes need a login with an ACL admin account (reads are signed with"
    " $RMQ_ACCESS_KEY/$RMQ_SECRET_KEY or $ROCKETMQ_HOME/conf/tools.yml).",
)
def dashboard(namesrv_addr: str, host: str, port: int, admin: bool, login: bool) -> None:
    """Serve the web dashboard (read-only unless --admin) until interrupted."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_serve(namesrv_addr, host, port, admin, login))
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {host}:{port}: {exc}") from None
