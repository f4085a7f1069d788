"""SQL92 filtering through the binding: the grammar table, errors, bloom bitmaps, and a consumer
with ``a > 5 AND b = 'x'`` receiving exactly the matching messages of a real store."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rmq.filter import (
    DEFAULT_EXPECTED_CONSUMERS,
    DEFAULT_MAX_ERROR_RATE,
    FilterSet,
    FilterSyntaxError,
    Sql92Filter,
    bloom_bits,
    bloom_key,
    bloom_may_match,
    bloom_shape,
    compile_sql92,
    is_tag_type,
)
from rmq.store import MessageStore, decode_records


def encode(props: dict[str, str]) -> bytes:
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode()


def kv(spec: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in spec.split(";") if p)


# (expression, properties "k=v;k=v", matches). RocketMQ 4.9.8's answers (see rust/filter/oracle).
MATCHES = [
    ("a > 5", "a=6", True),
    ("a > 5", "a=5", False),
    ("a >= 5", "a=5", True),
    ("a < 5", "a=4", True),
    ("a <= 5", "a=6", False),
    ("a > 5", "", False),
    ("a > 5", "a=abc", False),
    ("a > 5", "a=5.5", False),
    ("a > 5.0", "a=5.5", True),
    ("a > b", "a=10;b=9", True),
    ("a > -1", "a=0", True),
    ("a = 5", "a=5", True),
    ("a = '5'", "a=5", True),
    ("a = 'x'", "a=X", False),
    ("a <> 'x'", "a=y", True),
    ("a <> 'x'", "", False),
    ("a = TRUE", "a=true", True),
    ("a IS NULL", "", True),
    ("a IS NULL", "a=1", False),
    ("a IS NOT NULL", "a=1", True),
    ("a BETWEEN 1 AND 10", "a=10", True),
    ("a BETWEEN 1 AND 10", "a=11", False),
    ("a NOT BETWEEN 1 AND 10", "a=0", True),
    ("a IN ('x', 'y')", "a=y", True),
    ("a IN ('x', 'y')", "a=z", False),
    ("a NOT IN ('x', 'y')", "a=z", True),
    ("a NOT IN ('x')", "", False),
    ("a IN ('it''s')", "a=it's", True),
    ("a > 5 AND b = 'x'", "a=6;b=x", True),
    ("a > 5 AND b = 'x'", "a=6;b=y", False),
    ("a > 5 AND b = 'x'", "b=x", False),
    ("a > 5 OR b = 'x'", "b=x", True),
    ("a > 5 AND b > 5", "a=1;b=zz", False),
    ("NOT (a > 5)", "a=1", True),
    ("NOT (a > 5)", "", False),
    ("TRUE", "", True),
    ("FALSE", "", False),
    ("a", "a=true", False),
    ("a between 1 and 3 Or B iN ('q')", "a=2", True),
    ("a > 5 -- comment\n AND /* x */ b = 'x'", "a=6;b=x", True),
]


@pytest.mark.parametrize(("expr", "spec", "want"), MATCHES)
def test_grammar_table(expr: str, spec: str, want: bool):
    f = compile_sql92(expr)
    props = kv(spec)
    assert f.matches(props) is want
    assert f.matches(encode(props)) is want
    assert f.matches(encode(props).decode()) is want


# (expression, kind, column)
ERRORS = [
    ("", "grammar", 1),
    ("a >", "grammar", 4),
    ("a > 5 b", "grammar", 7),
    ("a = 'x", "lexical", 5),
    ("a != 1", "lexical", 3),
    ("a IN ()", "grammar", 7),
    ("5 IN ('x')", "type", 3),
    ("a BETWEEN 10 AND 1", "type", 11),
    ("a > 'x'", "type", 5),
    ("a = NULL", "type", 5),
    ("NOT a > 5", "type", 1),
    ("5", "type", 1),
    ("a IS 5", "grammar", 6),
    ("9223372036854775808 < a", "lexical", 1),
    ("(" * 40 + "a" + ")" * 40, "too_deep", 34),
]


@pytest.mark.parametrize(("expr", "kind", "column"), ERRORS)
def test_malformed_expressions_raise_with_position(expr: str, kind: str, column: int):
    with pytest.raises(FilterSyntaxError) as info:
        compile_sql92(expr)
    e = info.value
    assert isinstance(e, ValueError)
    assert (e.kind, e.line, e.column) == (kind, 1, column)
    assert f"column {column}" in str(e) and e.detail in str(e)
    with pytest.raises(ValueError):
        Sql92Filter(expr)


def test_filter_object():
    f = Sql92Filter("a > 5 AND b = 'x' OR a IS NULL")
    assert f.expression == "a > 5 AND b = 'x' OR a IS NULL"
    assert f.property_names == ["a", "b"]
    assert f.canonical() == "(((a > 5) AND (b = 'x')) OR (a IS NULL))"
    assert repr(f) == "Sql92Filter(\"a > 5 AND b = 'x' OR a IS NULL\")"
    with pytest.raises(TypeError):
        f.matches(42)  # type: ignore[arg-type]
    assert is_tag_type(None) and is_tag_type("") and is_tag_type("TAG") and not is_tag_type("SQL92")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40), st.binary(max_size=60))
def test_any_input_is_compiled_or_rejected_cleanly(expr: str, props: bytes):
    try:
        f = compile_sql92(expr)
    except FilterSyntaxError:
        return
    assert isinstance(f.matches(props), bool)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["a", "b", "5", "'x'", "(", ")", ">", "=", "<>", "AND", "OR", "NOT", "IN", "IS", "NULL", ","]
        ),
        max_size=12,
    ),
    st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["5", "6", "x", "abc"])),
)
def test_token_soup(tokens: list[str], props: dict[str, str]):
    try:
        f = compile_sql92(" ".join(tokens))
    except FilterSyntaxError:
        return
    assert f.matches(props) == f.matches(encode(props))


def test_bloom_positions_are_rocketmqs():
    assert (DEFAULT_MAX_ERROR_RATE, DEFAULT_EXPECTED_CONSUMERS) == (20, 32)
    assert bloom_shape() == (112, 3)
    assert bloom_shape(10, 100) == (480, 4)
    # Computed by RocketMQ 4.9.8's BloomFilter.calcBitPositions.
    assert bloom_bits("g#t", 112, 3) == [22, 87, 58]
    assert bloom_bits(bloom_key("CID_SQL", "TopicTest"), 112, 3) == [25, 65, 99]
    assert bloom_bits("g#t", 480, 4) == [422, 295, 202, 220]
    with pytest.raises(ValueError):
        bloom_shape(0, 32)
    with pytest.raises(ValueError):
        FilterSet(20, 0)


def test_filter_set_bitmaps():
    fs = FilterSet()
    assert (fs.m, fs.k, len(fs)) == (112, 3, 0)
    assert fs.bitmap(b"a\x016") == b""
    bits = fs.register(bloom_key("g1", "T"), compile_sql92("a > 5"))
    fs.register(bloom_key("g2", "T"), compile_sql92("b = 'x'"))
    assert len(fs) == 2 and "g1#T" in fs and fs.keys() == ["g1#T", "g2#T"]
    hit = fs.bitmap(encode({"a": "6"}))
    miss = fs.bitmap(encode({"a": "1", "b": "x"}))
    assert len(hit) == 14
    assert fs.may_match("g1#T", hit) and bloom_may_match(bits, 112, hit)
    assert fs.may_match("g2#T", miss)
    assert not bloom_may_match(bits, 112, bytes(14))
    assert bloom_may_match(bits, 112, bytes(8))  # another width: cannot tell
    assert fs.may_match("unknown#T", bytes(14))
    assert fs.unregister("g1#T") and not fs.unregister("g1#T") and len(fs) == 1


def test_consumer_receives_exactly_the_matching_messages(tmp_path):
    """`a > 5 AND b = 'x'`: bitmaps computed at put time (the dispatch side), the pull side skips
    bloom misses, evaluates the rest, and gets exactly the messages the predicate selects."""
    rng = random.Random(7)
    group_filter = compile_sql92("a > 5 AND b = 'x'")
    fs = FilterSet()
    key = bloom_key("GID_sql", "T")
    fs.register(key, group_filter)
    fs.register(bloom_key("GID_other", "T"), compile_sql92("b = 'y' OR a < 3"))

    store = MessageStore({"storePathRootDir": str(tmp_path), "mappedFileSizeCommitLog": 1 << 20})
    try:
        expected, bitmaps = [], {}
        for i in range(300):
            props = {"KEYS": f"k{i}"}
            if rng.random() < 0.9:
                props["a"] = rng.choice(["1", "5", "6", "9", "x"])
            if rng.random() < 0.9:
                props["b"] = rng.choice(["x", "y"])
            a, b = props.get("a", ""), props.get("b")
            if a.isdigit() and int(a) > 5 and b == "x":
                expected.append(i)
            _, qoff, *_ = store.put("T", 0, str(i).encode(), encode(props))
            bitmaps[qoff] = fs.bitmap(encode(props))
        assert store.wait_dispatched(store.commitlog_max_offset(), 5000)

        received, skipped, offset = [], 0, 0
        while True:
            status, offset_next, *_, buf, _n = store.get_message("T", 0, offset, 64)
            if status != "FOUND":
                break
            for rec in decode_records(buf):
                qoff, body, props = rec[2], rec[12], rec[13]
                if not fs.may_match(key, bitmaps[qoff]):
                    skipped += 1
                    assert not group_filter.matches(props)  # a bloom miss is never a match
                elif group_filter.matches(props):
                    received.append(int(body))
            offset = offset_next
        assert received == expected and len(expected) > 20
        assert skipped > 150  # most non-matching messages never reach evaluation
    finally:
        store.shutdown()
