"""`python -m rmq.broker`: a working single-node cluster on defaults.

With no arguments: an embedded name server on 9876 and the broker on 10911, store under
`~/store`, ASYNC_FLUSH, topic auto-creation on, and the gRPC endpoint for RocketMQ 5.x clients on 8081
(``grpcServerPort``; -1: none). `-c broker.conf` and repeated `-p KEY=VALUE` set
RocketMQ properties; `-n host:port;host:port` uses external name servers (no embedded one).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from typing import Any

import click

import rmq
from rmq.broker.config import BrokerConfig, ConfigError, parse_properties_lines
from rmq.broker.controller import BrokerController
from rmq.common.logsetup import LEVELS
from rmq.common.logsetup import configure as configure_logging
from rmq.remoting.loop import install_best_loop, loop_name

log = logging.getLogger("rmq.broker")


def build_config(conf: str | None, namesrv: str | None, props: tuple[str, ...]) -> BrokerConfig:
    """The configuration from ``conf``, then ``-p`` overrides, then ``-n``; every unknown name and bad
    value in them is reported together, each with its file and line (or its option). A name in ``conf``
    that no Java 4.9 broker reads either is ignored with a warning, unless it looks like a typo."""
    cfg = BrokerConfig()
    bad = []
    if conf:
        try:
            with open(conf, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(f"cannot read {conf}: {e.strerror}") from None
        lines = [(f"{conf}:{line}", key, value) for line, key, value in parse_properties_lines(text)]
        try:
            cfg.load(lines, ignore_unknown=True)  # as a Java broker reads its broker.conf
        except ConfigError as e:
            bad.append(str(e))
    entries: list[tuple[str, str, str]] = []
    for p in props:
        key, sep, value = p.partition("=")
        if not sep or not key.strip():
            bad.append(f"-p {p!r}: expected KEY=VALUE")
        else:
            entries.append((f"-p {key.strip()}", key, value))
    if namesrv:
        entries.append(("-n", "namesrvAddr", namesrv))
    try:
        cfg.load(entries)
    except ConfigError as e:
        bad.append(str(e))
    if bad:
        raise ConfigError("\n".join(bad))
    cfg.validate()
    return cfg


async def serve(cfg: BrokerConfig, namesrv_port: int | None, namesrv_metrics_port: int | None = None) -> None:
    from rmq.namesrv.server import NameServer

    ns: NameServer | None = None
    embedded = not cfg.namesrv_list()
    broker = BrokerController(cfg)
    if embedded and broker.acl is not None:
        creds = cfg.inner_credentials()
        account = broker.acl.rules.accounts.get(creds[0]) if creds else None
        if account is None or not account.admin:
            raise ConfigError(
                "aclEnable=true with the embedded name server: set innerClientAuthenticationCredentials to "
                f"an admin account of {cfg.acl_path} (the broker registers with the name server as it)"
            )
    if embedded:
        # With ACL on, the embedded name server checks the broker's rules (the broker reloads them).
        ns = NameServer(
            acl=broker.acl,
            acl_reload=False,
            tls=cfg.tls_server(),
            broker_takeover_allowed=cfg.broker_takeover_allowed,
        )
        await ns.start(cfg.bind_address, 9876 if namesrv_port is None else namesrv_port)
        cfg.namesrv_addr = f"127.0.0.1:{ns.port}"
        log.info("embedded name server listening on %s:%d", cfg.bind_address, ns.port)
        if namesrv_metrics_port is not None:
            ns.serve_metrics(cfg.bind_address, namesrv_metrics_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    proxy = None
    try:
        await broker.start()
        if cfg.grpc_server_port >= 0:
            proxy = start_grpc(cfg, broker)
        metrics = f" grpc={proxy.port}" if proxy is not None else ""
        metrics += f" metrics={broker.metrics_port}" if broker.metrics_port else ""
        if ns is not None and ns.metrics_port:
            metrics += f" namesrv_metrics={ns.metrics_port}"
        if broker.dashboard is not None:
            metrics += f" dashboard={broker.dashboard.port}"
        print(f"RMQ-READY namesrv={cfg.namesrv_list()[0]} broker={cfg.broker_addr}{metrics}", flush=True)
        log.info("ready (event loop: %s); SIGINT or SIGTERM stops", loop_name())
        await stop.wait()
        log.info("shutting down")
    finally:
        if proxy is not None:
            await asyncio.get_running_loop().run_in_executor(None, proxy.stop)
        await broker.shutdown()
        if ns is not None:
            await ns.stop()
        log.info("stopped cleanly")


def start_grpc(cfg: BrokerConfig, broker: BrokerController) -> Any:
    """The gRPC endpoint (rmq.proxy) in this process: it reaches this broker (and the cluster's others)
    through the name servers over Remoting, on its own thread and event loop."""
    try:
        from rmq.acl.signing import RequestSigner
        from rmq.proxy import ProxyConfig, ProxyThread
    except ImportError as e:
        raise ConfigError(
            f"grpcServerPort={cfg.grpc_server_port}: cannot serve gRPC ({e}); -1 turns it off"
        ) from None
    from rmq.remoting.tls import TlsClientSettings

    creds = cfg.inner_credentials()
    # The proxy reaches this broker like any client: over TLS when the broker port enforces it.
    remoting_tls = cfg.tls_client()
    if remoting_tls is None and cfg.tls_server_mode == "enforcing":
        remoting_tls = TlsClientSettings(enable=True)
    config = ProxyConfig(
        cfg.namesrv_list(),
        cfg.bind_address,
        cfg.grpc_server_port,
        acl=broker.acl,
        rpc_hook=RequestSigner(*creds) if creds else None,
        remoting_tls=remoting_tls,
    )
    tls = cfg.tls_server()
    if tls.mode in ("enforcing", "permissive"):
        # The broker port's certificate; permissive: TLS and plaintext clients on the gRPC port too.
        config.tls_mode = tls.mode
        config.tls_cert_path = tls.cert_path
        config.tls_key_path = tls.key_path
        config.tls_trust_cert_path = tls.trust_cert_path
        config.tls_require_client_auth = tls.need_client_auth == "require"
    config.tls_test_mode = cfg.tls_test_mode_enable
    config.fast_send = cfg.grpc_fast_send_enable
    proxy = ProxyThread(config)
    proxy.start()
    if broker.services is not None:
        broker.services.grpc_endpoint = proxy.server
    return proxy


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(rmq.__version__, "-V", "--version", prog_name="rmq-broker")
@click.option("-c", "--config", "conf", type=click.Path(dir_okay=False), help="A RocketMQ broker.conf file.")
@click.option("-n", "--namesrv", help="External name servers, host:port;host:port (no embedded one).")
@click.option(
    "-p", "--property", "props", multiple=True, metavar="KEY=VALUE", help="A broker or store property."
)
@click.option("--namesrv-port", type=int, default=None, help="Port of the embedded name server (9876).")
@click.option(
    "--namesrv-metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Serve the embedded name server's Prometheus metrics on this port (0: any free port) [default: not "
    "served]; the broker's own are the metrics* properties.",
)
@click.option(
    "--log-level",
    type=click.Choice(LEVELS, case_sensitive=False),
    default="INFO",
    show_default=True,
    help="Also see the logDir, logFileMaxSize and logFileCount properties.",
)
def main(
    conf: str | None,
    namesrv: str | None,
    props: tuple[str, ...],
    namesrv_port: int | None,
    namesrv_metrics_port: int | None,
    log_level: str,
) -> None:
    """Run an rmq broker (RocketMQ 4.x compatible)."""
    try:
        cfg = build_config(conf, namesrv, props)
    except ConfigError as e:
        raise click.UsageError(str(e)) from None
    external = "-n" if namesrv else f"namesrvAddr={cfg.namesrv_addr} ({conf or '-p'})"
    for option, value in (("--namesrv-port", namesrv_port), ("--namesrv-metrics-port", namesrv_metrics_port)):
        if value is not None and cfg.namesrv_list():
            raise click.UsageError(
                f"{option} is for the embedded name server, but {external} gives external ones (no embedded "
                "name server is started)"
            )
    label = f"{cfg.broker_name}_{cfg.broker_id}"
    path = configure_logging(
        "broker", log_level, cfg.log_dir or None, cfg.log_file_max_size, cfg.log_file_count, label
    )
    log.info("rmq %s broker starting; log file %s", rmq.__version__, path or "(none: stderr only)")
    if cfg.not_implemented:
        log.warning(
            "%d properties accepted without effect (rmq does not implement them): %s",
            len(cfg.not_implemented),
            ", ".join(f"{k} ({why})" for k, why in sorted(cfg.not_implemented.items())),
        )
    install_best_loop()
    try:
        asyncio.run(serve(cfg, namesrv_port, namesrv_metrics_port))
    except (OSError, ConfigError) as e:
        log.error("cannot start: %s", e)
        sys.exit(1)
    except Exception as e:  # a store or config error at start: say what, not a traceback
        from rmq.store import StoreError

        if isinstance(e, StoreError):
            log.error("cannot open the store: %s", e)
            sys.exit(1)
        raise


if __name__ == "__main__":
    main()
