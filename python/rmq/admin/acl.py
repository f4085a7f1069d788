"""ACL commands (mqadmin's): updateAclConfig, deleteAclConfig (alias deleteAccessConfig),
clusterAclConfigVersion, updateGlobalWhiteAddr, and 4.9.7's getAclConfig (alias getAccessConfigSubCommand).

Each takes ``-b brokerAddr`` or ``-c clusterName``. As mqadmin 4.9.8 does, ``-c`` sends a change to every
broker of the cluster, masters and slaves (each broker has its own rules files), and reads versions and
configs from every master. The requests must be signed by an admin account: rmqadmin signs with
``$RMQ_ACCESS_KEY`` / ``$RMQ_SECRET_KEY``, else with ``$ROCKETMQ_HOME/conf/tools.yml`` (``accessKey``,
``secretKey``) as mqadmin does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from rmq.admin.base import Out, admin_command, cli, human_ms
from rmq.client.admin_acl import PlainAccessConfig
from rmq.client.admin_ext import Admin, AdminNotFoundError

__all__: list[str] = []

F = TypeVar("F", bound=Callable[..., Any])


def _check_target(broker_addr: str | None, cluster: str | None) -> None:
    if bool(broker_addr) == bool(cluster):
        raise click.UsageError("give exactly one of -b brokerAddr and -c clusterName")


async def _every_broker(admin: Admin, broker_addr: str | None, cluster: str | None) -> list[str]:
    """``-b``: that broker; ``-c``: every broker of the cluster, masters and slaves (mqadmin's
    ``fetchMasterAndSlaveAddrByClusterName``)."""
    _check_target(broker_addr, cluster)
    if broker_addr:
        return [broker_addr.strip()]
    assert cluster is not None
    info = await admin.cluster_info()
    if cluster not in info.cluster_addr_table:
        raise AdminNotFoundError(
            f"cluster {cluster!r} not found (clusters: {sorted(info.cluster_addr_table)})"
        )
    out = []
    for name in sorted(info.cluster_addr_table[cluster]):
        bd = info.broker_addr_table.get(name)
        out += [addr for _bid, addr in sorted((bd.broker_addrs if bd else {}).items())]
    return out


async def _masters(admin: Admin, broker_addr: str | None, cluster: str | None) -> list[str]:
    _check_target(broker_addr, cluster)
    if broker_addr:
        return [broker_addr.strip()]
    return [b.addr for b in await admin.masters(cluster)]


def _target_options(what: str) -> Callable[[F], F]:
    def deco(f: F) -> F:
        f = click.option("-c", "--clusterName", "cluster", help=f"{what} every broker of this cluster.")(f)
        return click.option("-b", "--brokerAddr", "broker_addr", help=f"{what} this broker.")(f)

    return deco


def _perm_list(text: str | None) -> list[str] | None:
    return None if text is None else [p.strip() for p in text.strip().split(",") if p.strip()]


@click.option("-g", "--groupPerms", "group_perms", help="Group permissions, e.g. groupA=DENY,groupB=SUB.")
@click.option("-t", "--topicPerms", "topic_perms", help="Topic permissions, e.g. topicA=DENY,topicB=PUB|SUB.")
@click.option("-u", "--defaultGroupPerm", "default_group_perm", help="Default group permission.")
@click.option("-i", "--defaultTopicPerm", "default_topic_perm", help="Default topic permission.")
@click.option(
    "-w", "--whiteRemoteAddress", "white_remote_address", help="The account's white address pattern."
)
@click.option(
    "-m", "--admin", "is_admin", default="false", show_default=True, help="Admin account: true or false."
)
@click.option(
    "-s", "--secretKey", "secret_key", required=True, help="Its secret key (more than 6 characters)."
)
@click.option("-a", "--accessKey", "access_key", required=True, help="The account's access key.")
@_target_options("Write to")
@admin_command("updateAclConfig", "Create or update an ACL account in the broker's rules files.")
async def update_acl_config(
    admin: Admin,
    out: Out,
    broker_addr: str | None,
    cluster: str | None,
    access_key: str,
    secret_key: str,
    is_admin: str,
    white_remote_address: str | None,
    default_topic_perm: str | None,
    default_group_perm: str | None,
    topic_perms: str | None,
    group_perms: str | None,
) -> None:
    config = PlainAccessConfig(
        access_key=access_key.strip(),
        secret_key=secret_key.strip(),
        admin=is_admin.strip().lower() == "true",  # Java's Boolean.parseBoolean
        white_remote_address=white_remote_address.strip() if white_remote_address is not None else None,
        default_topic_perm=default_topic_perm.strip() if default_topic_perm else None,
        default_group_perm=default_group_perm.strip() if default_group_perm else None,
        topic_perms=_perm_list(topic_perms),
        group_perms=_perm_list(group_perms),
    )
    done = []
    for addr in await _every_broker(admin, broker_addr, cluster):
        await admin.create_and_update_plain_access_config(addr, config)
        out.line(f"create or update plain access config to {addr} success.")
        done.append(addr)
    shown = config.to_json()
    shown.pop("secretKey", None)
    out.data({"brokers": done, "account": shown})


@click.option(
    "-a", "--accessKey", "access_key", required=True, help="The access key of the account to delete."
)
@_target_options("Delete from")
@admin_command("deleteAclConfig", "Delete an ACL account from the broker's rules files.")
async def delete_acl_config(
    admin: Admin, out: Out, broker_addr: str | None, cluster: str | None, access_key: str
) -> None:
    done = []
    for addr in await _every_broker(admin, broker_addr, cluster):
        await admin.delete_plain_access_config(addr, access_key.strip())
        out.line(f"delete plain access config account from {addr} success.")
        done.append(addr)
    out.line(f"account's accesskey is:{access_key.strip()}")
    out.data({"brokers": done, "accessKey": access_key.strip()})


cli.add_command(delete_acl_config, "deleteAccessConfig")


@click.option(
    "-p", "--aclFileFullPath", "acl_file", help="The rules file to change (default: plain_acl.yml)."
)
@click.option(
    "-g",
    "--globalWhiteRemoteAddresses",
    "addresses",
    required=True,
    help="The global white list, e.g. 10.10.103.*,192.168.0.*.",
)
@_target_options("Write to")
@admin_command("updateGlobalWhiteAddr", "Replace the global white list of a broker's rules file.")
async def update_global_white_addr(
    admin: Admin, out: Out, broker_addr: str | None, cluster: str | None, addresses: str, acl_file: str | None
) -> None:
    addrs = [a.strip() for a in addresses.strip().split(",") if a.strip()]
    done = []
    for addr in await _every_broker(admin, broker_addr, cluster):
        await admin.update_global_white_addr_config(addr, addrs, acl_file.strip() if acl_file else None)
        out.line(f"update global white remote addresses to {addr} success.")
        done.append(addr)
    out.data({"brokers": done, "globalWhiteRemoteAddresses": addrs})


_VERSION_FMT = "%-16s  %-22s  %-22s  %-20s  %-22s  %-22s"


@_target_options("Read")
@admin_command("clusterAclConfigVersion", "The version of each ACL rules file of the brokers.")
async def cluster_acl_config_version(
    admin: Admin, out: Out, broker_addr: str | None, cluster: str | None
) -> None:
    rows = []
    for addr in await _masters(admin, broker_addr, cluster):
        info = await admin.examine_broker_cluster_acl_version_info(addr)
        for path, (counter, ts) in info.all_versions.items():
            rows.append(
                {
                    "clusterName": info.cluster_name,
                    "brokerName": info.broker_name,
                    "brokerAddr": info.broker_addr,
                    "aclFilePath": path,
                    "counter": counter,
                    "timestamp": ts,
                }
            )
    header = ("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath", "#AclConfigVersionNum")
    out.table(
        _VERSION_FMT,
        (*header, "#AclLastUpdateTime"),
        [
            (
                r["clusterName"],
                r["brokerName"],
                r["brokerAddr"],
                r["aclFilePath"],
                r["counter"],
                human_ms(r["timestamp"], millis=False),
            )
            for r in rows
        ],
    )
    out.data(rows)


@_target_options("Read")
@admin_command(
    "getAclConfig",
    "The global white lists and accounts of the brokers' rules files (rmq masks the secret keys).",
)
async def get_acl_config(admin: Admin, out: Out, broker_addr: str | None, cluster: str | None) -> None:
    docs = []
    for addr in await _masters(admin, broker_addr, cluster):
        config = await admin.examine_broker_cluster_acl_config(addr)
        accounts = [a.to_json() for a in config.plain_access_configs]
        docs.append(
            {
                "brokerAddr": addr,
                "globalWhiteAddrs": config.global_white_addrs,
                "plainAccessConfigs": accounts,
            }
        )
        out.line()
        out.line(f"{'globalWhiteRemoteAddresses':<20}: [{', '.join(config.global_white_addrs)}]")
        out.line()
        out.line("accounts:")
        for a in config.plain_access_configs:
            for name, value in (
                ("accessKey", a.access_key),
                ("secretKey", a.secret_key),
                ("whiteRemoteAddress", a.white_remote_address),
                ("admin", "true" if a.admin else "false"),
                ("defaultTopicPerm", a.default_topic_perm),
                ("defaultGroupPerm", a.default_group_perm),
                ("topicPerms", None if a.topic_perms is None else f"[{', '.join(a.topic_perms)}]"),
                ("groupPerms", None if a.group_perms is None else f"[{', '.join(a.group_perms)}]"),
            ):
                out.line(f"  {name:<18}: {'' if value is None else value}")
            out.line()
    out.data(docs)


cli.add_command(get_acl_config, "getAccessConfigSubCommand")
