//! Fragment expansion (harel's `_expand`): resolving a state's handlers, guards and
//! value parameters in its scope, instantiating each `use` as a child state, and
//! substituting state and event parameters.

use std::collections::{BTreeSet, HashMap};

use indexmap::IndexMap;

use super::{Acc, Ctx, LResult, Loader, MAX_STATE_DEPTH};
use crate::dsl::error::DslError;
use crate::dsl::program::{
    py_repr, ActionCfg, ArgCfg, InputCfg, ParamKind, PredCfg, SrcPos, StateCfg, TimeoutCfg, TransCfg, UseCfg,
};
use crate::Value;

impl Loader {
    /// harel's `_expand`: resolve hooks, timeout, transitions and an inline body in
    /// scope `ctx`, recurse into the states, then splice the uses as child states.
    pub(super) fn expand(
        &self,
        cfg: Box<StateCfg>,
        frags: &IndexMap<String, Box<StateCfg>>,
        ctx: &Ctx,
        acc: &mut Acc,
    ) -> LResult<Box<StateCfg>> {
        acc.depth += 1;
        if acc.depth > MAX_STATE_DEPTH {
            let msg =
                format!("states nest too deeply (more than {MAX_STATE_DEPTH} levels, fragments included)");
            return Err(match cfg.pos {
                Some(pos) => self.error_at(msg, pos),
                None => DslError::new(msg),
            });
        }
        let r = self.expand_inner(cfg, frags, ctx, acc);
        acc.depth -= 1;
        r
    }

    fn expand_inner(
        &self,
        mut cfg: Box<StateCfg>,
        frags: &IndexMap<String, Box<StateCfg>>,
        ctx: &Ctx,
        acc: &mut Acc,
    ) -> LResult<Box<StateCfg>> {
        let uses = std::mem::take(&mut cfg.uses);
        self.resolve_own(&mut cfg, ctx, acc)?;
        if let Some(inline) = cfg.invoke_inline.take() {
            cfg.invoke_inline = Some(self.expand(inline, frags, ctx, acc)?);
        }
        let mut states = IndexMap::with_capacity(cfg.states.len() + uses.len());
        for (name, st) in std::mem::take(&mut cfg.states) {
            states.insert(name, self.expand(st, frags, ctx, acc)?);
        }
        for inc in uses {
            let (local, expanded) = self.instantiate(&inc, frags, ctx, acc)?;
            if states.contains_key(&local) {
                return Err(self.collision(&inc, &local));
            }
            states.insert(local, expanded);
        }
        cfg.states = states;
        Ok(cfg)
    }

    fn collision(&self, inc: &UseCfg, local: &str) -> DslError {
        self.error_at(
            format!(
                "use {} as {} collides with an existing state",
                py_repr(&inc.fragment),
                py_repr(local)
            ),
            inc.pos,
        )
        .with_hint("give the instance another name with `as`")
    }

    /// A config's own references: hooks, timeout, transitions (not its children).
    fn resolve_own(&self, cfg: &mut StateCfg, ctx: &Ctx, acc: &mut Acc) -> LResult<()> {
        for hook in [&mut cfg.on_enter, &mut cfg.on_exit, &mut cfg.on_activity] {
            if let Some(a) = hook.take() {
                *hook = Some(resolve_action(a, ctx, acc));
            }
        }
        if let Some(TimeoutCfg::Param(p)) = &cfg.timeout {
            match ctx.values.get(p) {
                Some(v) => cfg.timeout = Some(TimeoutCfg::Value(v.clone())),
                None => {
                    acc.unbound_v.insert(p.clone());
                }
            }
        }
        let transitions = std::mem::take(&mut cfg.transitions);
        cfg.transitions = transitions
            .into_iter()
            .map(|t| self.resolve_trans(t, ctx, acc))
            .collect::<LResult<Vec<_>>>()?;
        Ok(())
    }

    fn resolve_trans(&self, mut t: TransCfg, ctx: &Ctx, acc: &mut Acc) -> LResult<TransCfg> {
        if let Some(sel) = &mut t.selector {
            let f = std::mem::replace(
                &mut sel.function,
                ActionCfg::Resolved {
                    function: String::new(),
                    inputs: IndexMap::new(),
                },
            );
            sel.function = resolve_action(f, ctx, acc);
        }
        if let Some(oe) = &mut t.on_event {
            if let Some(p) = oe.pred.take() {
                oe.pred = Some(self.resolve_guards(p, ctx, acc, t.pos, &mut Vec::new())?);
            }
        }
        if let Some(choice) = &mut t.choice {
            for b in &mut choice.branches {
                let p = std::mem::replace(&mut b.0, PredCfg::All(Vec::new()));
                b.0 = self.resolve_guards(p, ctx, acc, t.pos, &mut Vec::new())?;
            }
        }
        Ok(t)
    }

