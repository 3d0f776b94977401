//! Statements, items and states -> [`StateCfg`]s: the structure of the program, the
//! dict semantics of repeated items, and the structural errors in harel's order.

use indexmap::IndexMap;

use super::{
    py_repr, ActionCfg, ArgCfg, ChoiceCfg, FieldSpec, Import, InputCfg, ParamKind, Program, SelectorCfg,
    StateCfg, TResult, TimeoutCfg, TransCfg, Transform, UseCfg,
};
use crate::definition::{EventType, FieldType};
use crate::dsl::ast::{self, At, Item, Lit, Pred, Stmt};
use crate::pyvalue;
use crate::Value;

impl Transform<'_> {
    pub(super) fn program(&self, stmts: Vec<Stmt>) -> TResult<Program> {
        let mut prog = Program::default();
        for stmt in stmts {
            match stmt {
                Stmt::Import { path, alias, at } => prog.imports.push(Import {
                    path,
                    alias,
                    line: at.line,
                    column: at.col,
                }),
                Stmt::Bind(bindings) => prog.bindings.extend(bindings),
                Stmt::Guard { name, pred, .. } => {
                    let pred = self.pred(&pred)?;
                    prog.guard_cfgs.insert(name, pred);
                }
                Stmt::Event { name, fields, .. } => {
                    let mut map = IndexMap::new();
                    for (fname, ty, optional) in fields {
                        map.insert(
                            fname,
                            FieldSpec {
                                ty: field_type(&ty),
                                required: !optional,
                                default: None,
                            },
                        );
                    }
                    prog.event_types
                        .insert(name.clone(), EventType { name, fields: map });
                }
                Stmt::Machine { name, items, at } => {
                    let mut cfg = self.assemble(items)?;
                    cfg.pos = Some(self.pos(at));
                    prog.machine_cfgs.insert(name, cfg);
                }
                Stmt::Fragment {
                    name,
                    params,
                    items,
                    at,
                } => {
                    let mut cfg = self.assemble(items)?;
                    refuse_machine_only(&cfg, &format!("fragment {name}")).map_err(|m| self.err(m, at))?;
                    cfg.params = params.into_iter().map(|(n, k)| (n, param_kind(&k))).collect();
                    cfg.pos = Some(self.pos(at));
                    prog.fragment_cfgs.insert(name, cfg);
                }
            }
        }
        prog.machines = prog.machine_cfgs.keys().cloned().collect();
        prog.fragments = prog.fragment_cfgs.keys().cloned().collect();
        prog.events = prog.event_types.keys().cloned().collect();
        prog.guards = prog.guard_cfgs.keys().cloned().collect();
        Ok(prog)
    }

    /// harel's `_assemble`: a block's items -> a config. (Each kind of item is its own
    /// function, which keeps the frames on the path of nested states small.)
    fn assemble(&self, items: Vec<Item>) -> TResult<Box<StateCfg>> {
        let mut cfg = Box::<StateCfg>::default();
        for item in items {
            match item {
                // the items holding nested blocks: on the recursion path, kept lean
                Item::State { .. } | Item::Final { .. } | Item::Invoke { .. } => {
                    self.nested(&mut cfg, item)?
                }
                other => self.assemble_item(&mut cfg, other)?,
            }
        }
        Ok(cfg)
    }

    fn nested(&self, cfg: &mut StateCfg, item: Item) -> TResult<()> {
        match item {
            Item::State {
                orthogonal,
                name,
                items,
                at,
            } => {
                let st = self.state(orthogonal, &name, items, at)?;
                cfg.states.insert(name, st);
            }
            Item::Final {
                name,
                outcome,
                items,
                at,
            } => {
                let st = self.final_state(&name, outcome, items, at)?;
                cfg.states.insert(name, st);
            }
            Item::Invoke { fqn, each, inline } => self.invoke(cfg, fqn, each, inline)?,
            other => self.assemble_item(cfg, other)?,
        }
        Ok(())
    }

    fn assemble_item(&self, cfg: &mut StateCfg, item: Item) -> TResult<()> {
        match item {
            Item::Initial(s) => cfg.start = Some(s),
            Item::OnEnter(a) => cfg.on_enter = Some(self.action(a)?),
            Item::OnExit(a) => cfg.on_exit = Some(self.action(a)?),
            Item::OnActivity(a) => cfg.on_activity = Some(self.action(a)?),
            Item::Timeout(spec) => {
                cfg.timeout = Some(match spec {
                    ast::TimeoutSpec::Literal(n) => TimeoutCfg::Value(int_value(&n)),
                    ast::TimeoutSpec::Context(k) => TimeoutCfg::Context(k),
                    ast::TimeoutSpec::Param(p) => TimeoutCfg::Param(p),
                })
            }
            Item::Ttl(n, at) => {
                cfg.ttl = Some(
                    n.parse()
                        .map_err(|_| self.err(format!("`ttl {n}` is too large"), at))?,
                )
            }
            Item::Context(fields) => cfg.context_schema = Some(self.context_fields(fields)?),
            Item::Outcome(s) => cfg.outcome = Some(s),
            Item::Carry(v) => cfg.carry = Some(v),
            Item::Defer(v) => cfg.defer = Some(v),
            Item::NoHistory => cfg.allow_history = Some(false),
            Item::CancelOnFailure => cfg.cancel_on_failure = Some(true),
            Item::InvokeWith(pairs) => cfg.invoke_with = Some(pairs.into_iter().collect()),
            Item::Use {
                name,
                args,
                alias,
                at,
            } => cfg.uses.push(self.use_item(name, args, alias, at)?),
            Item::State { .. } | Item::Final { .. } | Item::Invoke { .. } => self.nested(cfg, item)?,
            Item::Transition {
                from,
                to,
                trigger,
                set,
                at,
                names_at,
            } => {
                let mut t = self.transition(from, to, trigger, set, at)?;
                t.from_pos = self.pos(names_at.from);
                t.to_pos = names_at.targets.first().map(|&at| self.pos(at));
                cfg.transitions.push(t)
            }
            Item::Choice {
                from,
                trigger,
                set,
                branches,
                default,
                at,
                names_at,
            } => {
                let mut t = self.choice(from, trigger, set, branches, default, at)?;
                t.from_pos = self.pos(names_at.from);
                if let Some(choice) = &mut t.choice {
                    choice.targets_pos = names_at.targets.iter().map(|&at| self.pos(at)).collect();
                }
                cfg.transitions.push(t)
            }
            Item::Select {
                from_at,
                from,
                action,
                returns,
                trigger,
                branches,
                default,
                at,
            } => {
                let mut t = self.select(from, action, returns, trigger, branches, default, at)?;
                t.from_pos = self.pos(from_at);
                cfg.transitions.push(t)
            }
            Item::Join {
                from_at,
                from,
                all,
                success,
                otherwise,
                at,
            } => {
                let mut t = self.join(from, all, success, otherwise, at);
                t.from_pos = self.pos(from_at);
                cfg.transitions.push(t)
            }
        }
        Ok(())
    }

    fn context_fields(&self, fields: Vec<ast::ContextField>) -> TResult<IndexMap<String, FieldSpec>> {
        let mut map = IndexMap::new();
        for f in fields {
            let default = match &f.default {
                Some(lit) => {
                    if f.optional {
                        return Err(self.err(
                            format!(
                                "context field {} has a default, so it can't also be optional (`?`): \
                                 an execution always starts with it",
                                py_repr(&f.name)
                            ),
                            f.at,
                        ));
                    }
                    Some(self.lit(lit)?)
                }
                None => None,
            };
            map.insert(
                f.name,
                FieldSpec {
                    ty: field_type(&f.ty),
                    required: !f.optional,
                    default,
                },
            );
        }
        Ok(map)
    }

    fn invoke(
        &self,
        cfg: &mut StateCfg,
        fqn: Option<String>,
        each: Option<(String, String)>,
        inline: Option<(Vec<Item>, At)>,
    ) -> TResult<()> {
        let inline = match inline {
            Some((items, at)) => {
                let body = self.assemble(items)?;
                refuse_machine_only(&body, "an inline `invoke` target, which always runs as a child")
                    .map_err(|m| self.err(m, at))?;
                Some(body)
            }
            None => None,
        };
        if let Some(fqn) = fqn {
            cfg.invoke = Some(fqn);
        }
        if let Some(each) = each {
            cfg.invoke_each = Some(each);
        }
        if let Some(body) = inline {
            cfg.invoke_inline = Some(body);
        }
        Ok(())
    }

    fn use_item(
        &self,
        name: String,
        args: Vec<(String, ast::Arg)>,
        alias: Option<String>,
        at: At,
    ) -> TResult<UseCfg> {
        let mut map = IndexMap::new();
        for (k, arg) in args {
            let arg = match arg {
                ast::Arg::Name(n) => ArgCfg::Name(n),
                ast::Arg::Dotted(d) => ArgCfg::Dotted(d),
                ast::Arg::Lit(l) => ArgCfg::Lit(self.lit(&l)?),
                ast::Arg::Pred(p) => ArgCfg::Pred(self.pred(&p)?),
            };
            map.insert(k, arg);
        }
        Ok(UseCfg {
            fragment: name,
            alias,
            args: map,
            pos: self.pos(at),
        })
    }

    fn state(&self, orthogonal: bool, name: &str, items: Vec<Item>, at: At) -> TResult<Box<StateCfg>> {
        let mut st = self.assemble(items)?;
        refuse_machine_only(&st, &format!("state {name}")).map_err(|m| self.err(m, at))?;
        st.pos = Some(self.pos(at));
        st.orthogonal = orthogonal;
        Ok(st)
    }

    fn final_state(&self, name: &str, outcome: String, items: Vec<Item>, at: At) -> TResult<Box<StateCfg>> {
        let mut st = self.assemble(items)?;
        refuse_machine_only(&st, &format!("state {name}")).map_err(|m| self.err(m, at))?;
        st.outcome = Some(outcome);
        st.pos = Some(self.pos(at));
        Ok(st)
    }

    fn transition(
        &self,
        from: String,
        to: String,
        trigger: Option<ast::Trigger>,
        set: Option<Vec<ast::Assignment>>,
        at: At,
    ) -> TResult<TransCfg> {
        let on_event = self.trigger(trigger)?;
        let set = self.assigns(set)?;
        Ok(TransCfg {
            pos: self.pos(at),
            from_pos: self.pos(at),
            from,
            to: Some(to),
            to_pos: None,
            on_event,
            set,
            selector: None,
            choice: None,
        })
    }

    #[allow(clippy::type_complexity)]
    fn choice(
        &self,
        from: String,
        trigger: Option<ast::Trigger>,
        set: Option<Vec<ast::Assignment>>,
        branches: Vec<(Pred, String, Option<Vec<ast::Assignment>>)>,
        default: Option<(String, Option<Vec<ast::Assignment>>)>,
        at: At,
    ) -> TResult<TransCfg> {
        let on_event = self.trigger(trigger)?;
        let set = self.assigns(set)?;
        let mut out = Vec::new();
        for (pred, to, bset) in branches {
            let pred = self.pred(&pred)?;
            out.push((pred, to, self.assigns(bset)?));
        }
        let (default, default_set) = match default {
            Some((to, dset)) => (Some(to), self.assigns(dset)?),
            None => (None, Vec::new()),
        };
        Ok(TransCfg {
            pos: self.pos(at),
            from_pos: self.pos(at),
            from,
            to: None,
            to_pos: None,
            on_event,
            set,
            selector: None,
            choice: Some(ChoiceCfg {
                branches: out,
                default,
                default_set,
                targets_pos: Vec::new(),
            }),
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn select(
        &self,
        from: String,
        action: ast::Action,
        returns: Option<Vec<Lit>>,
        trigger: Option<ast::Trigger>,
        branches: Vec<(Lit, String)>,
        default: Option<String>,
        at: At,
    ) -> TResult<TransCfg> {
        let function = self.action(action)?;
        let enum_values = match returns {
            Some(values) => Some(
                values
                    .iter()
                    .map(|v| self.lit(v).map(|v| pyvalue::py_str(&v)))
                    .collect::<TResult<_>>()?,
            ),
            None => None,
        };
        let on_event = self.trigger(trigger)?;
        let mut mapper = IndexMap::new();
        for (v, to) in branches {
            mapper.insert(pyvalue::py_str(&self.lit(&v)?), to);
        }
        Ok(TransCfg {
            pos: self.pos(at),
            from_pos: self.pos(at),
            from,
            to: None,
            to_pos: None,
            on_event,
            set: Vec::new(),
            selector: Some(SelectorCfg {
                function,
                mapper,
                default,
                enum_values,
            }),
            choice: None,
        })
    }

    /// `join all|any`: sugar for a selector over the region results, via harel's
    /// shipped aggregator.
    fn join(&self, from: String, all: bool, success: String, otherwise: String, at: At) -> TransCfg {
        let mut inputs = IndexMap::new();
        inputs.insert(
            "mode".to_string(),
            InputCfg::Lit(Value::from(if all { "all" } else { "any" })),
        );
        let function = ActionCfg::Spec {
            literal: true,
            name: "harel.lib.join_success".into(),
            inputs,
        };
        let mut mapper = IndexMap::new();
        mapper.insert("pass".to_string(), success);
        TransCfg {
            pos: self.pos(at),
            from_pos: self.pos(at),
            from,
            to: None,
            to_pos: None,
            on_event: None,
            set: Vec::new(),
            selector: Some(SelectorCfg {
                function,
                mapper,
                default: Some(otherwise),
                enum_values: None,
            }),
            choice: None,
        }
    }
}

/// An `INT` literal (digits) as harel's `int(n)`: an int of any size. Past Python's 4300
/// digits, where harel's `int()` raises, it is an infinite number of seconds.
fn int_value(text: &str) -> Value {
    crate::pynum::int_value(text).unwrap_or_else(|| pyvalue::float(f64::INFINITY))
}

/// harel's `_refuse_machine_only`: `ttl` and `context` belong to a machine.
fn refuse_machine_only(cfg: &StateCfg, what: &str) -> Result<(), String> {
    if cfg.ttl.is_some() {
        return Err(format!(
            "`ttl` is only allowed at the machine level, not on {what}"
        ));
    }
    if cfg.context_schema.is_some() {
        return Err(format!(
            "`context` is only allowed at the machine level, not on {what}"
        ));
    }
    Ok(())
}

fn field_type(s: &str) -> FieldType {
    FieldType::parse(s).unwrap_or(FieldType::Any)
}

fn param_kind(s: &str) -> ParamKind {
    match s {
        "action" => ParamKind::Action,
        "state" => ParamKind::State,
        "guard" => ParamKind::Guard,
        "event" => ParamKind::Event,
        _ => ParamKind::Value,
    }
}
