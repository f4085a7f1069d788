"""Apache ``mqadmin`` 4.9.8's ACL commands (updateAclConfig, deleteAclConfig, clusterAclConfigVersion,
updateGlobalWhiteAddr) against rmq and against the Apache 4.9.7 broker, both with ACL on and the same rules
files: ``conf/plain_acl.yml`` and ``conf/acl/team.yml`` under each broker's ``ROCKETMQ_HOME``. Each command
runs against both (concurrently, signed with the admin account of ``conf/tools.yml``, as mqadmin signs),
and must give the same facts: the same output once addresses, paths and times are normalized, the same
accounts and white lists written to the same file, the same per-file version counters, and the same
refusal codes.

The session's peer brokers run without ACL, so this module starts its own pair (once for the module).
What differs on purpose: rmq refuses the five requests to a non-admin account (RocketMQ lets every account
send them; tests/acl/test_acl_admin.py covers it), and GET_BROKER_CLUSTER_ACL_CONFIG (which mqadmin 4.9.8 no
longer has) masks the secret keys; both brokers are compared through rmqadmin's getAclConfig here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.acl.aclenv import ADMIN, INNER
from tests.brokerproc import BrokerProcess, start_broker
from tests.peers.apache import ApachePeer, PeerLibs, peer_libs, start_apache
from tests.peers.mqadmin import Run, mqadmin

BROKERS = ("rmq", "apache")
CLUSTER = "DefaultCluster"
NEW = ("newuser1", "new-secret-0004")
TEAM = ("teamuser1", "team-secret-0005")
PLAIN = f"""\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: appuser1
    secretKey: app-secret-0002
    defaultTopicPerm: DENY
    topicPerms:
      - TopicA=PUB|SUB
"""
TEAM_RULES = f"""\
globalWhiteRemoteAddresses:
  - 10.20.30.*
accounts:
  - accessKey: {TEAM[0]}
    secretKey: {TEAM[1]}
    defaultTopicPerm: SUB
"""


def write_home(home: Path) -> Path:
    """A ``ROCKETMQ_HOME`` with the two rules files; returns it."""
    conf = home / "rocketmq" / "conf"
    (conf / "acl").mkdir(parents=True, exist_ok=True)
    (conf / "plain_acl.yml").write_text(PLAIN)
    (conf / "acl" / "team.yml").write_text(TEAM_RULES)
    return home / "rocketmq"


@dataclass
class AclPeers:
    libs: PeerLibs
    tools: Path  # mqadmin's homes, one per broker
    rmq: BrokerProcess
    apache: ApachePeer
    homes: dict[str, Path]  # each broker's ROCKETMQ_HOME

    def namesrv(self, b: str) -> str:
        return self.rmq.namesrv_addr if b == "rmq" else self.apache.namesrv_addr

    def broker_addr(self, b: str) -> str:
        return self.rmq.broker_addr if b == "rmq" else self.apache.broker_addr

    def conf(self, b: str) -> Path:
        return self.homes[b] / "conf"

    def run(self, *args: str) -> dict[str, Run]:
        """One mqadmin command against each broker; ``{broker}`` and ``{conf}`` in an argument are that
        broker's address and conf directory."""

        def one(b: str) -> Run:
            argv = [
                a.replace("{broker}", self.broker_addr(b)).replace("{conf}", str(self.conf(b))) for a in args
            ]
            return mqadmin(self.libs, self.tools / b, self.namesrv(b), *argv)

        with ThreadPoolExecutor(len(BROKERS)) as pool:
            futures = {b: pool.submit(one, b) for b in BROKERS}
            return {b: f.result() for b, f in futures.items()}

    def norm(self, b: str, text: str) -> str:
        text = text.replace(self.broker_addr(b), "<broker>").replace(str(self.homes[b]), "<home>")
        text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "<time>", text)
        text = re.sub(r"PlainAccessConfig@[0-9a-f]+", "PlainAccessConfig@<hash>", text)
        text = re.sub(r" {2,}", "  ", text)
        return "\n".join(line.rstrip() for line in text.strip().splitlines())

    def same(self, *args: str, sort: bool = False) -> str:
        """Both succeeded with the same normalized output (its lines sorted where a hash map's order
        decides them); that output."""
        runs = self.run(*args)
        out = {b: self.norm(b, r.ok().out) for b, r in runs.items()}
        if sort:
            out = {b: "\n".join(sorted(o.splitlines())) for b, o in out.items()}
        assert out["rmq"] == out["apache"], f"mqadmin {' '.join(args)}"
        return out["rmq"]

    def refused(self, *args: str) -> int:
        """Both failed with the same response code; that code."""
        runs = self.run(*args)
        codes = {}
        for b, r in runs.items():
            m = re.search(r"CODE: (\d+)", r.out)
            assert m, f"{b}: mqadmin {' '.join(args)} did not fail with a code:\n{r.out[-3000:]}"
            codes[b] = int(m.group(1))
        assert codes["rmq"] == codes["apache"], codes
        return codes["rmq"]

    def file(self, b: str, name: str) -> dict[str, Any]:
        return yaml.safe_load((self.conf(b) / name).read_text())

    def same_files(self) -> dict[str, dict[str, Any]]:
        """Both brokers' rules files hold the same (their versions' timestamps aside); by file name."""
        out = {}
        for name in ("plain_acl.yml", "acl/team.yml"):
            data = {b: self.file(b, name) for b in BROKERS}
            for d in data.values():
                for v in d.get("dataVersion") or []:
                    v["timestamp"] = "<ms>"
            assert data["rmq"] == data["apache"], name
            out[name] = data["rmq"]
        return out

    def versions(self) -> dict[str, str]:
        """clusterAclConfigVersion -c: the same lines on both; each file's counter by file name."""
        out = self.same("clusterAclConfigVersion", "-c", CLUSTER, sort=True)
        found = {}
        for line in out.splitlines():
            cols = line.split()
            if len(cols) >= 5 and cols[0] == CLUSTER:
                assert cols[1:3] == ["broker-a", "<broker>"], line
                found[cols[3].replace("<home>/conf/", "")] = cols[4]
        return found


