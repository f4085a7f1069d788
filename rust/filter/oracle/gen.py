"""Random SQL92 expressions and property sets for the differential test (run.sh).

Usage: python3 gen.py SEED COUNT  ->  lines `E<TAB>expression<TAB>k=v;k=v`
Mostly well-formed expressions over a few properties, literals and values chosen to hit
RocketMQ's conversion rules, with some character-level damage for the error paths.
"""

import random, sys
R = random.Random(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
N = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
PROPS = ["a", "b", "c", "A"]
INTS = ["0", "1", "5", "6", "2147483647", "2147483648", "9223372036854775807", "5L", "007", "10"]
FLOATS = ["1.5", ".5", "5.", "1e3", "0.0", "2.5E-1", "5.0", "6.0", "1e400"]
STRS = ["'x'", "'y'", "'it''s'", "'5'", "''", "'true'", "'1.5'", "'6'", "'abc'"]
VALS = ["6", "5", "x", "y", "1.5", "-3", "true", "TRUE", "abc", "3000000000", "NaN", " 7", "1e3", "5f",
        "Infinity", "it's", "0", "-0", "+5", "10", "6.0", "false", "99999999999999999999", "0x10"]
def kw(w):
    return R.choice([w, w.lower(), w.capitalize()])
def lit():
    return R.choice([R.choice(INTS), R.choice(FLOATS), R.choice(STRS), kw("TRUE"), kw("FALSE"), kw("NULL")])
def operand(d):
    r = R.random()
    if r < 0.45: return R.choice(PROPS)
    if r < 0.8: return lit()
    if r < 0.9: return "-" + operand(d)
    if r < 0.93: return "+" + operand(d)
    return "(" + expr(d + 1) + ")"
def pred(d):
    x = operand(d)
    r = R.random()
    if r < 0.35: return f"{x} {R.choice(['>', '>=', '<', '<=', '=', '<>'])} {operand(d)}"
    if r < 0.5: return f"{x} {kw('NOT') + ' ' if R.random() < .3 else ''}{kw('BETWEEN')} {operand(d)} {kw('AND')} {operand(d)}"
    if r < 0.65:
        items = ", ".join(R.choice(STRS + (["1"] if R.random() < .05 else [])) for _ in range(R.randint(1, 3)))
        return f"{x} {kw('NOT') + ' ' if R.random() < .3 else ''}{kw('IN')} ({items})"
    if r < 0.75: return f"{x} {kw('IS')} {kw('NOT') + ' ' if R.random() < .5 else ''}{kw('NULL')}"
    if r < 0.85: return f"{kw('NOT')} {operand(d) if R.random() < .5 else '(' + pred(d) + ')'}"
    return x
def expr(d=0):
    if d > 3: return pred(d)
    r = R.random()
    if r < 0.5: return pred(d)
    if r < 0.75: return f"{expr(d+1)} {kw('AND')} {expr(d+1)}"
    return f"{expr(d+1)} {kw('OR')} {expr(d+1)}"
def props():
    return ";".join(f"{k}={R.choice(VALS)}" for k in PROPS if R.random() < 0.7)
def mutate(s):
    # occasional junk: drop/dup a char, trailing token
    r = R.random()
    if r < 0.05 and s: i = R.randrange(len(s)); return s[:i] + s[i+1:]
    if r < 0.08: i = R.randrange(len(s) + 1); return s[:i] + R.choice("()',=<>-#!") + s[i:]
    return s
for _ in range(N):
    print(f"E\t{mutate(expr())}\t{props()}")
