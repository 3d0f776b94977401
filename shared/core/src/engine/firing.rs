//! Firing a matched transition: its target (fixed, chosen by a `choose`, or computed by
//! a selector), its `set` values evaluated and checked against the context schema, and
//! then taking it.

use super::guard::{assignments_of, choice_target, scope_of};
use super::resolve::{transition, Found};
use super::{ActionCall, Step, StepError, StepResult};
use crate::definition::{Assign, Expr, NodeId};
use crate::execution::Event;
use crate::pyvalue;
use crate::{Map, Value};

impl Step<'_> {
    /// The target of a matched transition: fixed, chosen, or computed by a selector.
    fn target_of(&mut self, found: Found, event: Option<&Event>) -> StepResult<NodeId> {
        let defn = self.defn;
        let t = transition(defn, found);
        if let Some(selector) = &t.selector {
            let node = self.active()?;
            let call = ActionCall {
                node,
                hook: None,
                action: &selector.action,
                event,
            };
            let result = self
                .host
                .call(&call, &mut self.exe.context)
                .map_err(|error| StepError::Action {
                    error,
                    on_exit: false,
                })?;
            let key = pyvalue::py_str(&result);
            let name = selector
                .mapper
                .get(&key)
                .or(selector.default.as_ref())
                .ok_or_else(|| {
                    StepError::Invalid(format!(
                        "selector result {} matched no branch and no `else`",
                        pyvalue::repr(&result)
                    ))
                })?;
            return defn.resolve_relative(found.0, name).ok_or_else(|| {
                StepError::Invalid(format!(
                    "selector target {name:?} not found from {:?}",
                    defn.path(found.0)
                ))
            });
        }
        if t.choice.is_some() {
            let empty = Map::new();
            let data = event.map_or(&empty, |e| &e.data);
            return choice_target(t, data, &self.exe.context)
                .ok_or_else(|| StepError::Invalid("a `choose` with no open branch was taken".into()));
        }
        t.target
            .ok_or_else(|| StepError::Invalid("transition without a target".into()))
    }

    fn value_of(&self, expr: &Expr, event_data: &Map) -> StepResult<Value> {
        match expr {
            Expr::Lit(v) => Ok(v.clone()),
            Expr::Ref { source, field } => scope_of(*source, event_data, &self.exe.context)
                .get(field)
                .cloned()
                .ok_or_else(|| StepError::Expression(format!("{}.{} is not set", source.as_str(), field))),
            Expr::Arith { op, left, right } => {
                let l = self.value_of(left, event_data)?;
                let r = self.value_of(right, event_data)?;
                pyvalue::arith(*op, &l, &r).map_err(|e| match e {
                    pyvalue::ArithError::Expression(m) => StepError::Expression(m),
                    pyvalue::ArithError::Raised(e) => StepError::Raised {
                        type_name: e.type_name,
                        message: e.message,
                    },
                })
            }
        }
    }

    /// Every right-hand side evaluated against the context and event as they are
    /// before any is applied, each checked against the context schema.
    pub(super) fn evaluate(&self, assignments: &[Assign], event: Option<&Event>) -> StepResult<Map> {
        let empty = Map::new();
        let data = event.map_or(&empty, |e| &e.data);
        let mut values = Map::new();
        for assign in assignments {
            let value = self.value_of(&assign.expr, data)?;
            if let Some(spec) = self.defn.context_schema.get(&assign.field) {
                let null_ok = value.is_null() && !spec.required;
                if !null_ok && !spec.ty.fits(&value) {
                    return Err(StepError::Expression(format!(
                        "context.{} is declared {}, `set` gave {} {}",
                        assign.field,
                        spec.ty.as_str(),
                        pyvalue::type_name(&value),
                        pyvalue::repr(&value)
                    )));
                }
            }
            values.insert(assign.field.clone(), value);
        }
        Ok(values)
    }

    /// Resolve, target and take `found` for `event`, as every event path does.
    pub(super) fn fire(&mut self, found: Found, event: Option<&Event>) -> StepResult {
        let target = self.target_of(found, event)?;
        let assignments = assignments_of(transition(self.defn, found), event, &self.exe.context);
        self.take(target, event, &assignments)
    }
}
