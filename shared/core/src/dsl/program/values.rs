//! Actions, triggers, `set` clauses, conditions and literals -> their configs and
//! values: namespaced references, comparison and arithmetic ops, Python's numbers.

use indexmap::IndexMap;

use super::{py_repr, ActionCfg, InputCfg, OnEventCfg, PredCfg, TResult, Transform};
use crate::definition::{ArithOp, Assign, CmpOp, Expr, Source};
use crate::dsl::ast::{self, At, Lit, Operand, Pred};
use crate::pyvalue;
use crate::Value;

impl Transform<'_> {
    pub(super) fn action(&self, a: ast::Action) -> TResult<ActionCfg> {
        let mut inputs = IndexMap::new();
        for (k, v) in a.inputs {
            let v = match v {
                ast::InputVal::Lit(l) => InputCfg::Lit(self.lit(&l)?),
                ast::InputVal::Param(p) => InputCfg::Param(p),
            };
            inputs.insert(k, v);
        }
        Ok(ActionCfg::Spec {
            literal: a.target.dotted,
            name: a.target.text,
            inputs,
        })
    }

    pub(super) fn trigger(&self, t: Option<ast::Trigger>) -> TResult<Option<OnEventCfg>> {
        let Some(t) = t else { return Ok(None) };
        let pred = match &t.pred {
            Some(p) => Some(self.pred(p)?),
            None => None,
        };
        Ok(Some(OnEventCfg {
            kind: t.kinds.join("|"),
            kinds_pos: t.kinds_at.iter().map(|at| self.pos(*at)).collect(),
            pred,
        }))
    }

    pub(super) fn assigns(&self, set: Option<Vec<ast::Assignment>>) -> TResult<Vec<Assign>> {
        let mut out = Vec::new();
        for a in set.unwrap_or_default() {
            // the operands are transformed before the assignment itself
            let left = self.operand_expr(&a.left.0, a.left.1)?;
            let expr = match &a.arith {
                None => left,
                Some((op, right, rat)) => {
                    let right = self.operand_expr(right, *rat)?;
                    let op = match op {
                        '+' => ArithOp::Add,
                        '-' => ArithOp::Sub,
                        '*' => ArithOp::Mul,
                        _ => ArithOp::Div,
                    };
                    Expr::Arith {
                        op,
                        left: Box::new(left),
                        right: Box::new(right),
                    }
                }
            };
            let (source, field) = self.namespaced(&a.target, a.at)?;
            if source != Source::Context {
                return Err(self.err(
                    format!(
                        "`set` writes the execution context: {} must be `context.<field>`",
                        py_repr(&a.target)
                    ),
                    a.at,
                ));
            }
            out.push(Assign { field, expr });
        }
        Ok(out)
    }

    fn operand_expr(&self, op: &Operand, at: At) -> TResult<Expr> {
        Ok(match op {
            Operand::Dotted(d) => {
                let (source, field) = self.namespaced(d, at)?;
                Expr::Ref { source, field }
            }
            Operand::Lit(l) => Expr::Lit(self.lit(l)?),
            Operand::Field(f) => Expr::Lit(Value::String(f.clone())),
        })
    }

    /// harel's `_namespaced`: `event.x` / `context.x`, one field deep.
    fn namespaced(&self, r: &str, at: At) -> TResult<(Source, String)> {
        let (ns, field) = r.split_once('.').unwrap_or((r, ""));
        let source = match ns {
            "event" => Source::Event,
            "context" => Source::Context,
            _ => {
                return Err(self.err(
                    format!(
                        "unknown namespace {} in {}: use `event.<field>` or `context.<field>`",
                        py_repr(ns),
                        py_repr(r)
                    ),
                    at,
                ))
            }
        };
        if field.contains('.') {
            return Err(self.err(
                format!(
                    "{}: a reference names one field of `{ns}`, not a nested path",
                    py_repr(r)
                ),
                at,
            ));
        }
        Ok((source, field.to_string()))
    }

    pub(super) fn pred(&self, p: &Pred) -> TResult<PredCfg> {
        Ok(match p {
            Pred::Cmp { lhs, op, rhs, at } => {
                let (source, field) = match lhs {
                    Operand::Dotted(d) => self.namespaced(d, *at)?,
                    Operand::Field(f) => (Source::Event, f.clone()),
                    Operand::Lit(_) => (Source::Event, String::new()),
                };
                let op = cmp_op(op);
                match rhs {
                    Operand::Dotted(d) => {
                        let r = self.namespaced(d, *at)?;
                        PredCfg::Leaf {
                            source,
                            field,
                            op,
                            value: Value::Null,
                            value_ref: Some(r),
                        }
                    }
                    Operand::Lit(l) => PredCfg::Leaf {
                        source,
                        field,
                        op,
                        value: self.lit(l)?,
                        value_ref: None,
                    },
                    Operand::Field(f) => PredCfg::Leaf {
                        source,
                        field,
                        op,
                        value: Value::String(f.clone()),
                        value_ref: None,
                    },
                }
            }
            Pred::Guard(g) => PredCfg::Guard(g.clone()),
            Pred::All(v) => PredCfg::All(v.iter().map(|c| self.pred(c)).collect::<TResult<_>>()?),
            Pred::Any(v) => PredCfg::Any(v.iter().map(|c| self.pred(c)).collect::<TResult<_>>()?),
            Pred::Not(c) => PredCfg::Not(Box::new(self.pred(c)?)),
        })
    }

    /// harel's `_coerce` / `_lit`: a number with `.`, `e` or `E` is a float, else an int.
    pub(super) fn lit(&self, l: &Lit) -> TResult<Value> {
        Ok(match l {
            Lit::Str(s) => Value::String(s.clone()),
            Lit::Bool(b) => Value::Bool(*b),
            Lit::List(items) => Value::Array(items.iter().map(|i| self.lit(i)).collect::<TResult<_>>()?),
            Lit::Num(text, at) => {
                if text.contains(['.', 'e', 'E']) {
                    // Python's float(): `1e400` is inf
                    let f: f64 = text
                        .parse()
                        .map_err(|_| self.err(format!("invalid number `{text}`"), *at))?;
                    pyvalue::float(f)
                } else {
                    crate::pynum::int_value(text).ok_or_else(|| {
                        self.err(
                            format!("the integer `{text}` has more than 4300 digits, more than Python reads"),
                            *at,
                        )
                    })?
                }
            }
        })
    }
}

fn cmp_op(s: &str) -> CmpOp {
    match s {
        "==" => CmpOp::Eq,
        "!=" => CmpOp::Ne,
        "<" => CmpOp::Lt,
        "<=" => CmpOp::Le,
        ">" => CmpOp::Gt,
        ">=" => CmpOp::Ge,
        _ => CmpOp::In,
    }
}