@pytest.fixture(scope="module")
def acl_peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclPeers]:
    libs = peer_libs()
    base = tmp_path_factory.mktemp("acl-peers")
    homes = {b: write_home(base / b) for b in BROKERS}
    tools = base / "mqadmin"
    for b in BROKERS:
        conf = tools / b / "rocketmq" / "conf"
        conf.mkdir(parents=True)
        (conf / "tools.yml").write_text(f"accessKey: {ADMIN[0]}\nsecretKey: {ADMIN[1]}\n")
    with ThreadPoolExecutor(2) as pool:
        apache_f = pool.submit(start_apache, base / "apache", "aclEnable=true")
        rmq_f = pool.submit(
            start_broker,
            base / "rmq" / "store",
            "aclEnable=true",
            f"rocketmqHome={homes['rmq']}",
            f"innerClientAuthenticationCredentials={INNER}",
            "brokerName=broker-a",
            f"brokerClusterName={CLUSTER}",
        )
        rmq = rmq_f.result()
        try:
            apache = apache_f.result()
        except BaseException:
            rmq.stop()
            raise
    try:
        yield AclPeers(libs, tools, rmq, apache, homes)
    finally:
        apache.stop()
        rc = rmq.stop()
        assert rc == 0, "rmq broker exited uncleanly:\n" + "".join(rmq.log[-40:])