    /// Replace named-guard references by their predicates (resolved in `ctx` too).
    fn resolve_guards(
        &self,
        p: PredCfg,
        ctx: &Ctx,
        acc: &mut Acc,
        at: SrcPos,
        active: &mut Vec<String>,
    ) -> LResult<PredCfg> {
        Ok(match p {
            PredCfg::Guard(name) => match ctx.guards.get(&name) {
                Some(g) => {
                    if active.contains(&name) {
                        return Err(self.error_at(format!("guard {} refers to itself", py_repr(&name)), at));
                    }
                    if active.len() >= MAX_STATE_DEPTH {
                        return Err(
                            self.error_at(format!("guard {} nests guards too deeply", py_repr(&name)), at)
                        );
                    }
                    active.push(name);
                    let r = self.resolve_guards(g.clone(), ctx, acc, at, active)?;
                    active.pop();
                    r
                }
                None => {
                    acc.unbound_g.insert(name.clone());
                    PredCfg::Guard(name)
                }
            },
            PredCfg::All(v) => PredCfg::All(
                v.into_iter()
                    .map(|c| self.resolve_guards(c, ctx, acc, at, active))
                    .collect::<LResult<_>>()?,
            ),
            PredCfg::Any(v) => PredCfg::Any(
                v.into_iter()
                    .map(|c| self.resolve_guards(c, ctx, acc, at, active))
                    .collect::<LResult<_>>()?,
            ),
            PredCfg::Not(c) => PredCfg::Not(Box::new(self.resolve_guards(*c, ctx, acc, at, active)?)),
            leaf @ PredCfg::Leaf { .. } => leaf,
        })
    }

    /// harel's `_instantiate`: a `use` -> (local state name, expanded fragment body).
    fn instantiate(
        &self,
        inc: &UseCfg,
        frags: &IndexMap<String, Box<StateCfg>>,
        ctx: &Ctx,
        acc: &mut Acc,
    ) -> LResult<(String, Box<StateCfg>)> {
        let (local, clone, child) = self.instance(inc, frags, ctx, acc)?;
        acc.using.push(inc.fragment.clone());
        let expanded = self.expand(clone, frags, &child, acc);
        acc.using.pop();
        Ok((local, expanded?))
    }

    /// A `use`'s fragment body (its targets and events substituted) and its scope.
    fn instance(
        &self,
        inc: &UseCfg,
        frags: &IndexMap<String, Box<StateCfg>>,
        ctx: &Ctx,
        acc: &mut Acc,
    ) -> LResult<(String, Box<StateCfg>, Ctx)> {
        let name = &inc.fragment;
        let Some(frag) = frags.get(name) else {
            let mut e = self.error_at(format!("use of unknown fragment {}", py_repr(name)), inc.pos);
            if !frags.is_empty() {
                let known: Vec<&str> = frags.keys().map(String::as_str).collect();
                e = e.with_hint(format!("known fragments: {}", known.join(", ")));
            }
            return Err(e);
        };
        if acc.using.contains(name) {
            return Err(self.error_at(format!("fragment {} uses itself", py_repr(name)), inc.pos));
        }
        let mut frag = frag.clone();
        let frag_src = frag.src.take().unwrap_or(ctx.source);
        let mut params: IndexMap<String, ParamKind> = IndexMap::new();
        for (p, k) in std::mem::take(&mut frag.params) {
            params.insert(p, k);
        }
        let unknown: BTreeSet<&str> = inc
            .args
            .keys()
            .filter(|a| !params.contains_key(*a))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(self.error_at(
                format!(
                    "use {}: unknown args: {}",
                    py_repr(name),
                    unknown.into_iter().collect::<Vec<_>>().join(", ")
                ),
                inc.pos,
            ));
        }
        let missing: BTreeSet<&str> = params
            .keys()
            .filter(|p| !inc.args.contains_key(*p))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(self.error_at(
                format!(
                    "use {}: missing args: {}",
                    py_repr(name),
                    missing.into_iter().collect::<Vec<_>>().join(", ")
                ),
                inc.pos,
            ));
        }

        let mut child = Ctx {
            source: frag_src,
            ..ctx.clone()
        };
        child.states.clear();
        child.events.clear();
        let bad = |what: &str, p: &str| {
            self.error_at(
                format!("use {}: arg {} must be {what}", py_repr(name), py_repr(p)),
                inc.pos,
            )
        };
        for (pname, kind) in &params {
            let arg = &inc.args[pname];
            match kind {
                ParamKind::Action => match arg {
                    ArgCfg::Dotted(d) => {
                        child.bindings.insert(pname.clone(), d.clone());
                    }
                    ArgCfg::Name(n) => {
                        // forward a handler of the enclosing scope
                        let target = match ctx.bindings.get(n) {
                            Some(t) => t.clone(),
                            None => {
                                acc.unbound.insert(n.clone());
                                n.clone()
                            }
                        };
                        child.bindings.insert(pname.clone(), target);
                    }
                    _ => return Err(bad("an action handler or path", pname)),
                },
                ParamKind::State => match arg {
                    ArgCfg::Name(n) | ArgCfg::Dotted(n) => {
                        child
                            .states
                            .insert(pname.clone(), ctx.states.get(n).unwrap_or(n).clone());
                    }
                    _ => return Err(bad("a state name", pname)),
                },
                ParamKind::Event => match arg {
                    ArgCfg::Name(n) | ArgCfg::Dotted(n) => {
                        child
                            .events
                            .insert(pname.clone(), ctx.events.get(n).unwrap_or(n).clone());
                    }
                    _ => return Err(bad("an event name", pname)),
                },
                ParamKind::Guard => match arg {
                    ArgCfg::Pred(p) => {
                        child.guards.insert(pname.clone(), p.clone());
                    }
                    ArgCfg::Name(n) => match ctx.guards.get(n) {
                        Some(g) => {
                            child.guards.insert(pname.clone(), g.clone());
                        }
                        None => {
                            acc.unbound_g.insert(n.clone());
                        }
                    },
                    _ => return Err(bad("a guard predicate or name", pname)),
                },
                ParamKind::Value => match arg {
                    ArgCfg::Lit(v) => {
                        child.values.insert(pname.clone(), v.clone());
                    }
                    ArgCfg::Name(n) => match ctx.values.get(n) {
                        // forward a value parameter of the enclosing fragment
                        Some(v) => {
                            child.values.insert(pname.clone(), v.clone());
                        }
                        // a bare `true` / `false` is the boolean (harel reads it as a name)
                        None if n == "true" || n == "false" => {
                            child.values.insert(pname.clone(), Value::Bool(n == "true"));
                        }
                        None => {
                            acc.unbound_v.insert(n.clone());
                        }
                    },
                    _ => return Err(bad("a literal value", pname)),
                },
            }
        }

        let local = inc
            .alias
            .clone()
            .unwrap_or_else(|| name.rsplit('.').next().unwrap_or(name).to_string());
        let mut clone = frag;
        substitute_targets(&mut clone, &child.states);
        substitute_events(&mut clone, &child.events);
        Ok((local, clone, child))
    }
}

