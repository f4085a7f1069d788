//! Errors: a malformed expression ([`SyntaxError`], with the position of the offending token)
//! and bloom-filter parameters out of range ([`BloomConfigError`]).

use std::fmt;

/// Where in the expression an error was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Byte offset into the expression.
    pub offset: usize,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` in `src` (clamped to the end; snapped back to a char boundary).
    pub fn at(src: &str, offset: usize) -> Position {
        let mut offset = offset.min(src.len());
        while !src.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &src[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        Position {
            offset,
            line,
            column,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// What kind of mistake a [`SyntaxError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyntaxErrorKind {
    /// A character or literal that is no token: `#`, an unterminated string, `99999999999999999999`.
    Lexical,
    /// Tokens in an order the grammar does not allow: `a >`, `a IN ()`, `(a = 1`.
    Grammar,
    /// Well-formed but meaningless, rejected when compiling as RocketMQ does:
    /// `'x' > 1`, `a = NULL`, `5 AND a`, `a BETWEEN 9 AND 1`, `5 IN ('x')`.
    Type,
    /// Nested deeper than [`crate::MAX_NESTING`] or [`crate::MAX_DEPTH`].
    TooDeep,
}

impl fmt::Display for SyntaxErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyntaxErrorKind::Lexical => "lexical error",
            SyntaxErrorKind::Grammar => "syntax error",
            SyntaxErrorKind::Type => "type error",
            SyntaxErrorKind::TooDeep => "expression too deep",
        })
    }
}

/// A malformed SQL92 expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid SQL92 expression, {kind} at {position}: {message}")]
pub struct SyntaxError {
    pub kind: SyntaxErrorKind,
    pub position: Position,
    pub message: String,
}

impl SyntaxError {
    pub(crate) fn new(
        kind: SyntaxErrorKind,
        src: &str,
        offset: usize,
        message: impl Into<String>,
    ) -> Self {
        SyntaxError {
            kind,
            position: Position::at(src, offset),
            message: message.into(),
        }
    }
}

/// Bloom filter parameters out of range (RocketMQ's `BloomFilter.createByFn` checks).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BloomConfigError {
    #[error("bloom filter error rate must be in 1..100 percent, got {0}")]
    ErrorRate(u32),
    #[error("bloom filter expected entry count must be at least 1, got {0}")]
    Expected(u32),
    #[error("bloom filter is too large: {0} bits")]
    TooLarge(u64),
    #[error("bloom filter needs k >= 1 hashes and m >= 8 bits, got k = {k}, m = {m}")]
    Shape { k: u32, m: u32 },
}

/// Why an evaluation failed. RocketMQ logs the exception and the message does not match, so
/// every public `matches*` call maps this to `false`; [`crate::Sql92Filter::evaluate`] exposes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A string compared with a number does not parse as one (Java's `NumberFormatException`).
    #[error("a property value is not a number")]
    NotANumber,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_counts_lines_and_chars() {
        let src = "a = 'é'\n AND #";
        let p = Position::at(src, src.find('#').unwrap());
        assert_eq!((p.line, p.column), (2, 6));
        assert_eq!(Position::at(src, 6).column, 6); // inside 'é' snaps back to its start
        assert_eq!(Position::at(src, 999).offset, src.len());
    }
}
