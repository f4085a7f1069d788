"""rmq.acl without sockets: the signature (against vectors computed with ``openssl dgst -sha1 -hmac``), the
request signer, the rules file's strict parsing and RocketMQ's address patterns and permission logic."""

from __future__ import annotations

import pytest
from rmq.acl import AclConfigError, RequestSigner, calc_signature, parse_rules, signed_content
from rmq.acl.rules import ANY, DENY, PUB, SUB, AddressPattern, allows
from rmq.common.codes import RequestCode
from rmq.remoting.command import create_request


def test_signature_vectors() -> None:
    fields = {
        "topic": "TopicA",
        "AccessKey": "RocketMQ",
        "queueId": "0",
        "producerGroup": "PG",
        "Signature": "x",
    }
    content = signed_content(fields, b"body")
    assert content == b"RocketMQPG0TopicAbody"  # Java TreeMap order: upper case before lower case
    assert calc_signature(content, "12345678") == "KDerPV5oEejLmk1anpxAu3fwiSE="
    assert (
        calc_signature(signed_content({"k2": "v2", "k1": "ak1"}, b"body"), "sk")
        == "D0oZc8KX5wnVF0JF1viScLOcQEM="
    )


def test_signer_adds_and_signs_access_key_and_token() -> None:
    req = create_request(RequestCode.SEND_MESSAGE, {"topic": "T"}, b"b")
    signer = RequestSigner("ak", "secret", "tok")
    signer(req)
    assert req.ext_fields["AccessKey"] == "ak" and req.ext_fields["SecurityToken"] == "tok"
    expected = calc_signature(signed_content(req.ext_fields, b"b"), "secret")
    assert req.ext_fields["Signature"] == expected
    signer(req)  # signing again (a retry) gives the same signature
    assert req.ext_fields["Signature"] == expected
    assert "secret" not in repr(signer)
    with pytest.raises(ValueError):
        RequestSigner("ak", "")


@pytest.mark.parametrize(
    "pattern, yes, no",
    [
        ("*", ["1.2.3.4", "::1"], []),
        ("", [], ["1.2.3.4"]),
        ("192.168.0.*", ["192.168.0.1", "192.168.0.255"], ["192.168.1.1", "192.168.0", "x"]),
        ("10.1.1.1-100", ["10.1.1.1", "10.1.1.100"], ["10.1.1.101", "10.1.1.0"]),
        ("10.*.1-2.*", ["10.9.2.7"], ["10.9.3.7"]),
        ("192.168.1.{1,2,3}", ["192.168.1.2"], ["192.168.1.4"]),
        ("1.1.1.1,2.2.2.2", ["2.2.2.2"], ["3.3.3.3"]),
        ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
        ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["::2"]),
    ],
)
def test_address_patterns(pattern: str, yes: list[str], no: list[str]) -> None:
    p = AddressPattern.parse(pattern, "test")
    assert all(p.match(a) for a in yes), pattern
    assert not any(p.match(a) for a in no), pattern


@pytest.mark.parametrize(
    "bad", ["300.1.1.1", "1.2.3", "1.2.3.*.*", "10.1.1.9-3", "a.b.c.d", "1.2.3.{x}", "1.2.*"]
)
def test_bad_address_patterns(bad: str) -> None:
    with pytest.raises(AclConfigError):
        AddressPattern.parse(bad, "test")


def test_permission_logic() -> None:
    assert allows(PUB, PUB | SUB) and allows(SUB, SUB) and not allows(SUB, PUB)
    assert not allows(PUB, DENY | PUB)
    assert allows(ANY, SUB) and not allows(ANY, DENY)


def test_rules_parse_numbers_as_text_and_defaults_to_deny() -> None:
    rules = parse_rules(
        "accounts:\n  - accessKey: 123456\n    secretKey: 12345678\n    topicPerms: [T=SUB|PUB]\n"
    )
    account = rules.accounts["123456"]
    assert account.secret_key == "12345678"
    assert account.perm_for("topic", "T") == PUB | SUB
    assert account.perm_for("topic", "U") == DENY and account.perm_for("group", "g") == DENY
    assert not account.admin
    assert "12345678" not in repr(account)


