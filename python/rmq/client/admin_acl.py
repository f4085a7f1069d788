"""The ACL admin requests of :class:`rmq.client.Admin` (Java's ``DefaultMQAdminExt`` ACL methods): a broker's
accounts, global white lists and rules-file versions. They work against rmq and Apache RocketMQ 4.9.x
brokers with ACL on; the admin must be signed with an admin account (``ClientConfig.access_key`` /
``secret_key``; rmq refuses every other account, RocketMQ does not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rmq.common import fastjson
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingCommand
from rmq.remoting.headers import bool_text

__all__ = ["AclAdminMixin", "AclConfig", "AclVersionInfo", "PlainAccessConfig"]


@dataclass
class PlainAccessConfig:
    """One account (RocketMQ's ``PlainAccessConfig``). ``None`` fields are not sent: an update keeps the
    broker's value for them (``admin`` is always sent, as the Java admin sends it)."""

    access_key: str
    secret_key: str | None = field(default=None, repr=False)
    admin: bool = False
    white_remote_address: str | None = None
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> PlainAccessConfig:
        def strs(value: Any) -> list[str] | None:
            return [str(v) for v in value] if isinstance(value, list) else None

        return cls(
            access_key=str(obj.get("accessKey") or ""),
            secret_key=obj.get("secretKey"),
            admin=bool(obj.get("admin")),
            white_remote_address=obj.get("whiteRemoteAddress"),
            default_topic_perm=obj.get("defaultTopicPerm"),
            default_group_perm=obj.get("defaultGroupPerm"),
            topic_perms=strs(obj.get("topicPerms")),
            group_perms=strs(obj.get("groupPerms")),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON fields (RocketMQ's names), the absent ones left out."""
        out: dict[str, Any] = {"accessKey": self.access_key, "admin": self.admin}
        for name, value in (
            ("secretKey", self.secret_key),
            ("whiteRemoteAddress", self.white_remote_address),
            ("defaultTopicPerm", self.default_topic_perm),
            ("defaultGroupPerm", self.default_group_perm),
            ("topicPerms", self.topic_perms),
            ("groupPerms", self.group_perms),
        ):
            if value is not None:
                out[name] = value
        return out


@dataclass
class AclConfig:
    """GET_BROKER_CLUSTER_ACL_CONFIG's answer: every rules file's global white list and accounts."""

    global_white_addrs: list[str]
    plain_access_configs: list[PlainAccessConfig]


@dataclass
class AclVersionInfo:
    """GET_BROKER_CLUSTER_ACL_INFO's answer (RocketMQ's ``ClusterAclVersionInfo``): each rules file's
    ``(counter, timestamp ms)`` by path, and the main file's."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    version: tuple[int, int]
    all_versions: dict[str, tuple[int, int]]


def _version(obj: Any) -> tuple[int, int]:
    if not isinstance(obj, Mapping):
        return (0, 0)
    return (int(obj.get("counter") or 0), int(obj.get("timestamp") or 0))


class _Calls(Protocol):
    async def _call(
        self,
        addr: str | None,
        code: int,
        fields: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        language: int | None = None,
    ) -> RemotingCommand: ...


class AclAdminMixin:
    """Mixed into :class:`rmq.client.Admin`: each method sends one request to the broker at ``addr`` and
    raises the broker's refusal as :class:`~rmq.client.errors.MQBrokerError`."""

    async def create_and_update_plain_access_config(
        self: _Calls, addr: str, config: PlainAccessConfig
    ) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG (50)."""
        fields = {"accessKey": config.access_key, "admin": bool_text(config.admin)}
        for name, value in (
            ("secretKey", config.secret_key),
            ("whiteRemoteAddress", config.white_remote_address),
            ("defaultTopicPerm", config.default_topic_perm),
            ("defaultGroupPerm", config.default_group_perm),
            ("topicPerms", ",".join(config.topic_perms) if config.topic_perms is not None else None),
            ("groupPerms", ",".join(config.group_perms) if config.group_perms is not None else None),
        ):
            if value is not None:
                fields[name] = value
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields)

    async def delete_plain_access_config(self: _Calls, addr: str, access_key: str) -> None:
        """DELETE_ACL_CONFIG (51)."""
        await self._call(addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})

    async def update_global_white_addr_config(
        self: _Calls, addr: str, addresses: Sequence[str], acl_file_full_path: str | None = None
    ) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): replace the global white list of ``acl_file_full_path``
        (default: the broker's main rules file)."""
        fields = {"globalWhiteAddrs": ",".join(addresses)}
        if acl_file_full_path:
            fields["aclFileFullPath"] = acl_file_full_path
        await self._call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields)

    async def examine_broker_cluster_acl_version_info(self: _Calls, addr: str) -> AclVersionInfo:
        """GET_BROKER_CLUSTER_ACL_INFO (52)."""
        h = (await self._call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)).ext_fields
        all_versions = fastjson.loads(h["allAclFileVersion"]) if h.get("allAclFileVersion") else {}
        return AclVersionInfo(
            cluster_name=h.get("clusterName", ""),
            broker_name=h.get("brokerName", ""),
            broker_addr=h.get("brokerAddr", ""),
            version=_version(fastjson.loads(h["version"]) if h.get("version") else None),
            all_versions={str(k): _version(v) for k, v in (all_versions or {}).items()},
        )

    async def examine_broker_cluster_acl_config(self: _Calls, addr: str) -> AclConfig:
        """GET_BROKER_CLUSTER_ACL_CONFIG (54; Apache RocketMQ 4.9.7 and earlier, and rmq, which masks the
        secret keys)."""
        response = await self._call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
        body = fastjson.loads(response.body) if response.body else {}
        return AclConfig(
            global_white_addrs=[str(a) for a in body.get("globalWhiteAddrs") or []],
            plain_access_configs=[
                PlainAccessConfig.from_json(a)
                for a in body.get("plainAccessConfigs") or []
                if isinstance(a, dict)
            ],
        )
