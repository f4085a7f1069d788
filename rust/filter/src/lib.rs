//! RocketMQ's SQL92 message filter (`MessageSelector.bySql`, expression type `SQL92`), in pure
//! Rust: a parser and evaluator for RocketMQ 4.9's selector grammar over message properties,
//! and the bloom-filter bitmaps RocketMQ stores per message in `ConsumeQueueExt` so the pull
//! path can skip non-matching messages without evaluating them.
//!
//! ```
//! use rmq_filter::{encode_properties, Sql92Filter};
//!
//! let f = Sql92Filter::compile("a > 5 AND b = 'x'").unwrap();
//! assert!(f.matches_properties(&encode_properties([("a", "6"), ("b", "x")])));
//! assert!(!f.matches_properties(&encode_properties([("a", "5"), ("b", "x")])));
//! assert!(!f.matches_properties("")); // a missing property makes the comparison null
//! assert!(Sql92Filter::compile("a >").is_err());
//! ```
//!
//! Semantics are RocketMQ 4.9.8's (`filter/expression/*`): `tests/oracle.rs` replays answers
//! recorded from RocketMQ's own Java filter, and `oracle/` holds the differential harness that
//! recorded them. The grammar and its precedence are documented in `src/parser.rs`; 4.9.x has
//! no `CONTAINS`/`STARTSWITH`/`ENDSWITH` (those came with 5.x) and neither has this crate.
//!
//! | module | concept |
//! | --- | --- |
//! | `lexer`, `parser`, `ast` | tokens, grammar and compile-time checks, the expression tree |
//! | `value`, `eval` | Java's conversions and comparisons, three-valued evaluation |
//! | `properties` | reading `k\x01v\x02` property strings without a map |
//! | `murmur3`, `bloom` | RocketMQ's bloom filter: group positions, bitmaps |
//! | `filter_set` | the filters of one topic: a message's bitmap in one call |
//!
//! Deliberate differences, each where RocketMQ's behaviour is an accident:
//! - tokens after a complete expression are an error (RocketMQ ignores them: `a > 1 b`);
//! - a decimal literal of 0 (`0.0`) is accepted (RocketMQ rejects any float literal below
//!   `Double.MIN_VALUE`, so `a > 0.0` fails to compile there);
//! - a string compared with an integer literal parses as a `long` (RocketMQ narrows literals
//!   that fit an `int` and parses the string with `Integer.valueOf`, so `a > 5` fails for
//!   `a = '3000000000'`);
//! - `TRUE = a` compares like `a = TRUE` (RocketMQ throws a `ClassCastException`).

mod ast;
mod bloom;
mod error;
mod eval;
mod filter_set;
mod lexer;
mod murmur3;
mod parser;
mod properties;
mod value;

use std::fmt;

pub use bloom::{
    bit_positions, bloom_key, get_bit, set_bit, BitsArray, BloomFilter, BloomPositions,
};
pub use error::{BloomConfigError, EvalError, Position, SyntaxError, SyntaxErrorKind};
pub use filter_set::{FilterEntry, FilterSet};
pub use murmur3::murmur3_x64_128;
pub use properties::{
    encode_properties, properties_iter, property, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR,
};

/// The expression type name a client sends in its subscription (`ExpressionType.SQL92`).
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

/// Deepest tree an expression may compile to (operator chains count: `a AND b AND c` is 3
/// deep), so that evaluating it cannot exhaust the stack.
pub const MAX_DEPTH: usize = 128;

/// Most parentheses and unary operators (`NOT`, `-`, `+`) an expression may nest, so that the
/// recursive parser stays within a small thread stack (about 13 KiB per level unoptimized).
pub const MAX_NESTING: usize = 32;

/// Property slots held on the stack during an evaluation; more spill to the heap.
const INLINE_SLOTS: usize = 8;

/// A compiled SQL92 expression. Cheap to evaluate, `Send + Sync`, immutable.
#[derive(Debug, Clone)]
pub struct Sql92Filter {
    source: String,
    root: ast::Node,
    names: Vec<String>,
}

/// Compile `expression` (same as [`Sql92Filter::compile`]).
pub fn compile(expression: &str) -> Result<Sql92Filter, SyntaxError> {
    Sql92Filter::compile(expression)
}

