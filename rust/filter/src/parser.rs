//! Recursive-descent parser for RocketMQ's SQL92 grammar (`SelectorParser.jj`, 4.9.x), with
//! the compile-time checks of RocketMQ's expression factories.
//!
//! Precedence, loosest first (each level left-associative and chainable):
//!
//! ```text
//! or          := and ( OR and )*
//! and         := equality ( AND equality )*
//! equality    := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
//! comparison  := unary ( ('>'|'>='|'<'|'<=') unary
//!                      | [NOT] BETWEEN unary AND unary
//!                      | [NOT] IN '(' string ( ',' string )* ')' )*
//! unary       := '+' unary | '-' unary | NOT unary | primary
//! primary     := literal | property | '(' or ')'
//! ```
//!
//! `NOT` binds tighter than comparisons, as in RocketMQ: `NOT a > 1` is `(NOT a) > 1`, which
//! is rejected; write `NOT (a > 1)`. Unlike RocketMQ, tokens left over after a complete
//! expression are an error rather than silently ignored.

use crate::ast::{CmpOp, InList, Lit, Node};
use crate::error::{SyntaxError, SyntaxErrorKind};
use crate::lexer::{tokenize, Tok, Token};
use crate::value::compare;
use crate::{MAX_DEPTH, MAX_NESTING};

/// A parsed expression: the boolean root and the property names its slots refer to.
pub(crate) struct Parsed {
    pub root: Node,
    pub names: Vec<String>,
}

pub(crate) fn parse(src: &str) -> Result<Parsed, SyntaxError> {
    let mut p = Parser {
        src,
        toks: tokenize(src)?,
        pos: 0,
        names: Vec::new(),
        nesting: 0,
    };
    let e = p.or_expr()?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected("the end of the expression (or AND, OR)"));
    }
    let root = p.as_boolean(e)?;
    Ok(Parsed {
        root: root.node,
        names: p.names,
    })
}

/// A node under construction: its tree depth and where its source starts.
struct Expr {
    node: Node,
    depth: usize,
    start: usize,
}

