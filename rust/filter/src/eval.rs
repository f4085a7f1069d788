//! Evaluation with RocketMQ's null rules: a comparison with a missing property is null,
//! `AND`/`OR`/`NOT` are three-valued, and a message matches only when the result is TRUE.
//! Short-circuits follow the Java order exactly, since an [`EvalError`] on a branch that
//! Java never evaluates must not fail the message either.

use crate::ast::{CmpOp, Node};
use crate::error::EvalError;
use crate::value::{compare, compare_ordered, Value};

type Result<T> = std::result::Result<T, EvalError>;

fn bool_or_null(v: Option<bool>) -> Value<'static> {
    v.map_or(Value::Null, Value::Bool)
}

pub(crate) fn eval<'a>(node: &'a Node, slots: &[Option<&'a str>]) -> Result<Value<'a>> {
    let prop = |slot: &usize| slots.get(*slot).copied().flatten();
    Ok(match node {
        Node::Lit(l) => l.value(),
        Node::Prop(s) => prop(s).map_or(Value::Null, Value::Str),
        Node::BoolCast(s) => bool_or_null(prop(s).map(|_| false)),
        Node::Neg(x) => match eval(x, slots)? {
            Value::Long(v) => Value::Long(v.wrapping_neg()),
            Value::Double(v) => Value::Double(-v),
            _ => Value::Null,
        },
        Node::Not(x) => bool_or_null(eval(x, slots)?.truth().map(|b| !b)),
        Node::And(l, r) => and(l, r, slots)?,
        Node::Or(l, r) => or(l, r, slots)?,
        Node::Cmp(op, l, r) => cmp(*op, l, r, slots)?,
        Node::Equal {
            negated,
            left,
            right,
        } => {
            let eq = equal(eval(left, slots)?, eval(right, slots)?)?;
            bool_or_null(eq.map(|b| b != *negated))
        }
        Node::IsNull { negated, operand } => {
            Value::Bool(eval(operand, slots)?.is_null() != *negated)
        }
        Node::Between {
            negated: false,
            value,
            low,
            high,
        } => {
            let ge = cmp(CmpOp::Ge, value, low, slots)?.truth();
            if ge == Some(false) {
                return Ok(Value::Bool(false));
            }
            let le = cmp(CmpOp::Le, value, high, slots)?.truth();
            bool_or_null(three_valued_and(ge, le))
        }
        Node::Between {
            negated: true,
            value,
            low,
            high,
        } => {
            let lt = cmp(CmpOp::Lt, value, low, slots)?.truth();
            if lt == Some(true) {
                return Ok(Value::Bool(true));
            }
            let gt = cmp(CmpOp::Gt, value, high, slots)?.truth();
            bool_or_null(three_valued_or(lt, gt))
        }
        Node::In {
            negated,
            slot,
            list,
        } => bool_or_null(prop(slot).map(|v| list.contains(v) != *negated)),
    })
}

fn three_valued_and(l: Option<bool>, r: Option<bool>) -> Option<bool> {
    match (l, r) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn three_valued_or(l: Option<bool>, r: Option<bool>) -> Option<bool> {
    match (l, r) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

/// `LogicExpression.createAND`: FALSE on the left skips the right.
fn and<'a>(l: &'a Node, r: &'a Node, slots: &[Option<&'a str>]) -> Result<Value<'a>> {
    let lv = eval(l, slots)?.truth();
    if lv == Some(false) {
        return Ok(Value::Bool(false));
    }
    let rv = eval(r, slots)?.truth();
    Ok(bool_or_null(three_valued_and(lv, rv)))
}

/// `LogicExpression.createOR`: TRUE on the left skips the right.
fn or<'a>(l: &'a Node, r: &'a Node, slots: &[Option<&'a str>]) -> Result<Value<'a>> {
    let lv = eval(l, slots)?.truth();
    if lv == Some(true) {
        return Ok(Value::Bool(true));
    }
    let rv = eval(r, slots)?.truth();
    Ok(bool_or_null(three_valued_or(lv, rv)))
}

/// `ComparisonExpression.evaluate`: a null left skips the right.
fn cmp<'a>(op: CmpOp, l: &'a Node, r: &'a Node, slots: &[Option<&'a str>]) -> Result<Value<'a>> {
    let lv = eval(l, slots)?;
    if lv.is_null() {
        return Ok(Value::Null);
    }
    let rv = eval(r, slots)?;
    if rv.is_null() {
        return Ok(Value::Null);
    }
    let ord = compare_ordered(lv, rv)?;
    Ok(Value::Bool(match op {
        CmpOp::Gt => ord.is_gt(),
        CmpOp::Ge => ord.is_ge(),
        CmpOp::Lt => ord.is_lt(),
        CmpOp::Le => ord.is_le(),
    }))
}

/// `doCreateEqual`: null = null is TRUE, null = x is null, x = null is FALSE.
fn equal(lv: Value<'_>, rv: Value<'_>) -> Result<Option<bool>> {
    Ok(match (lv.is_null(), rv.is_null()) {
        (true, true) => Some(true),
        (true, false) => None,
        (false, true) => Some(false),
        (false, false) => Some(compare(lv, rv)?.is_eq()),
    })
}
