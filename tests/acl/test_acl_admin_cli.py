"""rmqadmin's ACL commands (updateAclConfig, deleteAclConfig / deleteAccessConfig, clusterAclConfigVersion,
updateGlobalWhiteAddr, getAclConfig / getAccessConfigSubCommand) against two real brokers with ACL on
(``python -m rmq.broker``: broker-a's master with the embedded name server, and its slave registered with
it), each with its own ``ROCKETMQ_HOME``: ``conf/plain_acl.yml`` and ``conf/acl/team.yml``.

``-c`` sends a change to every broker of the cluster, the slave too (each broker has its own files, as
mqadmin 4.9.8 does), and reads versions and configs from the masters; ``-b`` reaches one broker. The
credentials come from ``$RMQ_ACCESS_KEY`` / ``$RMQ_SECRET_KEY`` or ``$ROCKETMQ_HOME/conf/tools.yml``; a
non-admin account, or none, is refused (exit 4).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from rmq.acl.validator import SECRET_MASK
from rmq.admin import Exit, cli

from tests.acl.aclenv import ADMIN, APP, INNER, RULES, SECRETS
from tests.brokerproc import BrokerProcess, start_broker

CLUSTER = "AclCluster"
NEW = ("cliuser1", "cli-secret-0006")
TEAM = ("teamuser1", "team-secret-0005")
TEAM_RULES = f"accounts:\n  - accessKey: {TEAM[0]}\n    secretKey: {TEAM[1]}\n    defaultTopicPerm: SUB\n"


@dataclass
class Brokers:
    a: BrokerProcess
    b: BrokerProcess
    homes: dict[str, Path]

    @property
    def namesrv(self) -> str:
        return self.a.namesrv_addr

    def conf(self, name: str) -> Path:
        return self.homes[name] / "conf"

    def accounts(self, name: str, file: str = "plain_acl.yml") -> dict[str, dict]:
        data = yaml.safe_load((self.conf(name) / file).read_text())
        return {str(a["accessKey"]): a for a in data.get("accounts") or []}


def home_for(base: Path) -> Path:
    conf = base / "rocketmq" / "conf"
    (conf / "acl").mkdir(parents=True)
    (conf / "plain_acl.yml").write_text(RULES)
    (conf / "acl" / "team.yml").write_text(TEAM_RULES)
    return base / "rocketmq"


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    base = tmp_path_factory.mktemp("acl-cli")
    homes = {n: home_for(base / n) for n in ("a", "b")}
    common = (
        "aclEnable=true",
        f"innerClientAuthenticationCredentials={INNER}",
        f"brokerClusterName={CLUSTER}",
    )
    a = start_broker(base / "a" / "store", *common, f"rocketmqHome={homes['a']}", "brokerName=broker-a")
    try:
        b = start_broker(
            base / "b" / "store",
            *common,
            f"rocketmqHome={homes['b']}",
            "brokerName=broker-a",
            "brokerRole=SLAVE",
            "brokerId=1",
            namesrv=a.namesrv_addr,
        )
    except BaseException:
        a.stop()
        raise
    try:
        yield Brokers(a, b, homes)
    finally:
        assert b.stop() == 0, "".join(b.log[-40:])
        assert a.stop() == 0, "".join(a.log[-40:])


@dataclass
class Run:
    code: int
    out: str
    err: str


def rmqadmin(
    brokers: Brokers, *args: str, creds: tuple[str, str] | None = ADMIN, env: dict | None = None
) -> Run:
    environ = {"RMQ_ACCESS_KEY": None, "RMQ_SECRET_KEY": None, "ROCKETMQ_HOME": None, **(env or {})}
    if creds is not None:
        environ.update(RMQ_ACCESS_KEY=creds[0], RMQ_SECRET_KEY=creds[1])
    r = CliRunner().invoke(cli, [*args, "-n", brokers.namesrv], env=environ, catch_exceptions=False)
    return Run(r.exit_code, r.stdout, r.stderr)


def test_update_and_delete_across_the_cluster(brokers: Brokers) -> None:
    args = ("-a", NEW[0], "-s", NEW[1], "-t", "T1=PUB,T2=SUB", "-i", "DENY")
    r = rmqadmin(brokers, "updateAclConfig", "-c", CLUSTER, *args)
    assert r.code == 0, r.err
    for addr in (brokers.a.broker_addr, brokers.b.broker_addr):
        assert f"create or update plain access config to {addr} success." in r.out
    for n in ("a", "b"):
        assert brokers.accounts(n)[NEW[0]] == {
            "accessKey": NEW[0],
            "secretKey": NEW[1],
            "admin": False,
            "defaultTopicPerm": "DENY",
            "topicPerms": ["T1=PUB", "T2=SUB"],
        }
        assert set(brokers.accounts(n)) == {ADMIN[0], APP[0], "other", NEW[0]}
    # -b: that broker only.
    r = rmqadmin(
        brokers, "updateAclConfig", "-b", brokers.b.broker_addr, "-a", NEW[0], "-s", NEW[1], "-m", "true"
    )
    assert r.code == 0, r.err
    assert brokers.accounts("b")[NEW[0]]["admin"] is True and brokers.accounts("a")[NEW[0]]["admin"] is False

    r = rmqadmin(brokers, "clusterAclConfigVersion", "-c", CLUSTER, "--json")
    assert r.code == 0, r.err
    got = sorted((v["brokerAddr"], Path(v["aclFilePath"]).name, v["counter"]) for v in json.loads(r.out))
    a = brokers.a.broker_addr
    assert got == [(a, "plain_acl.yml", 1), (a, "team.yml", 0)]  # -c reads the masters
    r = rmqadmin(brokers, "clusterAclConfigVersion", "-b", brokers.b.broker_addr, "--json")
    got = sorted((v["brokerName"], Path(v["aclFilePath"]).name, v["counter"]) for v in json.loads(r.out))
    assert got == [("broker-a", "plain_acl.yml", 2), ("broker-a", "team.yml", 0)]  # the slave's own files
    table = rmqadmin(brokers, "clusterAclConfigVersion", "-b", brokers.a.broker_addr).out
    assert table.splitlines()[0].split("  ")[0] == "#Cluster Name"
    assert any(CLUSTER in line and "plain_acl.yml" in line and " 1 " in line for line in table.splitlines())

    r = rmqadmin(brokers, "deleteAccessConfig", "-c", CLUSTER, "-a", NEW[0])
    assert r.code == 0, r.err
    assert "account's accesskey is:cliuser1" in r.out
    assert all(NEW[0] not in brokers.accounts(n) for n in ("a", "b"))
    r = rmqadmin(brokers, "deleteAclConfig", "-b", brokers.a.broker_addr, "-a", NEW[0])
    assert r.code == Exit.BROKER_ERROR and "210" in r.err and "no account with accessKey=cliuser1" in r.err


def test_global_white_list_and_get_acl_config(brokers: Brokers) -> None:
    team = brokers.conf("a") / "acl" / "team.yml"
    addr = brokers.a.broker_addr
    r = rmqadmin(brokers, "updateGlobalWhiteAddr", "-b", addr, "-g", "10.9.9.*", "-p", str(team))
    assert r.code == 0 and f"update global white remote addresses to {addr} success." in r.out, r.err
    assert yaml.safe_load(team.read_text())["globalWhiteRemoteAddresses"] == ["10.9.9.*"]
    r = rmqadmin(brokers, "getAccessConfigSubCommand", "-b", addr, "--json")
    assert r.code == 0, r.err
    (doc,) = json.loads(r.out)
    assert doc["globalWhiteAddrs"] == ["10.9.9.*", "10.10.103.*"]  # the directory's files first
    by_ak = {a["accessKey"]: a for a in doc["plainAccessConfigs"]}
    assert {ADMIN[0], APP[0], "other", TEAM[0]} <= set(by_ak)
    assert by_ak[TEAM[0]] == {
        "accessKey": TEAM[0],
        "admin": False,
        "secretKey": SECRET_MASK,
        "defaultTopicPerm": "SUB",
    }
    text = rmqadmin(brokers, "getAclConfig", "-c", CLUSTER).out
    assert (
        "globalWhiteRemoteAddresses: [10.9.9.*, 10.10.103.*]" in text
        and f"  accessKey         : {TEAM[0]}" in text
    )
    assert not any(s in text or s in r.out for s in (*SECRETS, TEAM[1]))
    r = rmqadmin(brokers, "updateGlobalWhiteAddr", "-b", addr, "-g", "10.9.9.300")
    assert r.code == Exit.BROKER_ERROR and "211" in r.err and "not an IP address" in r.err


def test_credentials_from_tools_yml(brokers: Brokers, tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text(f"accessKey: {ADMIN[0]}\nsecretKey: {ADMIN[1]}\n")
    r = rmqadmin(
        brokers, "clusterAclConfigVersion", "-c", CLUSTER, creds=None, env={"ROCKETMQ_HOME": str(tmp_path)}
    )
    assert r.code == 0 and "plain_acl.yml" in r.out, r.err


@pytest.mark.parametrize("creds", [APP, None], ids=["non-admin", "unsigned"])
def test_refused_without_an_admin_account(brokers: Brokers, creds: tuple[str, str] | None) -> None:
    before = (brokers.conf("a") / "plain_acl.yml").read_bytes()
    addr = brokers.a.broker_addr
    for args in (
        ("updateAclConfig", "-b", addr, "-a", "sneaky01", "-s", "sneaky-secret", "-m", "true"),
        ("deleteAclConfig", "-b", addr, "-a", ADMIN[0]),
        ("updateGlobalWhiteAddr", "-b", addr, "-g", "*"),
        ("clusterAclConfigVersion", "-b", addr),
        ("getAclConfig", "-b", addr),
    ):
        r = rmqadmin(brokers, *args, creds=creds)
        assert r.code == Exit.BROKER_ERROR, (args, r.code, r.out, r.err)
        assert "NO_PERMISSION" in r.err or "16" in r.err, r.err
    assert (brokers.conf("a") / "plain_acl.yml").read_bytes() == before


def test_usage_errors(brokers: Brokers) -> None:
    r = rmqadmin(brokers, "updateAclConfig", "-a", NEW[0], "-s", NEW[1])
    assert r.code == Exit.USAGE and "exactly one of -b brokerAddr and -c clusterName" in r.err
    r = rmqadmin(brokers, "updateAclConfig", "-c", "NoSuchCluster", "-a", NEW[0], "-s", NEW[1])
    assert r.code == Exit.NOT_FOUND, r.err
    r = rmqadmin(brokers, "updateAclConfig", "-b", brokers.a.broker_addr, "-a", NEW[0], "-s", "short")
    assert r.code == Exit.BROKER_ERROR and "secretKey of accessKey=cliuser1 is 5 characters" in r.err
    assert "short" not in r.err.replace("secretKey of", "")