struct Parser<'s> {
    src: &'s str,
    toks: Vec<Token>,
    pos: usize,
    names: Vec<String>,
    nesting: usize,
}

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek2(&self) -> &Tok {
        &self.toks[(self.pos + 1).min(self.toks.len() - 1)].tok
    }

    fn start(&self) -> usize {
        self.toks[self.pos].start
    }

    fn bump(&mut self) -> Tok {
        let t = self.toks[self.pos].tok.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    #[cold]
    #[inline(never)]
    fn error(&self, kind: SyntaxErrorKind, at: usize, msg: impl Into<String>) -> SyntaxError {
        SyntaxError::new(kind, self.src, at, msg)
    }

    #[cold]
    #[inline(never)]
    fn unexpected(&self, expected: &str) -> SyntaxError {
        self.error(
            SyntaxErrorKind::Grammar,
            self.start(),
            format!("expected {expected}, found {}", self.peek().describe()),
        )
    }

    fn expect(&mut self, tok: Tok, expected: &str) -> Result<(), SyntaxError> {
        if *self.peek() == tok {
            self.bump();
            Ok(())
        } else {
            Err(self.unexpected(expected))
        }
    }

    /// A node over `children`, rejected if the tree grows deeper than [`MAX_DEPTH`].
    fn make(&self, node: Node, start: usize, children: &[usize]) -> Result<Expr, SyntaxError> {
        let depth = 1 + children.iter().copied().max().unwrap_or(0);
        if depth > MAX_DEPTH {
            return Err(self.error(
                SyntaxErrorKind::TooDeep,
                start,
                format!("expression nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        Ok(Expr { node, depth, start })
    }

    fn show(&self, node: &Node) -> String {
        let mut s = String::new();
        let _ = crate::ast::write_node(&mut s, node, &self.names);
        s
    }

    #[cold]
    #[inline(never)]
    fn type_error(&self, at: usize, msg: String) -> SyntaxError {
        self.error(SyntaxErrorKind::Type, at, msg)
    }

    /// `asBooleanExpression`: a boolean expression as is, a property cast to boolean.
    fn as_boolean(&self, e: Expr) -> Result<Expr, SyntaxError> {
        match e.node {
            Node::Prop(slot) => Ok(Expr {
                node: Node::BoolCast(slot),
                ..e
            }),
            ref n if n.is_boolean() => Ok(e),
            ref n => Err(self.type_error(
                e.start,
                format!("{} is not a boolean expression", self.show(n)),
            )),
        }
    }

    /// `checkLessThanOperand`: only numbers, properties and negations can be ordered.
    fn check_orderable(&self, e: &Expr, op: &str) -> Result<(), SyntaxError> {
        let ok = match &e.node {
            Node::Lit(l) => matches!(l, Lit::Long(_) | Lit::Double(_)),
            n => !n.is_boolean(),
        };
        if ok {
            Ok(())
        } else {
            Err(self.type_error(
                e.start,
                format!(
                    "{} cannot be compared with {op} (only numbers and properties can)",
                    self.show(&e.node)
                ),
            ))
        }
    }

    /// `checkEqualOperand` and `checkEqualOperandCompatability`.
    fn check_equal(&self, l: &Expr, r: &Expr, op: &str) -> Result<(), SyntaxError> {
        for e in [l, r] {
            if let Node::Lit(Lit::Null) = e.node {
                return Err(self.type_error(
                    e.start,
                    format!("NULL cannot be compared with {op}; use IS NULL or IS NOT NULL"),
                ));
            }
        }
        if let (Node::Lit(Lit::Bool(_)), Node::Lit(lr)) = (&l.node, &r.node) {
            if !matches!(lr, Lit::Bool(_)) {
                return Err(self.type_error(
                    l.start,
                    format!(
                        "{} cannot be compared with {}",
                        self.show(&l.node),
                        self.show(&r.node)
                    ),
                ));
            }
        }
        Ok(())
    }

    fn slot(&mut self, name: String) -> usize {
        match self.names.iter().position(|n| *n == name) {
            Some(i) => i,
            None => {
                self.names.push(name);
                self.names.len() - 1
            }
        }
    }

    fn or_expr(&mut self) -> Result<Expr, SyntaxError> {
        let mut left = self.and_expr()?;
        while *self.peek() == Tok::Or {
            self.bump();
            let right = self.and_expr()?;
            let (l, r) = (self.as_boolean(left)?, self.as_boolean(right)?);
            let node = Node::Or(Box::new(l.node), Box::new(r.node));
            left = self.make(node, l.start, &[l.depth, r.depth])?;
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Expr, SyntaxError> {
        let mut left = self.equality()?;
        while *self.peek() == Tok::And {
            self.bump();
            let right = self.equality()?;
            let (l, r) = (self.as_boolean(left)?, self.as_boolean(right)?);
            let node = Node::And(Box::new(l.node), Box::new(r.node));
            left = self.make(node, l.start, &[l.depth, r.depth])?;
        }
        Ok(left)
    }

    fn equality(&mut self) -> Result<Expr, SyntaxError> {
        let mut left = self.comparison()?;
        loop {
            match self.peek() {
                Tok::Eq | Tok::Ne => {
                    let negated = self.bump() == Tok::Ne;
                    let right = self.comparison()?;
                    self.check_equal(&left, &right, if negated { "<>" } else { "=" })?;
                    let node = Node::Equal {
                        negated,
                        left: Box::new(left.node),
                        right: Box::new(right.node),
                    };
                    left = self.make(node, left.start, &[left.depth, right.depth])?;
                }
                Tok::Is => {
                    self.bump();
                    let negated = *self.peek() == Tok::Not;
                    if negated {
                        self.bump();
                    }
                    self.expect(Tok::Null, "NULL or NOT NULL after IS")?;
                    let node = Node::IsNull {
                        negated,
                        operand: Box::new(left.node),
                    };
                    left = self.make(node, left.start, &[left.depth])?;
                }
                _ => return Ok(left),
            }
        }
    }

    fn comparison(&mut self) -> Result<Expr, SyntaxError> {
        let mut left = self.unary()?;
        loop {
            let op = match self.peek() {
                Tok::Gt => Some(CmpOp::Gt),
                Tok::Ge => Some(CmpOp::Ge),
                Tok::Lt => Some(CmpOp::Lt),
                Tok::Le => Some(CmpOp::Le),
                _ => None,
            };
            if let Some(op) = op {
                self.bump();
                let right = self.unary()?;
                self.check_orderable(&left, op.symbol())?;
                self.check_orderable(&right, op.symbol())?;
                let node = Node::Cmp(op, Box::new(left.node), Box::new(right.node));
                left = self.make(node, left.start, &[left.depth, right.depth])?;
                continue;
            }
            let negated =
                *self.peek() == Tok::Not && matches!(self.peek2(), Tok::Between | Tok::In);
            if negated {
                self.bump();
            }
            match self.peek() {
                Tok::Between => left = self.between(left, negated)?,
                Tok::In => left = self.in_list(left, negated)?,
                _ => return Ok(left),
            }
        }
    }

    fn between(&mut self, value: Expr, negated: bool) -> Result<Expr, SyntaxError> {
        self.bump();
        let low = self.unary()?;
        self.expect(Tok::And, "AND between the bounds of BETWEEN")?;
        let high = self.unary()?;
        for e in [&value, &low, &high] {
            self.check_orderable(e, "BETWEEN")?;
        }
        if let (false, Node::Lit(lo), Node::Lit(hi)) = (negated, &low.node, &high.node) {
            // `createBetween` rejects constant bounds out of order.
            if compare(hi.value(), lo.value()) == Ok(std::cmp::Ordering::Less) {
                return Err(self.type_error(
                    low.start,
                    format!(
                        "BETWEEN bounds out of order: {} is greater than {}",
                        self.show(&low.node),
                        self.show(&high.node)
                    ),
                ));
            }
        }
        let node = Node::Between {
            negated,
            value: Box::new(value.node),
            low: Box::new(low.node),
            high: Box::new(high.node),
        };
        self.make(node, value.start, &[value.depth, low.depth, high.depth])
    }

    fn in_list(&mut self, left: Expr, negated: bool) -> Result<Expr, SyntaxError> {
        let in_at = self.start();
        self.bump();
        let Node::Prop(slot) = left.node else {
            return Err(self.type_error(
                in_at,
                format!(
                    "IN needs a property on its left, got {}",
                    self.show(&left.node)
                ),
            ));
        };
        self.expect(Tok::LParen, "'(' after IN")?;
        let mut items = Vec::new();
        loop {
            let Tok::Str(item) = self.peek() else {
                return Err(self.unexpected("a string literal in the IN list"));
            };
            items.push(item.as_str().into());
            self.bump();
            match self.peek() {
                Tok::Comma => {
                    self.bump();
                }
                Tok::RParen => {
                    self.bump();
                    break;
                }
                _ => return Err(self.unexpected("',' or ')' in the IN list")),
            }
        }
        let node = Node::In {
            negated,
            slot,
            list: Box::new(InList::new(items)),
        };
        self.make(node, left.start, &[left.depth])
    }

    fn unary(&mut self) -> Result<Expr, SyntaxError> {
        // One level for the operand itself, one per enclosing parenthesis or unary operator.
        self.nesting += 1;
        let result = if self.nesting > MAX_NESTING + 1 {
            Err(self.error(
                SyntaxErrorKind::TooDeep,
                self.start(),
                format!("more than {MAX_NESTING} nested parentheses or unary operators"),
            ))
        } else {
            self.unary_inner()
        };
        self.nesting -= 1;
        result
    }

    fn unary_inner(&mut self) -> Result<Expr, SyntaxError> {
        let start = self.start();
        match self.peek() {
            Tok::Plus => {
                self.bump();
                self.unary()
            }
            Tok::Minus => {
                self.bump();
                let e = self.unary()?;
                self.make(Node::Neg(Box::new(e.node)), start, &[e.depth])
            }
            Tok::Not => {
                self.bump();
                let e = self.unary()?;
                let e = self.as_boolean(e)?;
                self.make(Node::Not(Box::new(e.node)), start, &[e.depth])
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Result<Expr, SyntaxError> {
        let start = self.start();
        let node = match self.peek() {
            Tok::Long(v) => Node::Lit(Lit::Long(*v)),
            Tok::Double(v) => Node::Lit(Lit::Double(*v)),
            Tok::Str(s) => Node::Lit(Lit::Str(s.as_str().into())),
            Tok::True => Node::Lit(Lit::Bool(true)),
            Tok::False => Node::Lit(Lit::Bool(false)),
            Tok::Null => Node::Lit(Lit::Null),
            Tok::Ident(name) => {
                let name = name.clone();
                Node::Prop(self.slot(name))
            }
            Tok::LParen => {
                self.bump();
                let e = self.or_expr()?;
                self.expect(Tok::RParen, "')'")?;
                return Ok(Expr { start, ..e });
            }
            _ => return Err(self.unexpected("a property, a literal or '('")),
        };
        self.bump();
        self.make(node, start, &[])
    }
}
