//! The machine generator's scopes: the transitions of one scope, its children (nested
//! composites, finals, sinks), and orthogonal states with their regions.

use crate::machine::{Child, Machine, CTX_KEYS, EVENT_FIELDS, ORTHOGONAL_STATES};
use crate::rng::Rng;
use crate::values::{gen_str, gen_value};

impl Machine {
    /// The transitions of one scope. `children` are its children in declaration order;
    /// `scope` is the composite's own name (None at the machine root).
    pub(crate) fn transitions(
        &mut self,
        r: &mut Rng,
        children: &[Child],
        scope: Option<&str>,
    ) -> Vec<String> {
        let mut out = Vec::new();
        let names: Vec<&str> = children.iter().map(|c| c.name.as_str()).collect();
        let target = |r: &mut Rng, from: usize| -> String {
            let c = &children[r.index(children.len())];
            if !c.inner.is_empty() && r.chance(20) {
                format!("\"{}.{}\"", c.name, r.pick(&c.inner))
            } else if let (Some(s), true) = (scope, r.chance(6)) {
                s.to_string()
            } else if r.chance(15) {
                children[from].name.clone()
            } else {
                c.name.clone()
            }
        };
        // an automatic edge only goes forward (no eventless cycles)
        let forward = |r: &mut Rng, from: usize| -> Option<String> {
            if from + 1 >= names.len() {
                None
            } else {
                Some(names[from + 1 + r.index(names.len() - 1 - from)].to_string())
            }
        };
        let mut has_error = false;
        for (i, c) in children.iter().enumerate() {
            if c.terminal {
                continue;
            }
            let src = &c.name;
            if c.orthogonal {
                let live: Vec<&str> = names.iter().copied().filter(|n| n != src).collect();
                if live.is_empty() {
                    continue;
                }
                match r.below(4) {
                    0 => {
                        let a = r.pick(&live).to_string();
                        let b = r.pick(&live).to_string();
                        out.push(format!("from {src} join all to {a} else to {b}"));
                    }
                    1 => {
                        let a = r.pick(&live).to_string();
                        let b = r.pick(&live).to_string();
                        out.push(format!("from {src} join any to {a} else to {b}"));
                    }
                    2 => {
                        if let Some(t) = forward(r, i) {
                            out.push(format!("from {src} to {t}"));
                        }
                    }
                    _ => {
                        let t = r.pick(&live).to_string();
                        out.push(format!("from {src} to {t} on Timeout"));
                    }
                }
                continue;
            }
            for _ in 0..r.between(0, 2) {
                let t = match r.below(100) {
                    0..=54 => {
                        let t = target(r, i);
                        let trig = self.trigger(r);
                        let set = self.assign(r, 35);
                        format!("from {src} to {t}{trig}{set}")
                    }
                    55..=62 => match forward(r, i) {
                        Some(t) => {
                            let set = self.assign(r, 30);
                            format!("from {src} to {t}{set}")
                        }
                        None => continue,
                    },
                    63..=70 => {
                        let t = target(r, i);
                        self.has_timers = true;
                        let set = self.assign(r, 20);
                        format!("from {src} to {t} on Timeout{set}")
                    }
                    71..=84 => {
                        // a choose, on an event (or automatic, forward only)
                        let auto = r.chance(20);
                        let trig = if auto { String::new() } else { self.trigger(r) };
                        let pick = |r: &mut Rng| -> Option<String> {
                            if auto {
                                forward(r, i)
                            } else {
                                Some(target(r, i))
                            }
                        };
                        let mut body = Vec::new();
                        for _ in 0..r.between(1, 3) {
                            let Some(t) = pick(r) else { break };
                            let p = self.predicate(r, 1, false);
                            let set = self.assign(r, 30);
                            body.push(format!("when {p} to {t}{set}"));
                        }
                        if body.is_empty() {
                            continue;
                        }
                        if r.chance(70) {
                            if let Some(t) = pick(r) {
                                let set = self.assign(r, 30);
                                body.push(format!("else to {t}{set}"));
                            }
                        }
                        let set = self.assign(r, 15);
                        format!("from {src} choose{trig}{set} {{ {} }}", body.join(" "))
                    }
                    85..=93 => {
                        // a selector on an event
                        let action = match r.below(4) {
                            0 => {
                                let a = self.bind("pk", "conf_actions.pick");
                                format!("{a}(value: {})", gen_value(r, true, 0).stm())
                            }
                            1 => {
                                let a = self.bind("pc", "conf_actions.pick_ctx");
                                format!("{a}(key: \"{}\")", r.pick(CTX_KEYS))
                            }
                            2 if r.chance(30) => {
                                let a = self.bind("fl", "conf_actions.fail");
                                format!("{a}(message: {})", gen_str(r).stm())
                            }
                            _ => {
                                let a = self.bind("pe", "conf_actions.pick_event");
                                format!("{a}(field: \"{}\")", r.pick(EVENT_FIELDS))
                            }
                        };
                        let trig = self.trigger(r);
                        let mut seen = Vec::new();
                        let mut body = Vec::new();
                        for _ in 0..r.between(1, 3) {
                            let v = gen_value(r, true, 1);
                            let key = v.str_key();
                            if seen.contains(&key) {
                                continue;
                            }
                            seen.push(key);
                            let t = target(r, i);
                            body.push(format!("{} to {t}", v.stm()));
                        }
                        if r.chance(60) {
                            let t = target(r, i);
                            body.push(format!("else to {t}"));
                        }
                        format!("from {src} select {action}{trig} {{ {} }}", body.join(" "))
                    }
                    _ => {
                        if has_error && r.chance(50) {
                            continue;
                        }
                        has_error = true;
                        let t = target(r, i);
                        if r.chance(30) {
                            let p = self.predicate(r, 1, true);
                            format!("from {src} to {t} on error where {p}")
                        } else {
                            format!("from {src} to {t} on error")
                        }
                    }
                };
                out.push(t);
            }
        }
        // errors are more interesting routed than fatal: most scopes get a handler
        let sources: Vec<usize> = (0..children.len())
            .filter(|&i| !children[i].terminal && !children[i].orthogonal)
            .collect();
        if !has_error && !sources.is_empty() && r.chance(55) {
            let i = *r.pick(&sources);
            let t = target(r, i);
            let src = &children[i].name;
            if r.chance(30) {
                let p = self.predicate(r, 1, true);
                out.push(format!("from {src} to {t} on error where {p}"));
            } else {
                out.push(format!("from {src} to {t} on error"));
            }
        }
        out
    }

