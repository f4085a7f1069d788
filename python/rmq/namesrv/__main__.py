"""``python -m rmq.namesrv``: run a standalone name server until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click

import rmq
from rmq.acl import AccessValidator, AclConfigError
from rmq.common.logsetup import LEVELS
from rmq.common.logsetup import configure as configure_logging
from rmq.namesrv.kv_config import default_kv_config_path
from rmq.namesrv.server import DEFAULT_PORT, NameServer
from rmq.remoting.loop import loop_name, run
from rmq.remoting.tls import TLS_MODES, TlsConfigError, TlsServerSettings, client_auth_modes

log = logging.getLogger("rmq.namesrv")


async def serve(
    host: str,
    port: int,
    kv_config: Path,
    metrics_port: int | None = None,
    metrics_host: str | None = None,
    acl: AccessValidator | None = None,
    tls: TlsServerSettings | None = None,
    broker_takeover_allowed: bool = False,
) -> None:
    ns = NameServer(
        kv_config_path=kv_config, acl=acl, tls=tls, broker_takeover_allowed=broker_takeover_allowed
    )
    await ns.start(host, port)
    if metrics_port is not None:
        ns.serve_metrics(metrics_host or host, metrics_port)
    log.info(
        "The Name Server boot success (%s). listening on %s:%d, kv config %s",
        loop_name(),
        host,
        ns.port,
        kv_config,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await ns.stop()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--port", "-p", default=DEFAULT_PORT, show_default=True, help="Port to listen on (0: any free port)."
)
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to bind.")
@click.option(
    "--kv-config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="KV config file [default: ~/namesrv/kvConfig.json].",
)
@click.option(
    "--log-level", type=click.Choice(LEVELS, case_sensitive=False), default="INFO", show_default=True
)
@click.option(
    "--log-dir",
    default=None,
    help="Directory of namesrv.log [default: ~/logs/rmqlogs] (also written to stderr).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve Prometheus metrics on this port (0: any free port, logged) [default: not served; "
    "the broker's port is 5557].",
)
@click.option("--metrics-host", default=None, help="Address of the metrics port [default: --host].")
@click.option(
    "--acl-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Turn ACL on with this plain_acl.yml: requests must be signed, writes need an admin account.",
)
@click.option(
    "--tls-mode",
    type=click.Choice(TLS_MODES),
    default="disabled",
    show_default=True,
    help="RocketMQ's tls.server.mode: permissive serves TLS and plaintext clients, enforcing TLS only.",
)
@click.option("--tls-cert", default="", help="PEM certificate (chain) of this server (tls.server.certPath).")
@click.option("--tls-key", default="", help="PEM private key of --tls-cert (tls.server.keyPath).")
@click.option(
    "--tls-trust-cert",
    default="",
    help="PEM CAs client certificates must chain to (tls.server.trustCertPath).",
)
@click.option(
    "--tls-need-client-auth",
    type=click.Choice(client_auth_modes()),
    default="none",
    show_default=True,
    help="Ask clients for a certificate (tls.server.need.client.auth).",
)
@click.option(
    "--acl-require-tls",
    is_flag=True,
    default=False,
    help="With --acl-file: serve TLS connections only (--tls-mode enforcing, implied), so ACL-signed "
    "requests cannot be read or replayed off the wire; needs --tls-cert and --tls-key.",
)
@click.option(
    "--broker-takeover-allowed",
    is_flag=True,
    default=False,
    help="Let a broker register a brokerName/brokerId held live by another address, replacing it (Apache's "
    "behaviour) [default: refused until the old one unregisters, its connection closes or it expires].",
)
@click.version_option(rmq.__version__, "-V", "--version", prog_name="rmq-namesrv")
def main(
    port: int,
    host: str,
    kv_config: Path | None,
    log_level: str,
    log_dir: str | None,
    metrics_port: int | None,
    metrics_host: str | None,
    acl_file: Path | None,
    tls_mode: str,
    tls_cert: str,
    tls_key: str,
    tls_trust_cert: str,
    tls_need_client_auth: str,
    acl_require_tls: bool,
    broker_takeover_allowed: bool,
) -> None:
    """Run a RocketMQ 4.x compatible name server."""
    if acl_require_tls:
        if acl_file is None:
            raise click.UsageError(
                "--acl-require-tls needs --acl-file: it keeps ACL-signed requests off plaintext connections"
            )
        if not (tls_cert and tls_key):
            raise click.UsageError("--acl-require-tls needs TLS material: --tls-cert and --tls-key")
        if tls_mode == "permissive":
            raise click.UsageError("--acl-require-tls serves TLS only: --tls-mode permissive contradicts it")
    tls = TlsServerSettings(
        mode="enforcing" if acl_require_tls else tls_mode,
        cert_path=tls_cert,
        key_path=tls_key,
        trust_cert_path=tls_trust_cert,
        need_client_auth=tls_need_client_auth,
    )
    try:
        if tls.enabled:
            tls.context()
    except TlsConfigError as e:
        raise click.UsageError(str(e)) from None
    acl = None
    if acl_file is not None:
        try:
            acl = AccessValidator.from_file(acl_file)
        except AclConfigError as e:
            raise click.UsageError(f"--acl-file: {e}") from None
    path = configure_logging("namesrv", log_level, log_dir)
    log.info("rmq %s name server starting; log file %s", rmq.__version__, path or "(none: stderr only)")
    if acl is not None:
        log.info("ACL on: rules from %s (%d accounts)", acl_file, len(acl.rules.accounts))
    if acl_require_tls:
        log.info("--acl-require-tls: TLS connections only, plaintext ones are refused")
    if broker_takeover_allowed:
        log.info("--broker-takeover-allowed: a registration may replace a live one at another address")
    run(
        serve(
            host,
            port,
            kv_config or default_kv_config_path(),
            metrics_port,
            metrics_host,
            acl,
            tls,
            broker_takeover_allowed,
        )
    )


if __name__ == "__main__":
    main()
