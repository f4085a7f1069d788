"""``rmqadmin dashboard``: serve the web dashboard (:mod:`rmq.dashboard`) of the cluster behind ``-n`` until
interrupted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

import click

from rmq.admin.base import cli

__all__: list[str] = []


async def _serve(namesrv_addr: str, host: str, port: int, admin: bool) -> None:
    from rmq.dashboard import Dashboard

    dashboard = Dashboard(namesrv_addr=namesrv_addr, admin_enabled=admin)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await dashboard.start(host, port)
    click.echo(f"rmqadmin dashboard: {dashboard.url} ({'admin' if admin else 'read-only'}); Ctrl-C stops")
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
@click.option("--admin", is_flag=True, help="Allow resetting offsets and resending dead-letter messages.")
def dashboard(namesrv_addr: str, host: str, port: int, admin: bool) -> None:
    """Serve the web dashboard (read-only unless --admin) until interrupted."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_serve(namesrv_addr, host, port, admin))
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {host}:{port}: {exc}") from None