    /// The children of a scope (machine root: depth 0).
    /// `limit`: the state count the machine may reach once this scope is written (the
    /// machine's states are numbered in creation order, so `next_state` is the count).
    pub(crate) fn children(&mut self, r: &mut Rng, depth: usize, limit: usize) -> Vec<Child> {
        let n = (if depth == 0 {
            r.between(3, 5)
        } else {
            r.between(2, 3)
        }) as usize;
        let n = n.min(limit.saturating_sub(self.next_state)).max(1);
        let mut out: Vec<Child> = Vec::new();
        for i in 0..n {
            let roll = r.below(100);
            // what this child may use, keeping one state for each sibling still to come
            let avail = limit.saturating_sub(self.next_state + (n - i - 1));
            let name = self.state_name();
            if i > 0 && roll < 14 {
                let outcome = r.pick(&["success", "failed", "rejected"]);
                let body = if r.chance(25) {
                    let a = self.hook_action(r);
                    format!(" {{ on enter {a} }}")
                } else {
                    String::new()
                };
                out.push(Child {
                    text: format!("final {name} {outcome}{body}"),
                    name,
                    terminal: true,
                    inner: vec![],
                    orthogonal: false,
                });
            } else if depth == 0 && !self.has_orthogonal && roll >= 80 && avail >= ORTHOGONAL_STATES {
                self.has_orthogonal = true;
                out.push(self.orthogonal(r, name));
            } else if depth < 2 && (56..80).contains(&roll) && avail >= 3 {
                let inner_limit = self.next_state + avail - 1;
                let kids = self.children(r, depth + 1, inner_limit);
                let mut items = self.state_items(r, false);
                if r.chance(15) {
                    items.push("no history".into());
                }
                items.push(format!("initial {}", kids[0].name));
                let trans = self.transitions(r, &kids, Some(&name));
                let inner: Vec<String> = kids.iter().map(|k| k.name.clone()).collect();
                items.extend(kids.into_iter().map(|k| k.text));
                items.extend(trans);
                out.push(Child {
                    text: format!("state {name} {{\n{}\n}}", items.join("\n")),
                    name,
                    terminal: false,
                    inner,
                    orthogonal: false,
                });
            } else {
                let items = self.state_items(r, true);
                out.push(Child {
                    text: format!("state {name} {{ {} }}", items.join(" ")),
                    name,
                    terminal: false,
                    inner: vec![],
                    orthogonal: false,
                });
            }
        }
        out
    }

    /// An orthogonal state: 2 regions, each a small composite ending in finals.
    fn orthogonal(&mut self, r: &mut Rng, name: String) -> Child {
        let mut items = Vec::new();
        if r.chance(30) {
            items.push("cancel_on_failure".to_string());
        }
        if r.chance(30) {
            self.has_timers = true;
            items.push(format!("timeout {}", r.pick(&["5", "30"])));
        }
        if r.chance(30) {
            let a = self.hook_action(r);
            items.push(format!("on enter {a}"));
        }
        for _ in 0..2 {
            let region = self.state_name();
            let work = self.state_name();
            let ok = self.state_name();
            let bad = self.state_name();
            let mut ritems = Vec::new();
            if r.chance(40) {
                ritems.push(format!("carry {}", r.pick(CTX_KEYS)));
            }
            let items_w = self.state_items(r, true);
            ritems.push(format!("initial {work}"));
            ritems.push(format!("state {work} {{ {} }}", items_w.join(" ")));
            ritems.push(format!("final {ok} success"));
            ritems.push(format!("final {bad} failed"));
            let t1 = self.trigger(r);
            let s1 = self.assign(r, 40);
            ritems.push(format!("from {work} to {ok}{t1}{s1}"));
            let t2 = self.trigger(r);
            ritems.push(format!("from {work} to {bad}{t2}"));
            if r.chance(25) {
                ritems.push(format!("from {work} to {bad} on error"));
            }
            items.push(format!("state {region} {{\n{}\n}}", ritems.join("\n")));
        }
        Child {
            text: format!("orthogonal {name} {{\n{}\n}}", items.join("\n")),
            name,
            terminal: false,
            inner: vec![],
            orthogonal: true,
        }
    }
}