def test_acl_commands_give_the_same_facts(acl_peers: AclPeers) -> None:
    p = acl_peers
    assert p.versions() == {"plain_acl.yml": "0", "acl/team.yml": "0"}

    # A new account: written to plain_acl.yml on both, the same way.
    out = p.same(
        "updateAclConfig", "-c", CLUSTER, "-a", NEW[0], "-s", NEW[1], "-t", "TopicA=PUB,TopicB=SUB",
        "-g", "GroupA=SUB", "-i", "DENY", "-u", "SUB", "-w", "192.168.1.*",
    )  # fmt: skip
    assert "create or update plain access config to <broker> success." in out
    files = p.same_files()
    (new,) = [a for a in files["plain_acl.yml"]["accounts"] if a["accessKey"] == NEW[0]]
    assert new == {
        "accessKey": NEW[0],
        "secretKey": NEW[1],
        "whiteRemoteAddress": "192.168.1.*",
        "admin": False,
        "defaultTopicPerm": "DENY",
        "defaultGroupPerm": "SUB",
        "topicPerms": ["TopicA=PUB", "TopicB=SUB"],
        "groupPerms": ["GroupA=SUB"],
    }
    assert p.versions() == {"plain_acl.yml": "1", "acl/team.yml": "0"}

    # An existing account updated: written back where both put it (at the end), the rest kept.
    p.same("updateAclConfig", "-b", "{broker}", "-a", "appuser1", "-s", "app-secret-0002", "-t", "TopicA=SUB")
    files = p.same_files()
    assert [a["accessKey"] for a in files["plain_acl.yml"]["accounts"]] == [ADMIN[0], NEW[0], "appuser1"]
    assert p.versions() == {"plain_acl.yml": "2", "acl/team.yml": "0"}

    # An account of conf/acl/team.yml is updated in that file; what the command leaves out is kept.
    p.same("updateAclConfig", "-b", "{broker}", "-a", TEAM[0], "-s", TEAM[1], "-t", "TopicC=PUB")
    files = p.same_files()
    team = {"accessKey": TEAM[0], "secretKey": TEAM[1], "defaultTopicPerm": "SUB", "admin": False}
    assert files["acl/team.yml"]["accounts"] == [{**team, "topicPerms": ["TopicC=PUB"]}]
    assert p.versions() == {"plain_acl.yml": "2", "acl/team.yml": "1"}

    # Global white lists: the main file by default, another file by -p.
    p.same("updateGlobalWhiteAddr", "-b", "{broker}", "-g", "10.1.1.*,192.168.0.1")
    p.same("updateGlobalWhiteAddr", "-c", CLUSTER, "-g", "10.2.2.*", "-p", "{conf}/acl/team.yml")
    files = p.same_files()
    assert files["plain_acl.yml"]["globalWhiteRemoteAddresses"] == ["10.1.1.*", "192.168.0.1"]
    assert files["acl/team.yml"]["globalWhiteRemoteAddresses"] == ["10.2.2.*"]
    assert p.versions() == {"plain_acl.yml": "3", "acl/team.yml": "2"}

    # Delete.
    out = p.same("deleteAclConfig", "-c", CLUSTER, "-a", NEW[0])
    assert "delete plain access config account from <broker> success." in out
    files = p.same_files()
    assert [a["accessKey"] for a in files["plain_acl.yml"]["accounts"]] == [ADMIN[0], "appuser1"]
    assert p.versions() == {"plain_acl.yml": "4", "acl/team.yml": "2"}


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("updateAclConfig", "-b", "{broker}", "-a", NEW[0], "-s", "abc"), 209),  # secret too short
        (("updateAclConfig", "-b", "{broker}", "-a", "abc", "-s", NEW[1]), 209),  # access key too short
        (("updateAclConfig", "-b", "{broker}", "-a", NEW[0], "-s", NEW[1], "-t", "TopicA=ALL"), 209),
        (("updateAclConfig", "-b", "{broker}", "-a", NEW[0], "-s", NEW[1], "-t", "TopicA"), 209),
        (("deleteAclConfig", "-b", "{broker}", "-a", "nobody-here"), 210),
    ],
    ids=["short-secret", "short-access-key", "bad-permission", "bad-entry", "delete-unknown"],
)
def test_refusals_have_the_same_codes(acl_peers: AclPeers, args: tuple[str, ...], code: int) -> None:
    p = acl_peers
    before = {b: (p.conf(b) / "plain_acl.yml").read_bytes() for b in BROKERS}
    assert p.refused(*args) == code
    assert {b: (p.conf(b) / "plain_acl.yml").read_bytes() for b in BROKERS} == before
    # No secret in rmq's log (the audit log names the refused request's access key, which may be "abc";
    # its secretKey is masked): neither the short secret nor the good one as a secret's value.
    secret_value = re.compile(rf"secret\w*[\"']?\s*[=:]\s*[\"']?(abc|{re.escape(NEW[1])})", re.IGNORECASE)
    assert not any(secret_value.search(line) or NEW[1] in line for line in p.rmq.log)


def rmqadmin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rmq.admin", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_rmqadmin_reads_both_brokers_alike(acl_peers: AclPeers, monkeypatch: pytest.MonkeyPatch) -> None:
    """rmqadmin's getAclConfig (GET_BROKER_CLUSTER_ACL_CONFIG, which mqadmin 4.9.8 dropped) and
    clusterAclConfigVersion against both: the same accounts and white lists (Apache sends the secret keys,
    rmq masks them) and the same version counters."""
    p = acl_peers
    monkeypatch.setenv("RMQ_ACCESS_KEY", ADMIN[0])
    monkeypatch.setenv("RMQ_SECRET_KEY", ADMIN[1])
    configs = {}
    for b in BROKERS:
        r = rmqadmin("getAclConfig", "-b", p.broker_addr(b), "-n", p.namesrv(b), "--json")
        assert r.returncode == 0, r.stderr
        (doc,) = json.loads(r.stdout)
        assert doc["brokerAddr"] == p.broker_addr(b)
        for a in doc["plainAccessConfigs"]:
            a.pop("secretKey")
        doc.pop("brokerAddr")
        configs[b] = doc
    assert configs["rmq"] == configs["apache"]
    assert {a["accessKey"] for a in configs["rmq"]["plainAccessConfigs"]} >= {ADMIN[0], TEAM[0]}
    versions = {}
    for b in BROKERS:
        r = rmqadmin("clusterAclConfigVersion", "-c", CLUSTER, "-n", p.namesrv(b), "--json")
        assert r.returncode == 0, r.stderr
        versions[b] = sorted(
            (v["aclFilePath"].replace(str(p.homes[b]), "<home>"), v["counter"]) for v in json.loads(r.stdout)
        )
    assert versions["rmq"] == versions["apache"]
    assert len(versions["rmq"]) == 2
