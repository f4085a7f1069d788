"""The sans-I/O frame codec and the typed header helpers (REMOTING.md §1.1-§1.3, §8.1)."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rmq.common.codes import LanguageCode, RequestCode, SerializeType
from rmq.remoting.codec import (
    FrameDecoder,
    decode,
    decode_json_header,
    encode,
    encode_binary_header,
    encode_parts,
)
from rmq.remoting.command import RemotingCommand, create_request, create_response
from rmq.remoting.errors import FrameError, HeaderError
from rmq.remoting.headers import bool_text, header_bool, header_int, header_long, header_str


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return (
        struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body
    )


# --- hand-built vectors -----------------------------------------------------------------------------------

JAVA_ROUTE_REQUEST = (
    b'{"code":105,"extFields":{"topic":"TopicA"},"flag":0,"language":"JAVA","opaque":42,'
    b'"serializeTypeCurrentRPC":"JSON","version":409}'
)


def test_decode_hand_built_json_frame() -> None:
    cmd = decode(frame(JAVA_ROUTE_REQUEST))
    assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert cmd.language == LanguageCode.JAVA
    assert cmd.version == 409
    assert cmd.opaque == 42
    assert cmd.flag == 0
    assert cmd.remark is None
    assert cmd.ext_fields == {"topic": "TopicA"}
    assert cmd.body is None
    assert cmd.serialize_type == SerializeType.JSON
    assert not cmd.is_response and not cmd.is_oneway


def test_encode_json_frame_layout() -> None:
    cmd = RemotingCommand(105, opaque=42, ext_fields={"topic": "TopicA"}, body=b"\x00\x01body")
    data = encode(cmd)
    length, word = struct.unpack_from(">iI", data)
    assert length == len(data) - 4
    assert word >> 24 == 0
    hlen = word & 0xFFFFFF
    header = json.loads(data[8 : 8 + hlen])
    assert header == {
        "code": 105,
        "extFields": {"topic": "TopicA"},
        "flag": 0,
        "language": "JAVA",
        "opaque": 42,
        "serializeTypeCurrentRPC": "JSON",
        "version": 409,
    }
    assert data[8 + hlen :] == b"\x00\x01body"


# code 310, CPP, version 333, opaque 7, flag 0, remark "hi", extFields {"b": "T"}, body "xyz"
BINARY_HEADER = (
    b"\x01\x36"  # code
    b"\x01"  # language CPP
    b"\x01\x4d"  # version 333
    b"\x00\x00\x00\x07"  # opaque
    b"\x00\x00\x00\x00"  # flag
    b"\x00\x00\x00\x02hi"  # remark
    b"\x00\x00\x00\x08"  # extFields byte length
    b"\x00\x01b"  # key
    b"\x00\x00\x00\x01T"  # value
)


def test_binary_header_hand_built_vector_both_ways() -> None:
    cmd = RemotingCommand(
        310,
        language=LanguageCode.CPP,
        version=333,
        opaque=7,
        remark="hi",
        ext_fields={"b": "T"},
        body=b"xyz",
        serialize_type=SerializeType.ROCKETMQ,
    )
    assert encode_binary_header(cmd) == BINARY_HEADER
    assert encode(cmd) == frame(BINARY_HEADER, b"xyz", serialize_type=1)
    decoded = decode(frame(BINARY_HEADER, b"xyz", serialize_type=1))
    assert decoded == cmd


def test_binary_header_zero_length_strings_are_null() -> None:
    header = (
        b"\x00\x0a\x00\x01\x99\x00\x00\x00\x01\x00\x00\x00\x00"
        b"\x00\x00\x00\x00"  # remark: length 0 -> None
        b"\x00\x00\x00\x0f"
        b"\x00\x01k\x00\x00\x00\x00"  # value of length 0 -> entry skipped
        b"\x00\x01a\x00\x00\x00\x01b"
    )
    cmd = decode(frame(header, serialize_type=1))
    assert cmd.remark is None
    assert cmd.ext_fields == {"a": "b"}
    # and empty strings are left out when encoding
    out = RemotingCommand(10, remark="", ext_fields={"e": "", "a": "b"}, serialize_type=1)
    assert decode(encode(out)).ext_fields == {"a": "b"}
    assert decode(encode(out)).remark is None


def test_response_keeps_request_serialize_type_and_opaque() -> None:
    request = RemotingCommand(34, opaque=99, serialize_type=SerializeType.ROCKETMQ)
    response = create_response(request, 0, "ok", {"k": "v"})
    assert response.opaque == 99
    assert response.is_response
    assert response.serialize_type == SerializeType.ROCKETMQ
    assert decode(encode(response)) == response


def test_encode_parts_hands_back_the_body_object() -> None:
    body = bytes(1 << 20)
    prefix, out_body = encode_parts(RemotingCommand(11, body=body))
    assert out_body is body
    length, word = struct.unpack_from(">iI", prefix)
    assert length == 4 + (word & 0xFFFFFF) + len(body)
    assert len(prefix) == 8 + (word & 0xFFFFFF)


# --- incremental framing ---


def sample_commands() -> list[RemotingCommand]:
    return [
        create_request(310, {"a": "g", "b": "T"}, b"hello"),
        RemotingCommand(
            11, opaque=5, remark="x", serialize_type=1, ext_fields={"q": "1"}, body=b"\x00" * 300
        ),
        create_response(RemotingCommand(34, opaque=9), 0),
        RemotingCommand(40, opaque=3, flag=2, ext_fields={"consumerGroup": "g"}),
    ]


def test_feed_one_byte_at_a_time() -> None:
    cmds = sample_commands()
    data = b"".join(encode(c) for c in cmds)
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(len(data)):
        out += decoder.feed(data[i : i + 1])
    assert out == cmds
    assert decoder.buffered == 0


def test_several_frames_in_one_chunk_and_a_split_tail() -> None:
    cmds = sample_commands()
    data = b"".join(encode(c) for c in cmds)
    decoder = FrameDecoder()
    cut = len(data) - 7
    assert decoder.feed(data[:cut]) == cmds[:-1]
    assert decoder.buffered == len(encode(cmds[-1])) - 7
    assert decoder.feed(data[cut:]) == cmds[-1:]
    assert decoder.buffered == 0


def test_feed_accepts_bytearray_and_memoryview() -> None:
    cmds = sample_commands()
    data = b"".join(encode(c) for c in cmds)
    decoder = FrameDecoder()
    assert decoder.feed(bytearray(data[:10])) == []
    assert decoder.feed(memoryview(data)[10:]) == cmds


# --- malformed input ---


@pytest.mark.parametrize(
    "data",
    [
        struct.pack(">i", 3) + b"abc",  # length < 4
        struct.pack(">i", -1),  # negative length
        struct.pack(">iI", 6, 100) + b"{}",  # header length > frame
        struct.pack(">iI", 6, (2 << 24) | 2) + b"{}",  # unknown serialize type
        frame(b"{not json"),
        frame(b"[1,2,3]"),  # not an object
        frame(b'{"code":"abc"}'),  # code not a number
        frame(b'{"code":1,"extFields":[1]}'),  # extFields not an object
        frame(b"\x00\x01\x00", serialize_type=1),  # binary header too short
        frame(BINARY_HEADER[:-1], serialize_type=1),  # truncated ext entry
        frame(
            BINARY_HEADER[:13] + b"\x00\x00\x7f\xffhi" + BINARY_HEADER[19:], serialize_type=1
        ),  # remark overrun
        frame(
            BINARY_HEADER[:13] + b"\x00\x00\x00\x02\xff\xfe" + BINARY_HEADER[19:], serialize_type=1
        ),  # bad UTF-8
    ],
)
def test_malformed_frames_raise_frame_error(data: bytes) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(data)
    assert issubclass(FrameError, ValueError)


def test_frame_size_limit_is_checked_from_the_length_prefix() -> None:
    decoder = FrameDecoder(max_frame_length=1024)
    with pytest.raises(FrameError, match="exceeds"):
        decoder.feed(struct.pack(">i", 1021))  # 1021 + 4 > 1024, rejected before the body arrives
    ok = encode(RemotingCommand(1, body=b"x" * 900))
    assert len(FrameDecoder(max_frame_length=1024).feed(ok)) == 1


def test_default_limit_is_16_mib() -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(struct.pack(">i", 16 * 1024 * 1024 - 3))
    assert FrameDecoder().feed(struct.pack(">i", 16 * 1024 * 1024 - 4)) == []


# --- JSON header tolerance ---

CPP_SEND_HEADER = (
    b'{"code":310,"language":"CPP","version":333,"opaque":5,"flag":0,"remark":"",'
    b'"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"","a":"pg","b":"T","c":"TBW102",'
    b'"d":4,"e":-1,"f":0,"g":"1700000000000","h":0,"i":"","j":"0","k":"0","l":16,"m":"1"}}'
)


def test_cpp_style_header() -> None:
    cmd = decode(frame(CPP_SEND_HEADER, b"body"))
    assert cmd.language == LanguageCode.CPP
    assert cmd.version == 333
    assert cmd.remark == ""
    ext = cmd.ext_fields
    assert all(isinstance(v, str) for v in ext.values())
    assert ext["d"] == "4" and ext["e"] == "-1" and ext["l"] == "16"
    assert header_int(ext, "d") == 4
    assert header_int(ext, "e") == -1
    assert header_long(ext, "g") == 1700000000000
    assert header_bool(ext, "m") is True  # C++ "1" is true for us (REMOTING.md §8.3)
    assert header_bool(ext, "k") is False
    assert header_str(ext, "i") == ""


def test_ext_field_values_of_other_json_types_are_stringified() -> None:
    cmd = decode_json_header(
        b'{"code":1,"extFields":{"n":12,"neg":-3,"t":true,"f":false,"nul":null,"fl":1.5,"s":"x","o":{"a":1}}}'
    )
    assert cmd.ext_fields == {
        "n": "12",
        "neg": "-3",
        "t": "true",
        "f": "false",
        "fl": "1.5",
        "s": "x",
        "o": '{"a":1}',
    }


@pytest.mark.parametrize("serialize_type", [0, 1])
def test_non_string_ext_values_are_written_as_strings(serialize_type: int) -> None:
    ext: dict[str, Any] = {"queueId": 3, "ok": True, "no": False, "gone": None}
    cmd = RemotingCommand(1, ext_fields=ext, serialize_type=serialize_type)
    assert decode(encode(cmd)).ext_fields == {"queueId": "3", "ok": "true", "no": "false"}


def test_unknown_keys_ignored_and_defaults_for_missing_ones() -> None:
    cmd = decode_json_header(b'{"code":17,"somethingNew":[1,2],"remark":null,"extFields":null}')
    assert cmd.code == 17
    assert cmd.remark is None
    assert cmd.ext_fields == {}
    assert cmd.opaque == 0 and cmd.flag == 0
    assert cmd.language == LanguageCode.JAVA


@pytest.mark.parametrize(
    ("value", "expected"),
    [(b'"JAVA"', 0), (b'"CPP"', 1), (b'"PYTHON"', 3), (b'"RUST"', 12), (b"1", 1), (b'"KOTLIN"', 7)],
)
def test_language_by_name_or_ordinal(value: bytes, expected: int) -> None:
    assert decode_json_header(b'{"code":1,"language":' + value + b"}").language == expected


def test_fastjson_style_header_falls_back_to_the_tolerant_parser() -> None:
    cmd = decode_json_header(b"{code:105,'language':'JAVA',opaque:3,extFields:{topic:'T',queueId:2,}}")
    assert cmd.code == 105
    assert cmd.opaque == 3
    assert cmd.ext_fields == {"topic": "T", "queueId": "2"}


def test_numbers_given_as_strings() -> None:
    cmd = decode_json_header(b'{"code":"105","opaque":"7","flag":"1","version":"409"}')
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (105, 7, 1, 409)
    assert cmd.is_response


# --- typed header access ---


def test_header_helpers_report_the_key() -> None:
    fields = {"queueId": "abc", "big": "3000000000", "flag": "maybe", "topic": "T"}
    with pytest.raises(HeaderError, match="<missing> is null"):
        header_str(fields, "missing")
    with pytest.raises(HeaderError, match="<queueId> is not an int"):
        header_int(fields, "queueId")
    with pytest.raises(HeaderError, match="<big> is out of range"):
        header_int(fields, "big")
    assert header_long(fields, "big") == 3000000000
    with pytest.raises(HeaderError, match="<flag> is not a boolean"):
        header_bool(fields, "flag")
    assert header_int(fields, "nope", None) is None
    assert header_int(fields, "nope", 5) == 5
    assert header_str(fields, "topic") == "T"
    assert header_str(fields, "nope", "dflt") == "dflt"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("true", True),
        ("TRUE", True),
        ("True", True),
        ("1", True),
        ("false", False),
        ("FALSE", False),
        ("0", False),
    ],
)
def test_header_bool_accepts_java_and_cpp_forms(text: str, expected: bool) -> None:
    assert header_bool({"k": text}, "k") is expected


def test_header_bool_empty_counts_as_absent() -> None:
    assert header_bool({"k": ""}, "k", False) is False
    with pytest.raises(HeaderError):
        header_bool({"k": ""}, "k")
    assert bool_text(True) == "true" and bool_text(False) == "false"


# --- property: round trips ---

_int32 = st.integers(-(2**31), 2**31 - 1)
_short = st.integers(-(2**15), 2**15 - 1)
_nonempty_text = st.text(min_size=1, max_size=20)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    serialize_type = draw(st.sampled_from([0, 1]))
    binary = serialize_type == 1
    return RemotingCommand(
        draw(_short if binary else _int32),
        language=draw(st.sampled_from(list(LanguageCode))),
        version=draw(_short if binary else _int32),
        opaque=draw(_int32),
        flag=draw(st.sampled_from([0, 1, 2, 3]) | _int32),
        remark=draw(st.none() | (_nonempty_text if binary else st.text(max_size=20))),
        ext_fields=draw(st.dictionaries(_nonempty_text if binary else st.text(max_size=10), _nonempty_text)),
        body=draw(st.none() | st.binary(min_size=1, max_size=200)),
        serialize_type=serialize_type,
    )


@settings(max_examples=300, deadline=None)
@given(commands())
def test_round_trip(cmd: RemotingCommand) -> None:
    assert decode(encode(cmd)) == cmd


@settings(max_examples=100, deadline=None)
@given(st.lists(commands(), min_size=1, max_size=5), st.lists(st.integers(1, 50), min_size=1, max_size=30))
def test_round_trip_any_chunking(cmds: list[RemotingCommand], cuts: list[int]) -> None:
    data = b"".join(encode(c) for c in cmds)
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    pos = 0
    for cut in cuts:
        out += decoder.feed(data[pos : pos + cut])
        pos += cut
    out += decoder.feed(data[pos:])
    assert out == cmds
    assert decoder.buffered == 0