/// An action spec -> the bound function, value parameters substituted in its inputs.
fn resolve_action(a: ActionCfg, ctx: &Ctx, acc: &mut Acc) -> ActionCfg {
    match a {
        ActionCfg::Spec {
            literal,
            name,
            inputs,
        } => {
            let function = if literal {
                name
            } else if let Some(f) = ctx.bindings.get(&name) {
                f.clone()
            } else {
                acc.unbound.insert(name.clone());
                name
            };
            let inputs = inputs
                .into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        InputCfg::Param(p) => match ctx.values.get(&p) {
                            Some(val) => InputCfg::Lit(val.clone()),
                            None => {
                                acc.unbound_v.insert(p.clone());
                                InputCfg::Param(p)
                            }
                        },
                        lit => lit,
                    };
                    (k, v)
                })
                .collect();
            ActionCfg::Resolved { function, inputs }
        }
        resolved => resolved,
    }
}

/// harel's `_substitute_targets`: transition / selector-branch / choice targets that
/// name a state parameter (recursively through the states; a selector's `else` and an
/// inline `invoke` body are left alone, as harel leaves them).
fn substitute_targets(cfg: &mut StateCfg, subst: &HashMap<String, String>) {
    if subst.is_empty() {
        return;
    }
    let sub = |s: &mut String| {
        if let Some(r) = subst.get(s.as_str()) {
            *s = r.clone();
        }
    };
    for t in &mut cfg.transitions {
        if let Some(to) = &mut t.to {
            sub(to);
        }
        if let Some(sel) = &mut t.selector {
            sel.mapper.values_mut().for_each(sub);
        }
        if let Some(choice) = &mut t.choice {
            choice.branches.iter_mut().for_each(|b| sub(&mut b.1));
            if let Some(d) = &mut choice.default {
                sub(d);
            }
        }
    }
    for st in cfg.states.values_mut() {
        substitute_targets(st, subst);
    }
}

/// harel's `_substitute_events`: trigger kinds that name an event parameter.
fn substitute_events(cfg: &mut StateCfg, subst: &HashMap<String, String>) {
    if subst.is_empty() {
        return;
    }
    for t in &mut cfg.transitions {
        if let Some(oe) = &mut t.on_event {
            let kinds: Vec<String> = oe
                .kind
                .split('|')
                .map(|k| {
                    let k = k.trim();
                    subst.get(k).cloned().unwrap_or_else(|| k.to_string())
                })
                .collect();
            oe.kind = kinds.join("|");
        }
    }
    for st in cfg.states.values_mut() {
        substitute_events(st, subst);
    }
}
