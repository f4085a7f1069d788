"""Shared pieces of the ACL tests: a rules file; a real broker and a real name server, both with ACL on."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rmq.acl import AccessValidator, RequestSigner
from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.common.codes import RequestCode, ResponseCode
from rmq.namesrv.server import NameServer
from rmq.remoting.client import RemotingClient
from rmq.remoting.command import RemotingCommand, create_request

ADMIN = ("rmqadmin", "admin-secret-0001")
APP = ("app", "app-secret-0002")
OTHER = ("other", "other-secret-0003")
SECRETS = (ADMIN[1], APP[1], OTHER[1])
INNER = f'{{"accessKey": "{ADMIN[0]}", "secretKey": "{ADMIN[1]}"}}'


TOPIC, GROUP = "AclTopic", "AclGroup"
DENIED_TOPIC, DENIED_GROUP = "DeniedTopic", "DeniedGroup"

RULES = f"""\
globalWhiteRemoteAddresses:
  - 10.10.103.*

accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true

  - accessKey: {APP[0]}
    secretKey: {APP[1]}
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - {TOPIC}=PUB|SUB
      - {DENIED_TOPIC}=DENY
      - PubOnly=PUB
      - SubOnly=SUB
    groupPerms:
      - {GROUP}=SUB
      - {DENIED_GROUP}=DENY

  - accessKey: {OTHER[0]}
    secretKey: {OTHER[1]}
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


def write_rules(path: Path, text: str = RULES) -> Path:
    """Write ``text`` atomically (a temp file renamed over ``path``)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def signed(request: RemotingCommand, creds: tuple[str, str]) -> RemotingCommand:
    RequestSigner(*creds)(request)
    return request


def send_request(topic: str, body: bytes = b"body", qid: int = 0, group: str = "PG") -> RemotingCommand:
    f = {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(qid), "f": "0", "g": "0", "h": "0"}
    f.update({"i": "", "j": "0", "k": "false", "m": "false"})
    return create_request(RequestCode.SEND_MESSAGE_V2, f, body)


def topic_request(topic: str, queues: int = 4) -> RemotingCommand:
    f = {"topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues), "perm": "6"}
    f.update({"topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
    return create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, f)


@dataclass
class AclCluster:
    ctl: BrokerController
    ns: NameServer
    client: RemotingClient  # unsigned: each test signs what it sends
    acl_file: Path

    @property
    def addr(self) -> str:
        return self.ctl.config.broker_addr

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ns.port}"

    @property
    def acl(self) -> AccessValidator:
        assert self.ctl.acl is not None
        return self.ctl.acl

    async def call(self, request: RemotingCommand, addr: str | None = None) -> RemotingCommand:
        return await self.client.invoke(addr or self.addr, request, 5000)

    def written(self) -> int:
        """Bytes in the commit log (grows with every message stored, as soon as it is stored)."""
        store = self.ctl.store
        assert store is not None
        return store.commitlog_max_offset()


async def start_cluster(
    tmp_path: Path, network_thread: bool = True, extra: dict[str, str] | None = None
) -> AclCluster:
    acl_file = write_rules(tmp_path / "plain_acl.yml")
    ns = NameServer(acl=AccessValidator.from_file(acl_file))
    await ns.start("127.0.0.1", 0)
    cfg = BrokerConfig()
    props = {"storePathRootDir": str(tmp_path / "store"), "listenPort": "0", "brokerIP1": "127.0.0.1"}
    props.update({"namesrvAddr": f"127.0.0.1:{ns.port}", "aclEnable": "true", "aclFilePath": str(acl_file)})
    props["innerClientAuthenticationCredentials"] = INNER
    props.update(extra or {})
    cfg.update(props)
    cfg.network_thread = network_thread
    ctl = BrokerController(cfg)
    await ctl.start("127.0.0.1")
    client = RemotingClient()
    cluster = AclCluster(ctl, ns, client, acl_file)
    for t in (TOPIC, DENIED_TOPIC, "PubOnly"):
        r = await cluster.call(signed(topic_request(t), ADMIN))
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    return cluster


async def stop_cluster(c: AclCluster) -> None:
    await c.client.close()
    await c.ctl.shutdown()
    await c.ns.stop()
