//! Machine-wide checks of the events transitions are triggered by: undeclared events,
//! fields the event does not declare, and ordering ops on unordered fields.

use super::reads::{
    all_assignments, choice_leaves, expr_refs, is_numeric_op, is_unordered, kinds, leaf_op, leaves_of,
    operands, srepr,
};
use super::Validator;
use crate::definition::{EventFilter, NodeId, Source, Transition, RESERVED_EVENTS};

impl Validator<'_> {
    pub(super) fn check_events(&mut self) {
        for id in self.order.clone() {
            for t in &self.defn.node(id).transitions {
                let Some(ef) = &t.event_filter else { continue };
                let mut extra: Vec<(String, &'static str)> = Vec::new();
                for leaf in choice_leaves(t) {
                    for (src, f) in operands(leaf) {
                        if src == Source::Event {
                            extra.push((f.to_string(), leaf_op(leaf)));
                        }
                    }
                }
                for a in all_assignments(t) {
                    let mut refs = Vec::new();
                    expr_refs(&a.expr, &mut refs);
                    for (src, f) in refs {
                        if src == Source::Event && !f.is_empty() {
                            extra.push((f, "eq"));
                        }
                    }
                }
                self.check_event(id, t, ef, extra);
            }
        }
    }

    fn check_event(
        &mut self,
        id: NodeId,
        t: &Transition,
        ef: &EventFilter,
        extra: Vec<(String, &'static str)>,
    ) {
        let pos = t.pos.as_ref();
        // (field, op) of every event read: the `where`, then the extras
        let mut leaves: Vec<(String, &'static str)> = Vec::new();
        for leaf in leaves_of(ef.predicate.as_ref()) {
            for (src, f) in operands(leaf) {
                if src == Source::Event {
                    leaves.push((f.to_string(), leaf_op(leaf)));
                }
            }
        }
        leaves.extend(extra);
        let mut fields: Vec<&str> = Vec::new();
        for (f, _) in &leaves {
            if !fields.contains(&f.as_str()) {
                fields.push(f);
            }
        }
        for (n, kind) in kinds(ef).enumerate() {
            if RESERVED_EVENTS.contains(&kind) {
                continue;
            }
            let Some(etype) = self.defn.events.get(kind) else {
                // pointed at the name itself where the parser saw it written
                let name_pos = t.event_pos.get(n).or(pos);
                self.error(
                    "unknown_event",
                    id,
                    name_pos,
                    format!("transition references undeclared event {}", srepr(kind)),
                );
                let declared = self.defn.events.keys().map(String::as_str);
                if let (Some(finding), Some(near)) =
                    (self.out.last_mut(), crate::suggest::nearest(kind, declared))
                {
                    finding.hint = Some(format!("did you mean `{near}`?"));
                }
                continue;
            };
            if etype.fields.is_empty() {
                continue; // declared but schemaless: no field checks
            }
            for f in &fields {
                if !etype.fields.contains_key(*f) {
                    self.error(
                        "unknown_event_field",
                        id,
                        pos,
                        format!("event {} has no field {}", srepr(kind), srepr(f)),
                    );
                }
            }
            for (f, op) in &leaves {
                if let Some(spec) = etype.fields.get(f) {
                    if is_numeric_op(op) && is_unordered(spec.ty) {
                        self.warning(
                            "op_type_mismatch",
                            id,
                            pos,
                            format!(
                                "op {} on {} ({}) compares a non-ordered field",
                                srepr(op),
                                srepr(f),
                                spec.ty.as_str()
                            ),
                        );
                    }
                }
            }
        }
    }
}
