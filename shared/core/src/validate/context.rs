//! Machine-wide checks of the context: the fields guards, `set`s and `with`/`invoke`
//! read or write must be declared, compared and assigned values must fit their types,
//! and declared defaults must fit theirs.

use super::reads::{
    all_assignments, expr_refs, guard_leaves, is_numeric_op, is_unordered, kinds, leaf_op, literal_type,
    operands, srepr,
};
use super::Validator;
use crate::definition::{CmpOp, Expr, FieldType, NodeId, Pos, Predicate, Source, Transition};
use crate::pyvalue;

impl Validator<'_> {
    fn check_context_ref(&mut self, id: NodeId, pos: Option<&Pos>, field: &str, op: &str) {
        let schema = &self.defn.context_schema;
        if schema.is_empty() {
            return;
        }
        match schema.get(field) {
            None => self.error(
                "unknown_context_field",
                id,
                pos,
                format!("the context declares no field {}", srepr(field)),
            ),
            Some(spec) if is_numeric_op(op) && is_unordered(spec.ty) => self.warning(
                "op_type_mismatch",
                id,
                pos,
                format!(
                    "op {} on context.{field} ({}) compares a non-ordered field",
                    srepr(op),
                    spec.ty.as_str()
                ),
            ),
            Some(_) => {}
        }
    }

    /// The declared type of what a guard operand reads, where it is knowable.
    fn operand_type(&self, source: Source, field: &str, t: &Transition) -> Option<FieldType> {
        let specs: Vec<Option<FieldType>> = match source {
            Source::Context => vec![self.defn.context_schema.get(field).map(|s| s.ty)],
            Source::Event => match &t.event_filter {
                None => Vec::new(),
                Some(ef) => kinds(ef)
                    .map(|k| {
                        self.defn
                            .events
                            .get(k)
                            .and_then(|e| e.fields.get(field))
                            .map(|s| s.ty)
                    })
                    .collect(),
            },
        };
        if specs.is_empty() || specs.iter().any(Option::is_none) {
            return None;
        }
        let first = specs[0]?;
        if first == FieldType::Any || specs.iter().any(|s| *s != Some(first)) {
            return None;
        }
        Some(first)
    }

    fn check_compared_types(&mut self, id: NodeId, t: &Transition, leaf: &Predicate) {
        let Predicate::Leaf {
            source,
            field,
            op,
            value_ref: Some((rsource, rfield)),
            ..
        } = leaf
        else {
            return;
        };
        if *op == CmpOp::In || field.is_empty() || rfield.is_empty() {
            return;
        }
        let left = self.operand_type(*source, field, t);
        let right = self.operand_type(*rsource, rfield, t);
        if let (Some(l), Some(r)) = (left, right) {
            let numeric = |x: FieldType| matches!(x, FieldType::Int | FieldType::Float);
            if l != r && !(numeric(l) && numeric(r)) {
                self.warning(
                    "compare_type_mismatch",
                    id,
                    t.pos.as_ref(),
                    format!(
                        "a guard compares {}.{field} ({}) with {}.{rfield} ({}): values of different types are \
                         never equal or ordered",
                        source.as_str(),
                        l.as_str(),
                        rsource.as_str(),
                        r.as_str()
                    ),
                );
            }
        }
    }

    /// The static type of a right-hand side where it is knowable.
    fn expr_type(&self, expr: &Expr) -> Option<&'static str> {
        match expr {
            Expr::Lit(v) => Some(literal_type(v)),
            Expr::Ref {
                source: Source::Context,
                field,
            } => match self.defn.context_schema.get(field) {
                Some(spec) if spec.ty != FieldType::Any => Some(spec.ty.as_str()),
                _ => None,
            },
            Expr::Ref { .. } => None,
            Expr::Arith { op, left, right } => {
                if *op == crate::definition::ArithOp::Div {
                    return Some("float");
                }
                // a set of the knowable side types (harel drops unknown ones as None)
                let mut sides: Vec<Option<&'static str>> = Vec::new();
                for side in [left, right] {
                    let ty = self.expr_type(side);
                    if !sides.contains(&ty) {
                        sides.push(ty);
                    }
                }
                if sides == [Some("int")] {
                    return Some("int");
                }
                let all_numeric = sides.iter().all(|s| matches!(s, Some("int") | Some("float")));
                if all_numeric && sides.contains(&Some("float")) {
                    return Some("float");
                }
                None
            }
        }
    }

    fn check_assignments(&mut self, id: NodeId, t: &Transition) {
        let pos = t.pos.as_ref();
        for assign in all_assignments(t) {
            let mut refs = Vec::new();
            expr_refs(&assign.expr, &mut refs);
            for (source, field) in refs {
                if source == Source::Context && !field.is_empty() {
                    self.check_context_ref(id, pos, &field, "eq");
                } else if source == Source::Event && t.event_filter.is_none() {
                    self.error(
                        "event_ref_without_event",
                        id,
                        pos,
                        format!("`set` reads event.{field} on an automatic transition, which has no event"),
                    );
                }
            }
            if let Expr::Arith { op, left, right } = &assign.expr {
                for operand in [left, right] {
                    if let Some(kind @ ("string" | "bool" | "list")) = self.expr_type(operand) {
                        self.error(
                            "assign_type_mismatch",
                            id,
                            pos,
                            format!(
                                "`{}` in `set context.{}` needs numbers, got a {kind}",
                                op.symbol(),
                                assign.field
                            ),
                        );
                    }
                }
            }
            if self.defn.context_schema.is_empty() {
                continue;
            }
            let Some(spec) = self.defn.context_schema.get(&assign.field) else {
                self.error(
                    "unknown_context_field",
                    id,
                    pos,
                    format!(
                        "`set` writes context.{}, which the context doesn't declare",
                        assign.field
                    ),
                );
                continue;
            };
            let kind = self.expr_type(&assign.expr);
            let declared = spec.ty.as_str();
            let fits = match kind {
                None => true,
                Some(k) => spec.ty == FieldType::Any || k == declared || (declared == "float" && k == "int"),
            };
            if !fits {
                self.error(
                    "assign_type_mismatch",
                    id,
                    pos,
                    format!(
                        "`set context.{}` ({declared}) is given a {}",
                        assign.field,
                        kind.unwrap_or("None")
                    ),
                );
            }
        }
    }

    pub(super) fn check_context_refs(&mut self) {
        for id in self.order.clone() {
            let node = self.node(id);
            let loop_var = node.invoke_each.as_ref().map(|(v, _)| v.as_str());
            for parent_key in node.invoke_with.values() {
                if Some(parent_key.as_str()) != loop_var {
                    self.check_context_ref(id, None, parent_key, "eq");
                }
            }
            if let Some((_, coll)) = &node.invoke_each {
                self.check_context_ref(id, None, coll, "eq");
            }
            for t in &node.transitions {
                let pos = t.pos.as_ref();
                for leaf in guard_leaves(t) {
                    for (src, f) in operands(leaf) {
                        if src == Source::Context {
                            self.check_context_ref(id, pos, f, leaf_op(leaf));
                        } else if t.event_filter.is_none() {
                            self.error(
                                "event_ref_without_event",
                                id,
                                pos,
                                format!(
                                    "a guard reads the event's {} on an automatic transition, which has no event \
                                     — it can never hold",
                                    srepr(f)
                                ),
                            );
                        }
                    }
                    self.check_compared_types(id, t, leaf);
                }
                self.check_assignments(id, t);
            }
        }
    }

    pub(super) fn check_context_defaults(&mut self) {
        let root = self.defn.root;
        for (name, spec) in &self.defn.context_schema {
            let Some(default) = &spec.default else { continue };
            if default.is_null() || spec.ty.fits(default) {
                continue;
            }
            self.error(
                "default_type_mismatch",
                root,
                None,
                format!(
                    "the default of context field {} ({}) is {} {}",
                    srepr(name),
                    spec.ty.as_str(),
                    pyvalue::type_name(default),
                    pyvalue::repr(default)
                ),
            );
        }
    }
}
