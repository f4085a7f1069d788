//! Tokens of RocketMQ's `SelectorParser.jj` (4.9.x), longest match first as JavaCC does.
//!
//! | token | form |
//! | --- | --- |
//! | keyword (any case) | `NOT AND OR BETWEEN IN TRUE FALSE NULL IS` |
//! | identifier | `[A-Za-z_$][A-Za-z0-9_$]*` (a property name, case kept) |
//! | decimal | `0` or `[1-9][0-9]*` with an optional `l`/`L`, a Java `long` |
//! | float | `1.5`, `1.`, `.5`, `1e5`, `1.5E-3` |
//! | string | `'...'` with `''` for a quote |
//! | operator | `= <> > >= < <= ( ) , + -` |
//! | skipped | blanks `\t \n \r \f`, `-- line comment`, `/* block comment */` |

use crate::error::{SyntaxError, SyntaxErrorKind};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
    Long(i64),
    Double(f64),
    Str(String),
    Ident(String),
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    LParen,
    RParen,
    Comma,
    Plus,
    Minus,
    Eof,
}

impl Tok {
    /// How an error message names this token.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Long(v) => format!("number {v}"),
            Tok::Double(v) => format!("number {v:?}"),
            Tok::Str(s) => format!("string '{}'", s.replace('\'', "''")),
            Tok::Ident(s) => format!("identifier {s}"),
            Tok::Eof => "end of expression".to_string(),
            other => format!("'{}'", other.symbol()),
        }
    }

    fn symbol(&self) -> &'static str {
        match self {
            Tok::Not => "NOT",
            Tok::And => "AND",
            Tok::Or => "OR",
            Tok::Between => "BETWEEN",
            Tok::In => "IN",
            Tok::True => "TRUE",
            Tok::False => "FALSE",
            Tok::Null => "NULL",
            Tok::Is => "IS",
            Tok::Eq => "=",
            Tok::Ne => "<>",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::Comma => ",",
            Tok::Plus => "+",
            Tok::Minus => "-",
            _ => "?",
        }
    }
}

/// A token and the byte offset where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub start: usize,
}

const KEYWORDS: [(&str, Tok); 9] = [
    ("NOT", Tok::Not),
    ("AND", Tok::And),
    ("OR", Tok::Or),
    ("BETWEEN", Tok::Between),
    ("IN", Tok::In),
    ("TRUE", Tok::True),
    ("FALSE", Tok::False),
    ("NULL", Tok::Null),
    ("IS", Tok::Is),
];

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b'$'
}

fn is_ident_part(b: u8) -> bool {
    is_ident_start(b) || b.is_ascii_digit()
}

/// Split `src` into tokens, ending with [`Tok::Eof`].
pub(crate) fn tokenize(src: &str) -> Result<Vec<Token>, SyntaxError> {
    let b = src.as_bytes();
    let err = |at: usize, msg: String| SyntaxError::new(SyntaxErrorKind::Lexical, src, at, msg);
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let c = b[i];
        let tok = match c {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0c => {
                i += 1;
                continue;
            }
            b'-' if b.get(i + 1) == Some(&b'-') && line_end(b, i).is_some() => {
                // A line comment needs its line terminator, as in the JavaCC grammar:
                // without one, `--5` is a double negation.
                i = line_end(b, i).unwrap_or(b.len());
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                match src[i + 2..].find("*/") {
                    Some(p) => i = i + 2 + p + 2,
                    None => return Err(err(start, "unterminated /* comment".into())),
                }
                continue;
            }
            b'\'' => {
                let (s, end) = lex_string(src, i).ok_or_else(|| {
                    err(
                        start,
                        "unterminated string literal (missing closing ')".into(),
                    )
                })?;
                i = end;
                Tok::Str(s)
            }
            b'0'..=b'9' | b'.' => {
                let (tok, end) = lex_number(src, i).map_err(|m| err(start, m))?;
                i = end;
                tok
            }
            _ if is_ident_start(c) => {
                while i < b.len() && is_ident_part(b[i]) {
                    i += 1;
                }
                let word = &src[start..i];
                KEYWORDS
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(word))
                    .map_or_else(|| Tok::Ident(word.to_string()), |(_, t)| t.clone())
            }
            _ => {
                let (tok, len) = match (c, b.get(i + 1)) {
                    (b'<', Some(b'>')) => (Tok::Ne, 2),
                    (b'<', Some(b'=')) => (Tok::Le, 2),
                    (b'>', Some(b'=')) => (Tok::Ge, 2),
                    (b'<', _) => (Tok::Lt, 1),
                    (b'>', _) => (Tok::Gt, 1),
                    (b'=', _) => (Tok::Eq, 1),
                    (b'(', _) => (Tok::LParen, 1),
                    (b')', _) => (Tok::RParen, 1),
                    (b',', _) => (Tok::Comma, 1),
                    (b'+', _) => (Tok::Plus, 1),
                    (b'-', _) => (Tok::Minus, 1),
                    _ => {
                        let ch = src[i..].chars().next().unwrap_or('?');
                        let hint = match ch {
                            '"' => " (string literals use single quotes)",
                            '!' => " (write <> for not-equal)",
                            _ => "",
                        };
                        return Err(err(start, format!("unexpected character {ch:?}{hint}")));
                    }
                };
                i += len;
                tok
            }
        };
        out.push(Token { tok, start });
    }
    out.push(Token {
        tok: Tok::Eof,
        start: src.len(),
    });
    Ok(out)
}

