//! Runtime values and RocketMQ's comparison rules (`ComparisonExpression.__compare` with
//! string conversion on, as `SelectorParser.parse` always sets it).
//!
//! A property value is always a string; comparing it with a number parses it the Java way
//! (`Long.valueOf` against an integer, `Double.valueOf` against a decimal). A string that
//! does not parse is an [`EvalError`], which fails the whole evaluation (no match).

use std::cmp::Ordering;

use crate::ast::Lit;
use crate::error::EvalError;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Long(i64),
    Double(f64),
    Str(&'a str),
}

impl Value<'_> {
    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The three-valued truth of a boolean operand: `None` for null (or a non-boolean).
    pub(crate) fn truth(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
}

impl Lit {
    pub(crate) fn value(&self) -> Value<'_> {
        match self {
            Lit::Null => Value::Null,
            Lit::Bool(b) => Value::Bool(*b),
            Lit::Long(v) => Value::Long(*v),
            Lit::Double(v) => Value::Double(*v),
            Lit::Str(s) => Value::Str(s),
        }
    }
}

/// Java's `Long.valueOf(String)`: an optional sign and ASCII digits, nothing else.
pub(crate) fn parse_java_long(s: &str) -> Result<i64, EvalError> {
    s.parse().map_err(|_| EvalError::NotANumber)
}

/// Java's `Double.valueOf(String)`: blanks (chars <= ' ') trimmed, an optional `f`/`d`
/// suffix, `NaN` and `Infinity` spelled exactly so. Hexadecimal floats are not accepted.
pub(crate) fn parse_java_double(s: &str) -> Result<f64, EvalError> {
    let t = s.trim_matches(|c: char| c <= ' ');
    let (sign, body) = match t.as_bytes().first() {
        Some(b'-') => (-1.0, &t[1..]),
        Some(b'+') => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    match body {
        "NaN" => return Ok(f64::NAN),
        "Infinity" => return Ok(sign * f64::INFINITY),
        _ => {}
    }
    let body = body.strip_suffix(['f', 'F', 'd', 'D']).unwrap_or(body);
    let decimal_chars = |c: u8| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-');
    let signed_twice = matches!(body.as_bytes().first(), Some(b'+' | b'-'));
    if body.is_empty() || signed_twice || !body.bytes().all(decimal_chars) {
        return Err(EvalError::NotANumber);
    }
    // Rust's grammar for these characters is Java's: digits with an optional point, at
    // least one digit, an optional exponent with digits.
    body.parse::<f64>()
        .map(|v| sign * v)
        .map_err(|_| EvalError::NotANumber)
}

/// Java's `Boolean.valueOf(String)`: true iff it equals "true" ignoring case.
pub(crate) fn java_bool(s: &str) -> bool {
    s.eq_ignore_ascii_case("true")
}

/// Java's `Double.compare`: NaN above everything and equal to itself, -0.0 below 0.0.
pub(crate) fn double_cmp(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.total_cmp(&b),
    }
}

/// `__compare(lv, rv, convertStringExpressions = true)`. Values of types that cannot be
/// compared (a boolean and a number) answer `Less`, as Java's `-1`. Neither may be null.
pub(crate) fn compare(l: Value<'_>, r: Value<'_>) -> Result<Ordering, EvalError> {
    use Value::*;
    Ok(match (l, r) {
        (Long(a), Long(b)) => a.cmp(&b),
        (Double(a), Double(b)) => double_cmp(a, b),
        (Long(a), Double(b)) => double_cmp(a as f64, b),
        (Double(a), Long(b)) => double_cmp(a, b as f64),
        (Str(a), Str(b)) => a.cmp(b),
        (Bool(a), Bool(b)) => a.cmp(&b),
        (Long(a), Str(s)) => a.cmp(&parse_java_long(s)?),
        (Str(s), Long(b)) => parse_java_long(s)?.cmp(&b),
        (Double(a), Str(s)) => double_cmp(a, parse_java_double(s)?),
        (Str(s), Double(b)) => double_cmp(parse_java_double(s)?, b),
        (Str(s), Bool(b)) => java_bool(s).cmp(&b),
        // Java throws a ClassCastException here (a bug); compare as the mirror case does.
        (Bool(a), Str(s)) => a.cmp(&java_bool(s)),
        _ => Ordering::Less,
    })
}

/// `>`, `>=`, `<`, `<=` between two non-null values: two strings compare as doubles.
pub(crate) fn compare_ordered(l: Value<'_>, r: Value<'_>) -> Result<Ordering, EvalError> {
    match (l, r) {
        (Value::Str(a), Value::Str(b)) => {
            Ok(double_cmp(parse_java_double(a)?, parse_java_double(b)?))
        }
        _ => compare(l, r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_number_parsing() {
        assert_eq!(parse_java_long("+42"), Ok(42));
        assert_eq!(parse_java_long("-9223372036854775808"), Ok(i64::MIN));
        for bad in ["", " 1", "1.0", "0x1", "9223372036854775808", "1L"] {
            assert!(parse_java_long(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_java_double(" 1.5f\n"), Ok(1.5));
        assert_eq!(parse_java_double("-Infinity"), Ok(f64::NEG_INFINITY));
        assert_eq!(parse_java_double("5."), Ok(5.0));
        assert_eq!(parse_java_double("1e3d"), Ok(1000.0));
        assert!(parse_java_double("NaN").unwrap().is_nan());
        for bad in [
            "", "inf", "nan", "infinity", "1e", "f", "--1", "+-1", "1,5", "0x1p3", "abc",
        ] {
            assert!(parse_java_double(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn compare_converts_strings() {
        use Value::*;
        assert_eq!(compare(Str("10"), Long(9)), Ok(Ordering::Greater));
        assert_eq!(compare(Long(9), Str("10")), Ok(Ordering::Less));
        assert_eq!(compare(Str("1.5"), Long(1)), Err(EvalError::NotANumber));
        assert_eq!(compare(Str("1.5"), Double(1.0)), Ok(Ordering::Greater));
        assert_eq!(compare(Str("TRUE"), Bool(true)), Ok(Ordering::Equal));
        assert_eq!(compare(Bool(true), Long(1)), Ok(Ordering::Less));
        assert_eq!(compare(Long(2), Double(2.0)), Ok(Ordering::Equal));
        assert_eq!(compare_ordered(Str("10"), Str("9")), Ok(Ordering::Greater));
        assert_eq!(compare(Str("10"), Str("9")), Ok(Ordering::Less));
        assert_eq!(double_cmp(f64::NAN, f64::INFINITY), Ordering::Greater);
        assert_eq!(double_cmp(-0.0, 0.0), Ordering::Less);
    }
}