impl Sql92Filter {
    /// Parse and check `expression`; a malformed one gives a [`SyntaxError`] with the
    /// position of the offending token.
    pub fn compile(expression: &str) -> Result<Self, SyntaxError> {
        let parsed = parser::parse(expression)?;
        Ok(Sql92Filter {
            source: expression.to_string(),
            root: parsed.root,
            names: parsed.names,
        })
    }

    /// The source text it was compiled from.
    pub fn expression(&self) -> &str {
        &self.source
    }

    /// The distinct property names it reads, in order of first use.
    pub fn property_names(&self) -> &[String] {
        &self.names
    }

    /// The expression fully parenthesized, keywords upper-case: shows how it parsed.
    pub fn canonical(&self) -> String {
        self.to_string()
    }

    /// Evaluate with `slots[i]` the value of `property_names()[i]`.
    pub(crate) fn eval_slots<'a>(
        &'a self,
        slots: &[Option<&'a str>],
    ) -> Result<Option<bool>, EvalError> {
        eval::eval(&self.root, slots).map(|v| v.truth())
    }

    fn with_slots<'a, R>(&self, fill: impl FnOnce(&mut [Option<&'a str>]) -> R) -> R {
        let n = self.names.len();
        if n <= INLINE_SLOTS {
            let mut slots = [None; INLINE_SLOTS];
            fill(&mut slots[..n])
        } else {
            fill(&mut vec![None; n])
        }
    }

    /// The three-valued result (`None` = SQL null) with property values from `lookup`, or
    /// the error RocketMQ would log. Only `Ok(Some(true))` matches.
    pub fn evaluate<'p, F>(&self, mut lookup: F) -> Result<Option<bool>, EvalError>
    where
        F: FnMut(&str) -> Option<&'p str>,
    {
        self.with_slots(|slots| {
            for (slot, name) in slots.iter_mut().zip(&self.names) {
                *slot = lookup(name);
            }
            self.eval_slots(slots)
        })
    }

    /// Whether a message with property values from `lookup` matches.
    pub fn matches<'p, F>(&self, lookup: F) -> bool
    where
        F: FnMut(&str) -> Option<&'p str>,
    {
        self.evaluate(lookup) == Ok(Some(true))
    }

    /// [`Self::evaluate`] over a stored property string (`k\x01v\x02k\x01v...`), read in one
    /// pass without building a map.
    pub fn evaluate_properties(&self, properties: &str) -> Result<Option<bool>, EvalError> {
        self.with_slots(|slots| {
            properties::fill_slots(properties, &self.names, slots);
            self.eval_slots(slots)
        })
    }

    /// Whether a message with the stored property string `properties` matches.
    pub fn matches_properties(&self, properties: &str) -> bool {
        self.evaluate_properties(properties) == Ok(Some(true))
    }
}

impl fmt::Display for Sql92Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        ast::write_node(f, &self.root, &self.names)
    }
}

/// Whether a message with the stored property string `properties` matches `filter`.
pub fn evaluate_properties(filter: &Sql92Filter, properties: &str) -> bool {
    filter.matches_properties(properties)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn filter_is_shareable() {
        assert_send_sync::<Sql92Filter>();
        assert_send_sync::<FilterSet>();
    }

    #[test]
    fn lookup_and_property_string_agree() {
        let f = compile("a > 5 AND b = 'x' OR c IS NULL").unwrap();
        assert_eq!(f.property_names(), ["a", "b", "c"]);
        let props = encode_properties([("a", "6"), ("b", "x"), ("c", "1")]);
        assert!(f.matches_properties(&props));
        assert!(f.matches(|k| property(&props, k)));
        assert!(evaluate_properties(&f, &props));
        assert_eq!(f.evaluate(|_| None), Ok(Some(true)));
        assert_eq!(f.evaluate(|k| (k == "c").then_some("1")), Ok(None));
    }

    #[test]
    fn many_properties_spill_to_the_heap() {
        let names: Vec<String> = (0..20).map(|i| format!("p{i}")).collect();
        let expr = names
            .iter()
            .map(|n| format!("{n} = 'v'"))
            .collect::<Vec<_>>()
            .join(" AND ");
        let f = compile(&expr).unwrap();
        let props = encode_properties(names.iter().map(|n| (n.as_str(), "v")));
        assert!(f.matches_properties(&props));
        assert!(!f.matches_properties(&props.replace("p19\u{1}v", "p19\u{1}w")));
    }
}