/// The offset just past the first line terminator at or after `from`.
fn line_end(b: &[u8], from: usize) -> Option<usize> {
    b[from..]
        .iter()
        .position(|&x| x == b'\n' || x == b'\r')
        .map(|p| from + p + 1)
}

/// A quoted string starting at `start`: its value (`''` unescaped) and the end offset.
fn lex_string(src: &str, start: usize) -> Option<(String, usize)> {
    let b = src.as_bytes();
    let mut value = String::new();
    let mut i = start + 1;
    let mut run = i;
    loop {
        let q = i + src.get(i..)?.find('\'')?;
        value.push_str(&src[run..q]);
        if b.get(q + 1) == Some(&b'\'') {
            value.push('\'');
            i = q + 2;
            run = i;
        } else {
            return Some((value, q + 1));
        }
    }
}

fn count_digits(b: &[u8], from: usize) -> usize {
    b[from..].iter().take_while(|c| c.is_ascii_digit()).count()
}

/// Length of a complete exponent (`e`, optional sign, digits) at `from`, or 0.
fn exponent_len(b: &[u8], from: usize) -> usize {
    if !matches!(b.get(from), Some(b'e' | b'E')) {
        return 0;
    }
    let sign = usize::from(matches!(b.get(from + 1), Some(b'+' | b'-')));
    let digits = count_digits(b, from + 1 + sign);
    if digits == 0 {
        0
    } else {
        1 + sign + digits
    }
}

/// A decimal or floating-point literal at `start` (a digit, or `.` before a digit).
fn lex_number(src: &str, start: usize) -> Result<(Tok, usize), String> {
    let b = src.as_bytes();
    let int_len = count_digits(b, start);
    let mut end = start + int_len;
    let is_float = if b.get(end) == Some(&b'.') {
        let frac = count_digits(b, end + 1);
        if int_len == 0 && frac == 0 {
            return Err("unexpected character '.'".into());
        }
        end += 1 + frac;
        end += exponent_len(b, end);
        true
    } else {
        let exp = exponent_len(b, end);
        end += exp;
        exp > 0
    };
    if is_float {
        let text = &src[start..end];
        let v: f64 = text.parse().map_err(|_| format!("bad number {text}"))?;
        if v.is_infinite() {
            return Err(format!("{text} is greater than the largest double"));
        }
        return Ok((Tok::Double(v), end));
    }
    if b[start] == b'0' {
        // JavaCC matches `0` alone: `007` is three literals, `0L` is `0` then `L`.
        return Ok((Tok::Long(0), start + 1));
    }
    let digits = &src[start..end];
    if matches!(b.get(end), Some(b'l' | b'L')) {
        end += 1;
    }
    let v: i64 = digits
        .parse()
        .map_err(|_| format!("{digits} is out of the range of a long"))?;
    Ok((Tok::Long(v), end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_follow_longest_match() {
        assert_eq!(toks("5L"), [Tok::Long(5), Tok::Eof]);
        assert_eq!(toks("5.e2"), [Tok::Double(500.0), Tok::Eof]);
        assert_eq!(toks("5e"), [Tok::Long(5), Tok::Ident("e".into()), Tok::Eof]);
        assert_eq!(
            toks("007"),
            [Tok::Long(0), Tok::Long(0), Tok::Long(7), Tok::Eof]
        );
        assert_eq!(toks("007.5"), [Tok::Double(7.5), Tok::Eof]);
        assert_eq!(toks(".5E+1"), [Tok::Double(5.0), Tok::Eof]);
        assert!(tokenize("9223372036854775808").is_err());
        assert!(tokenize("1e999").is_err());
    }

    #[test]
    fn strings_comments_and_keywords() {
        assert_eq!(toks("'it''s'"), [Tok::Str("it's".into()), Tok::Eof]);
        assert_eq!(toks("''"), [Tok::Str(String::new()), Tok::Eof]);
        assert_eq!(
            toks("a -- x\n/* y */ and"),
            [Tok::Ident("a".into()), Tok::And, Tok::Eof]
        );
        assert_eq!(
            toks("--5"),
            [Tok::Minus, Tok::Minus, Tok::Long(5), Tok::Eof]
        );
        assert_eq!(toks("Is nOt"), [Tok::Is, Tok::Not, Tok::Eof]);
        assert_eq!(toks("notx"), [Tok::Ident("notx".into()), Tok::Eof]);
        let e = tokenize("a = 'x").unwrap_err();
        assert_eq!(e.position.column, 5);
        assert!(tokenize("/* x").is_err());
        assert!(tokenize("a != 1").unwrap_err().message.contains("<>"));
    }
}
