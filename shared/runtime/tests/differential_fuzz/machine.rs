//! The machine generator's state and its small pieces: state names, event kinds, bound
//! actions, hooks, the items of a state, predicates, assignments and triggers.

use std::collections::BTreeMap;

use crate::rng::Rng;
use crate::values::{gen_number, gen_str, gen_value, V};

pub(crate) const CTX_KEYS: &[&str] = &["x", "y", "z", "s"];
pub(crate) const EVENT_FIELDS: &[&str] = &["v", "w", "s"];
pub(crate) const TYPES: &[&str] = &["int", "float", "string", "bool", "any"];

/// What the generator knows while writing one machine.
#[derive(Debug, Default)]
pub(crate) struct Machine {
    pub(crate) next_state: usize,
    /// event kinds a transition / defer names
    pub(crate) kinds: Vec<String>,
    pub(crate) has_timers: bool,
    /// the typed context, if any: key -> (type, optional)
    pub(crate) ctx_types: Vec<(String, String, bool)>,
    /// typed events: kind -> fields (name, type, optional)
    pub(crate) event_types: BTreeMap<String, Vec<(String, String, bool)>>,
    /// actions bound in the `bind` block
    pub(crate) bound: Vec<(&'static str, &'static str)>,
    pub(crate) has_orthogonal: bool,
}

/// One child of a scope, rendered later.
#[derive(Debug)]
pub(crate) struct Child {
    pub(crate) name: String,
    pub(crate) text: String,
    /// a final / sink: no outgoing transitions are added for it
    pub(crate) terminal: bool,
    /// names of its own children (for dotted targets)
    pub(crate) inner: Vec<String>,
    pub(crate) orthogonal: bool,
}

const KINDS: &[&str] = &["A", "B", "C", "D"];
/// The most states a machine has (regions and finals included).
pub(crate) const MAX_STATES: usize = 12;
/// What an orthogonal state takes: itself and two regions of four (region, work, two finals).
pub(crate) const ORTHOGONAL_STATES: usize = 9;

impl Machine {
    pub(crate) fn state_name(&mut self) -> String {
        let n = self.next_state;
        self.next_state += 1;
        format!("S{n}")
    }

