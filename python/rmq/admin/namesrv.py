"""Name server commands (every name server given with ``-n``): getNamesrvConfig, updateNamesrvConfig,
updateKvConfig, deleteKvConfig, wipeWritePerm, addWritePerm."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import click

from rmq.admin.base import Out, admin_command
from rmq.client.admin_ext import Admin
from rmq.client.errors import MQClientError
from rmq.remoting import RemotingError

__all__: list[str] = []


@admin_command("getNamesrvConfig", "Every name server's config, key =  value.")
async def get_namesrv_config(admin: Admin, out: Out) -> None:
    configs = await admin.namesrv_config()
    for addr, props in configs.items():
        out.line(f"============{addr}============")
        for key, value in sorted(props.items()):
            out.line(f"{key:<50}=  {value}")
    out.data(configs)


@click.option("-k", "--key", required=True, help="Config key.")
@click.option("-v", "--value", required=True, help="Config value.")
@admin_command("updateNamesrvConfig", "Change a config key of every name server (refused keys: exit 4).")
async def update_namesrv_config(admin: Admin, out: Out, key: str, value: str) -> None:
    addrs = admin.instance.api.namesrv_addrs
    await admin.update_namesrv_config({key.strip(): value.strip()})
    out.line(f"update name server config success![{', '.join(addrs)}]")
    out.line(f"{key.strip()} : {value.strip()}")
    out.data({"namesrvAddrs": list(addrs), "key": key.strip(), "value": value.strip()})


@click.option("-s", "--namespace", required=True, help="KV namespace.")
@click.option("-k", "--key", required=True, help="Key.")
@click.option("-v", "--value", required=True, help="Value.")
@admin_command("updateKvConfig", "Create or update a KV config entry on every name server.")
async def update_kv_config(admin: Admin, out: Out, namespace: str, key: str, value: str) -> None:
    addrs = await admin.put_kv_config(namespace.strip(), key.strip(), value.strip())
    out.line("create or update kv config to namespace success.")
    out.data(
        {"namesrvAddrs": addrs, "namespace": namespace.strip(), "key": key.strip(), "value": value.strip()}
    )


@click.option("-s", "--namespace", required=True, help="KV namespace.")
@click.option("-k", "--key", required=True, help="Key.")
@admin_command("deleteKvConfig", "Delete a KV config entry from every name server.")
async def delete_kv_config(admin: Admin, out: Out, namespace: str, key: str) -> None:
    addrs = await admin.delete_kv_config(namespace.strip(), key.strip())
    out.line("delete kv config from namespace success.")
    out.data({"namesrvAddrs": addrs, "namespace": namespace.strip(), "key": key.strip()})


async def _write_perm(
    admin: Admin, out: Out, broker_name: str, verb: str, request: Callable[[str, str], Awaitable[int]]
) -> None:
    """``request`` on every name server: a line each (``OK, <topics changed>`` or ``Failed``), as mqadmin;
    any failure makes the exit code 4 (refused) or 5 (unreachable) after every name server was asked."""
    rows = []
    failed: Exception | None = None
    for addr in admin.instance.api.namesrv_addrs:
        try:
            count = await request(addr, broker_name)
        except (MQClientError, RemotingError, OSError, TimeoutError) as exc:
            failed = exc
            out.line(f"{verb} write perm of broker[{broker_name}] in name server[{addr}] Failed")
            click.echo(f"rmqadmin: {addr}: {type(exc).__name__}: {exc}", err=True)
            rows.append({"namesrvAddr": addr, "error": str(exc)})
            continue
        out.line(f"{verb} write perm of broker[{broker_name}] in name server[{addr}] OK, {count}")
        rows.append({"namesrvAddr": addr, "topicCount": count})
    out.data({"brokerName": broker_name, "namesrvs": rows})
    if failed is not None:
        raise failed


@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
@admin_command("wipeWritePerm", "Take write permission from a broker in every name server's routes.")
async def wipe_write_perm(admin: Admin, out: Out, broker_name: str) -> None:
    await _write_perm(admin, out, broker_name.strip(), "wipe", admin.wipe_write_perm_of_broker)


@click.option("-b", "--brokerName", "broker_name", required=True, help="Broker name.")
@admin_command("addWritePerm", "Give write permission back to a broker in every name server's routes.")
async def add_write_perm(admin: Admin, out: Out, broker_name: str) -> None:
    await _write_perm(admin, out, broker_name.strip(), "add", admin.add_write_perm_of_broker)
