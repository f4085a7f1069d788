"""Apply rmq-filter's four documented deviations to RocketMQ 4.9.8's filter sources.

Usage: python3 patch_reference.py <dir holding org/apache/rocketmq/filter>

The patched reference must agree with rmq-filter on every line; the unpatched one differs
exactly where RocketMQ's behaviour is an accident (see the crate docs).
"""

import sys
from pathlib import Path

PATCHES = [
    # Tokens after a complete expression are an error.
    (
        "parser/SelectorParser.java",
        "            return this.JmsSelector();",
        "            BooleanExpression r = this.JmsSelector();\n"
        "            if (getNextToken().kind != SelectorParserConstants.EOF) {\n"
        '                throw new ParseException("trailing tokens");\n'
        "            }\n"
        "            return r;",
    ),
    # Integer literals stay longs (no narrowing to int, so strings parse with Long.valueOf).
    (
        "expression/ConstantExpression.java",
        "        if (Integer.MIN_VALUE <= l && l <= Integer.MAX_VALUE) {",
        "        if (false) {",
    ),
    # A 0.0 literal is accepted.
    (
        "expression/ConstantExpression.java",
        "        if (value < Double.MIN_VALUE) {",
        "        if (false) {",
    ),
    # TRUE = 'x' compares like 'x' = TRUE instead of throwing ClassCastException.
    (
        "expression/ComparisonExpression.java",
        "                        lv = Boolean.valueOf((String) lv).booleanValue();",
        "                        rv = Boolean.valueOf((String) rv).booleanValue();",
    ),
]


def main() -> None:
    root = Path(sys.argv[1])
    for rel, old, new in PATCHES:
        path = root / rel
        text = path.read_text()
        if old not in text:
            sys.exit(f"{rel}: patch target not found (not 4.9.8?)")
        path.write_text(text.replace(old, new))


if __name__ == "__main__":
    main()