    pub(crate) fn bind(&mut self, short: &'static str, full: &'static str) -> &'static str {
        if !self.bound.iter().any(|(s, _)| *s == short) {
            self.bound.push((short, full));
        }
        short
    }

    fn kind(&mut self, r: &mut Rng) -> String {
        let k = r.pick(KINDS).to_string();
        if !self.kinds.contains(&k) {
            self.kinds.push(k.clone());
        }
        k
    }

    /// An action call, as an enter/exit/activity hook.
    pub(crate) fn hook_action(&mut self, r: &mut Rng) -> String {
        match r.below(100) {
            0..=29 => {
                let a = self.bind("lg", "conf_actions.log");
                let label = if r.chance(25) {
                    gen_str(r)
                } else {
                    V::Str(format!("l{}", r.below(9)))
                };
                format!("{a}(label: {})", label.stm())
            }
            30..=39 => {
                let a = self.bind("sn", "conf_actions.seen");
                a.to_string()
            }
            40..=51 => {
                let a = self.bind("fl", "conf_actions.fail");
                let msg = if r.chance(60) {
                    gen_str(r)
                } else {
                    V::Str("boom".into())
                };
                format!("{a}(message: {})", msg.stm())
            }
            52..=59 => {
                let a = self.bind("fw", "conf_actions.fail_when");
                format!(
                    "{a}(key: \"{}\", message: {})",
                    r.pick(CTX_KEYS),
                    gen_str(r).stm()
                )
            }
            60..=74 => {
                let a = self.bind("pt", "conf_actions.put");
                let key = r.pick(CTX_KEYS);
                format!("{a}(key: \"{key}\", value: {})", gen_value(r, true, 0).stm())
            }
            75..=89 => {
                let a = self.bind("ic", "conf_actions.incr");
                let key = r.pick(&["n", "x", "y"]);
                if r.chance(20) {
                    format!("{a}(key: \"{key}\")")
                } else {
                    format!("{a}(key: \"{key}\", by: {})", gen_number(r, true).stm())
                }
            }
            _ => {
                let a = self.bind("ce", "conf_actions.copy_event");
                let field = r.pick(EVENT_FIELDS);
                if r.chance(50) {
                    format!("{a}(field: \"{field}\", into: \"{}\")", r.pick(CTX_KEYS))
                } else {
                    format!("{a}(field: \"{field}\")")
                }
            }
        }
    }

    /// The hooks, timeout and defer items of a state.
    pub(crate) fn state_items(&mut self, r: &mut Rng, leaf: bool) -> Vec<String> {
        let mut items = Vec::new();
        for _ in 0..r.below(3) {
            let hook = match r.below(10) {
                0..=5 => "enter",
                6 => "exit",
                _ => "activity",
            };
            if hook == "activity" && !leaf {
                continue;
            }
            let act = self.hook_action(r);
            items.push(format!("on {hook} {act}"));
        }
        if r.chance(18) {
            self.has_timers = true;
            if r.chance(80) {
                items.push(format!("timeout {}", r.pick(&["1", "5", "10", "30", "0"])));
            } else {
                items.push(format!("timeout context {}", r.pick(&["x", "y", "t"])));
            }
        }
        if leaf && r.chance(15) {
            let a = self.kind(r);
            let b = self.kind(r);
            if a == b {
                items.push(format!("defer {a}"));
            } else {
                items.push(format!("defer {a}, {b}"));
            }
        }
        items
    }

    /// A comparison's left side.
    fn lhs(&mut self, r: &mut Rng, error: bool) -> String {
        if error && r.chance(70) {
            return r.pick(&["type", "message"]).to_string();
        }
        match r.below(10) {
            0..=3 => r.pick(EVENT_FIELDS).to_string(),
            4..=5 => format!("event.{}", r.pick(EVENT_FIELDS)),
            _ => format!("context.{}", r.pick(CTX_KEYS)),
        }
    }

    fn comparison(&mut self, r: &mut Rng, error: bool) -> String {
        let lhs = self.lhs(r, error);
        let op = *r.pick(&["==", "!=", "<", "<=", ">", ">=", "in", "==", "<", "in"]);
        let rhs = if r.chance(25) {
            if r.chance(50) {
                format!("context.{}", r.pick(CTX_KEYS))
            } else {
                format!("event.{}", r.pick(EVENT_FIELDS))
            }
        } else if op == "in" {
            if r.chance(60) {
                let n = r.between(1, 3);
                V::List((0..n).map(|_| gen_value(r, true, 1)).collect()).stm()
            } else if error && r.chance(50) {
                V::Str(
                    r.pick(&["RuntimeError", "ValueError", "boom", "ExpressionError"])
                        .to_string(),
                )
                .stm()
            } else {
                gen_str(r).stm()
            }
        } else if error && lhs == "type" {
            V::Str(
                r.pick(&["RuntimeError", "ValueError", "ExpressionError"])
                    .to_string(),
            )
            .stm()
        } else {
            gen_value(r, true, 0).stm()
        };
        format!("{lhs} {op} {rhs}")
    }

    pub(crate) fn predicate(&mut self, r: &mut Rng, depth: usize, error: bool) -> String {
        if depth >= 2 {
            return self.comparison(r, error);
        }
        match r.below(10) {
            0..=4 => self.comparison(r, error),
            5..=6 => format!(
                "{} and {}",
                self.predicate(r, depth + 1, error),
                self.predicate(r, depth + 1, error)
            ),
            7 => format!(
                "{} or {}",
                self.predicate(r, depth + 1, error),
                self.predicate(r, depth + 1, error)
            ),
            8 => format!("not {}", self.comparison(r, error)),
            _ => format!(
                "({} or {}) and {}",
                self.comparison(r, error),
                self.comparison(r, error),
                self.comparison(r, error)
            ),
        }
    }

    fn operand(&mut self, r: &mut Rng) -> String {
        match r.below(10) {
            0..=3 => format!("context.{}", r.pick(CTX_KEYS)),
            4..=6 => format!("event.{}", r.pick(EVENT_FIELDS)),
            7..=8 => gen_number(r, true).stm(),
            _ => gen_value(r, true, 0).stm(),
        }
    }

    /// `set context.k = ...` (one or two assignments), or "" (none).
    pub(crate) fn assign(&mut self, r: &mut Rng, pct: u64) -> String {
        if !r.chance(pct) {
            return String::new();
        }
        let mut parts = Vec::new();
        for _ in 0..r.between(1, 2) {
            let key = r.pick(&["x", "y", "z", "s", "x", "y"]);
            let expr = match r.below(10) {
                0..=1 => self.operand(r),
                2..=3 => format!("context.{key} + {}", self.operand(r)),
                4 => format!("context.{key} - {}", self.operand(r)),
                // one side a context value, the other an event value or a literal: the
                // product's size grows linearly over a script, not exponentially
                5..=6 => {
                    let other = if r.chance(60) {
                        format!("event.{}", r.pick(EVENT_FIELDS))
                    } else {
                        gen_number(r, true).stm()
                    };
                    format!("context.{key} * {other}")
                }
                7..=8 => format!("{} / {}", self.operand(r), self.operand(r)),
                _ => format!("event.{} + event.{}", r.pick(EVENT_FIELDS), r.pick(EVENT_FIELDS)),
            };
            parts.push(format!("context.{key} = {expr}"));
        }
        format!(" set {}", parts.join(", "))
    }

    pub(crate) fn trigger(&mut self, r: &mut Rng) -> String {
        let k = self.kind(r);
        if r.chance(40) {
            format!(" on {k} where {}", self.predicate(r, 0, false))
        } else if r.chance(10) {
            let k2 = self.kind(r);
            if k2 == k {
                format!(" on {k}")
            } else {
                format!(" on {k} | {k2}")
            }
        } else {
            format!(" on {k}")
        }
    }
}
