"""Name server commands: getNamesrvConfig and updateNamesrvConfig (every name server given with ``-n``)."""

from __future__ import annotations

import click

from rmq.admin.base import Out, admin_command
from rmq.client.admin_ext import Admin

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
