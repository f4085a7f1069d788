"""`python -m rmq.proxy -n NAMESRV [--port 8081]`: the gRPC endpoint for RocketMQ 5.x clients on its own.

It serves MessagingService v2 and reaches the brokers of the cluster (found through the name servers) over
Remoting, like Apache's proxy in "cluster" mode. ``python -m rmq.broker`` serves the same endpoint itself.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import click

import rmq
from rmq.common.logsetup import LEVELS
from rmq.common.logsetup import configure as configure_logging

log = logging.getLogger("rmq.proxy")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(rmq.__version__, "-V", "--version", prog_name="rmq-proxy")
@click.option("-n", "--namesrv", required=True, help="Name servers, host:port;host:port.")
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8081, show_default=True, help="gRPC port (0: any)."
)
@click.option("--tls-cert", type=click.Path(dir_okay=False, exists=True), help="PEM certificate: serve TLS.")
@click.option(
    "--tls-key", type=click.Path(dir_okay=False, exists=True), help="PEM private key of --tls-cert."
)
@click.option(
    "--tls-mode",
    type=click.Choice(["enforcing", "permissive"]),
    default="enforcing",
    show_default=True,
    help="With --tls-cert: TLS clients only, or TLS and plaintext clients on the one port.",
)
@click.option(
    "--tls-test-mode/--no-tls-test-mode",
    default=True,
    show_default=True,
    help="Without --tls-cert: take TLS clients too, with a self-signed certificate made at start "
    "(RocketMQ's tlsTestModeEnable; the 5.x Java client connects over TLS by default).",
)
@click.option(
    "--acl-file", type=click.Path(dir_okay=False, exists=True), help="plain_acl.yml: check 5.x signatures."
)
@click.option(
    "--log-level", type=click.Choice(LEVELS, case_sensitive=False), default="INFO", show_default=True
)
def main(
    namesrv: str,
    host: str,
    port: int,
    tls_cert: str | None,
    tls_key: str | None,
    tls_mode: str,
    tls_test_mode: bool,
    acl_file: str | None,
    log_level: str,
) -> None:
    """Serve RocketMQ 5.x clients (gRPC) in front of rmq or RocketMQ brokers."""
    from rmq.proxy import ProxyConfig, ProxyServer

    if bool(tls_cert) != bool(tls_key):
        raise click.UsageError("--tls-cert and --tls-key go together")
    configure_logging("proxy", log_level, None, 128 * 1024 * 1024, 10, "proxy")
    acl = None
    if acl_file:
        from rmq.acl.validator import AccessValidator

        acl = AccessValidator.from_file(acl_file)
    addrs = [a.strip() for a in namesrv.split(";") if a.strip()]
    config = ProxyConfig(
        addrs,
        host,
        port,
        tls_cert_path=tls_cert or "",
        tls_key_path=tls_key or "",
        tls_mode=tls_mode,
        tls_test_mode=tls_test_mode,
        acl=acl,
    )

    async def run() -> None:
        server = ProxyServer(config)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        bound = await server.start()
        print(f"RMQ-PROXY-READY grpc={bound}", flush=True)
        try:
            await stop.wait()
        finally:
            await server.stop()

    try:
        asyncio.run(run())
    except OSError as e:
        log.error("cannot start: %s", e)
        sys.exit(1)


if __name__ == "__main__":
    main()