@pytest.mark.parametrize(
    "text, why",
    [
        ("accounts: {}\n", "must be a list"),
        ("accounts:\n  - {accessKey: a, secretKey: s, topicPerms: [T]}\n", "not resource=PERM"),
        ("accounts:\n  - {accessKey: a, secretKey: s, groupPerms: [g=ALL]}\n", "not DENY, PUB, SUB"),
        ("accounts:\n  - {accessKey: a, secretKey: s, admin: maybe}\n", "true or false"),
        ("globalWhiteRemoteAddresses: 1.2.3.4\n", "must be a list"),
        ("- a\n", "expected a mapping"),
        ("accounts: [\n", "not valid YAML"),
    ],
)
def test_invalid_rules_name_the_problem(text: str, why: str) -> None:
    with pytest.raises(AclConfigError, match=why):
        parse_rules(text, "plain_acl.yml")


def test_unique_key_query_flag_signed_either_way() -> None:
    """Apache's broker leaves ``_UNIQUE_KEY_QUERY`` out of the signed content; a client that signed it along
    (it is one of its ext fields) is accepted too; a flag changed after signing is not."""
    from rmq.acl import AccessValidator

    v = AccessValidator(parse_rules("accounts:\n  - {accessKey: ak, secretKey: sk, defaultTopicPerm: SUB}\n"))
    fields = {"topic": "T", "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "1"}
    req = create_request(RequestCode.QUERY_MESSAGE, {**fields, "_UNIQUE_KEY_QUERY": "true"})
    RequestSigner("ak", "sk")(req)  # signs the flag along
    assert v.check("1.2.3.4:5", req) is None
    apache_style = dict(req.ext_fields)
    del apache_style["Signature"]
    content = signed_content(apache_style, None, ("Signature", "_UNIQUE_KEY_QUERY"))
    req.ext_fields["Signature"] = calc_signature(content, "sk")
    assert v.check("1.2.3.4:5", req) is None
    RequestSigner("ak", "sk")(req)
    req.ext_fields["_UNIQUE_KEY_QUERY"] = "false"
    assert v.check("1.2.3.4:5", req) is not None


def test_yaml_errors_quote_no_part_of_the_file() -> None:
    """PyYAML's message quotes the line it stopped at; a secret key there would reach the log."""
    with pytest.raises(AclConfigError) as e:
        parse_rules("accounts:\n  - accessKey: ak\n    secretKey: 'very-secret-value\n", "plain_acl.yml")
    assert "not valid YAML" in str(e.value) and "line " in str(e.value)
    assert "very-secret-value" not in str(e.value)


def test_data_version_and_empty_files() -> None:
    from rmq.acl.rules import DataVersion

    rules = parse_rules("accounts: []\ndataVersion:\n- {counter: 3, timestamp: 1700000000000}\n")
    assert rules.version == DataVersion(3, 1_700_000_000_000)
    assert rules.version.next().counter == 4 and rules.version.next().timestamp > 1_700_000_000_000
    assert parse_rules("accounts: []\n").version is None
    with pytest.raises(AclConfigError, match="dataVersion"):
        parse_rules("dataVersion: [{counter: x}]\n")
    assert parse_rules("", allow_empty=True).accounts == {}
    with pytest.raises(AclConfigError, match="expected a mapping"):
        parse_rules("")


def test_merged_files_refuse_an_access_key_defined_twice() -> None:
    from rmq.acl.rules import merge_rules

    a = parse_rules(
        "globalWhiteRemoteAddresses: [10.0.0.1]\naccounts:\n  - {accessKey: ak, secretKey: s1}\n", "a.yml"
    )
    b = parse_rules(
        "globalWhiteRemoteAddresses: [10.0.0.2]\naccounts:\n  - {accessKey: bk, secretKey: s2}\n", "b.yml"
    )
    merged = merge_rules([a, b], "a.yml")
    assert set(merged.accounts) == {"ak", "bk"} and merged.globally_white("10.0.0.2")
    c = parse_rules("accounts:\n  - {accessKey: ak, secretKey: s3}\n", "c.yml")
    with pytest.raises(AclConfigError, match=r"'ak' is defined in both a\.yml and c\.yml"):
        merge_rules([a, c], "a.yml")


def test_write_atomically_keeps_the_mode_and_leaves_no_temp_file(tmp_path) -> None:
    import os
    import stat

    from rmq.acl.rules import write_atomically

    path = tmp_path / "plain_acl.yml"
    path.write_text("accounts: []\n")
    os.chmod(path, 0o640)
    inode = path.stat().st_ino
    write_atomically(path, "accounts:\n  - {accessKey: ak, secretKey: sk}\n")
    assert "accessKey: ak" in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.stat().st_ino != inode  # a new file renamed over the old one, not written in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain_acl.yml"]
    fresh = tmp_path / "new.yml"
    write_atomically(fresh, "accounts: []\n")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600  # a new rules file: its owner only
