//! The compiled expression tree. Property references are slots into the filter's table of
//! property names, so a message's values are looked up once per evaluation, not per use.
//!
//! Each node mirrors one RocketMQ expression class; the comments name the Java factory.

use std::collections::HashSet;
use std::fmt::{self, Write};

/// A literal (`ConstantExpression`). Integers are Java `long`s; decimals are `double`s.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    Null,
    Bool(bool),
    Long(i64),
    Double(f64),
    Str(Box<str>),
}

/// `>`, `>=`, `<`, `<=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CmpOp {
    Gt,
    Ge,
    Lt,
    Le,
}

impl CmpOp {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
        }
    }
}

/// The string set of an `IN` list: source order for display, a hash set once it is long.
#[derive(Debug, Clone)]
pub(crate) struct InList {
    pub items: Vec<Box<str>>,
    pub set: Option<HashSet<Box<str>>>,
}

impl InList {
    /// Lists up to this length are searched linearly.
    const LINEAR_MAX: usize = 8;

    pub(crate) fn new(items: Vec<Box<str>>) -> Self {
        let set = (items.len() > Self::LINEAR_MAX).then(|| items.iter().cloned().collect());
        InList { items, set }
    }

    pub(crate) fn contains(&self, v: &str) -> bool {
        match &self.set {
            Some(set) => set.contains(v),
            None => self.items.iter().any(|s| &**s == v),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Node {
    Lit(Lit),
    /// A property value (`PropertyExpression`): a string, or null when absent.
    Prop(usize),
    /// A property used as a boolean (`UnaryExpression.createBooleanCast`): null when absent,
    /// else false (a property value is a string, never a boolean).
    BoolCast(usize),
    /// Unary minus (`createNegate`): a number negated, anything else null.
    Neg(Box<Node>),
    Not(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cmp(CmpOp, Box<Node>, Box<Node>),
    /// `=` (`createEqual`); `<>` is its negation (`createNotEqual`).
    Equal {
        negated: bool,
        left: Box<Node>,
        right: Box<Node>,
    },
    /// `IS NULL`, `IS NOT NULL`.
    IsNull {
        negated: bool,
        operand: Box<Node>,
    },
    /// `v BETWEEN lo AND hi` = `v >= lo AND v <= hi`; `NOT BETWEEN` = `v < lo OR v > hi`.
    Between {
        negated: bool,
        value: Box<Node>,
        low: Box<Node>,
        high: Box<Node>,
    },
    /// `prop IN ('a', ...)`, `prop NOT IN (...)` (`UnaryInExpression`).
    In {
        negated: bool,
        slot: usize,
        list: Box<InList>,
    },
}

impl Node {
    /// A `BooleanExpression` in RocketMQ's class hierarchy: usable under AND/OR/NOT.
    pub(crate) fn is_boolean(&self) -> bool {
        match self {
            Node::Lit(l) => matches!(l, Lit::Bool(_) | Lit::Null),
            Node::Prop(_) | Node::Neg(_) => false,
            _ => true,
        }
    }
}

pub(crate) fn write_lit(out: &mut impl Write, lit: &Lit) -> fmt::Result {
    match lit {
        Lit::Null => out.write_str("NULL"),
        Lit::Bool(true) => out.write_str("TRUE"),
        Lit::Bool(false) => out.write_str("FALSE"),
        Lit::Long(v) => write!(out, "{v}"),
        Lit::Double(v) => write!(out, "{v:?}"),
        Lit::Str(s) => write_quoted(out, s),
    }
}

fn write_quoted(out: &mut impl Write, s: &str) -> fmt::Result {
    write!(out, "'{}'", s.replace('\'', "''"))
}

/// Write `node` fully parenthesized, naming properties from `names`.
pub(crate) fn write_node(out: &mut impl Write, node: &Node, names: &[String]) -> fmt::Result {
    let name = |slot: &usize| names.get(*slot).map_or("?", String::as_str);
    match node {
        Node::Lit(l) => write_lit(out, l),
        Node::Prop(s) | Node::BoolCast(s) => out.write_str(name(s)),
        Node::Neg(x) => {
            out.write_str("(-")?;
            write_node(out, x, names)?;
            out.write_str(")")
        }
        Node::Not(x) => {
            out.write_str("(NOT ")?;
            write_node(out, x, names)?;
            out.write_str(")")
        }
        Node::And(l, r) => write_binary(out, l, "AND", r, names),
        Node::Or(l, r) => write_binary(out, l, "OR", r, names),
        Node::Cmp(op, l, r) => write_binary(out, l, op.symbol(), r, names),
        Node::Equal {
            negated,
            left,
            right,
        } => write_binary(out, left, if *negated { "<>" } else { "=" }, right, names),
        Node::IsNull { negated, operand } => {
            out.write_str("(")?;
            write_node(out, operand, names)?;
            out.write_str(if *negated {
                " IS NOT NULL)"
            } else {
                " IS NULL)"
            })
        }
        Node::Between {
            negated,
            value,
            low,
            high,
        } => {
            out.write_str("(")?;
            write_node(out, value, names)?;
            out.write_str(if *negated {
                " NOT BETWEEN "
            } else {
                " BETWEEN "
            })?;
            write_node(out, low, names)?;
            out.write_str(" AND ")?;
            write_node(out, high, names)?;
            out.write_str(")")
        }
        Node::In {
            negated,
            slot,
            list,
        } => {
            write!(out, "({}", name(slot))?;
            out.write_str(if *negated { " NOT IN (" } else { " IN (" })?;
            for (i, item) in list.items.iter().enumerate() {
                if i > 0 {
                    out.write_str(", ")?;
                }
                write_quoted(out, item)?;
            }
            out.write_str("))")
        }
    }
}

fn write_binary(
    out: &mut impl Write,
    l: &Node,
    op: &str,
    r: &Node,
    names: &[String],
) -> fmt::Result {
    out.write_str("(")?;
    write_node(out, l, names)?;
    write!(out, " {op} ")?;
    write_node(out, r, names)?;
    out.write_str(")")
}
