//! The syntax tree -> a [`Program`]: harel's `_ToProgram` transformer.
//!
//! Each machine and fragment becomes a [`StateCfg`], the typed equivalent of the
//! normalized config dict harel's builder consumes. The dict semantics are kept on
//! purpose: a repeated scalar item (`initial`, `timeout`, ...) is last-wins, a repeated
//! state name replaces the earlier state in the earlier one's place, and the
//! structural errors (`ttl` on a state, a bad namespace, ...) are raised in the order
//! harel's bottom-up transformer raises them (children before their parent).

use indexmap::IndexMap;

use super::ast::{self, At, Item, Lit, Operand, Pred, Stmt};
use super::error::DslError;
use crate::definition::{ArithOp, CmpOp, EventType, Expr, FieldSpec, FieldType, Source};
use crate::pyvalue;
use crate::Value;

/// Index of a source file in the loader's table (0 for a lone parsed text).
pub(crate) type FileId = usize;

/// A position in a specific source file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SrcPos {
    pub file: FileId,
    pub line: usize,
    pub col: usize,
}

/// An action reference before or after binding.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ActionCfg {
    /// As written: a bare handler name (`literal == false`) or a dotted path.
    Spec {
        literal: bool,
        name: String,
        inputs: IndexMap<String, InputCfg>,
    },
    /// Bound: the function and the inputs with value parameters substituted.
    Resolved {
        function: String,
        inputs: IndexMap<String, InputCfg>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum InputCfg {
    Lit(Value),
    /// A `value` fragment-parameter reference (`{__param__: name}`).
    Param(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TimeoutCfg {
    /// A literal or a substituted value parameter.
    Value(Value),
    Context(String),
    Param(String),
}

/// A predicate before named guards are resolved.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PredCfg {
    Leaf {
        source: Source,
        field: String,
        op: CmpOp,
        value: Value,
        value_ref: Option<(Source, String)>,
    },
    All(Vec<PredCfg>),
    Any(Vec<PredCfg>),
    Not(Box<PredCfg>),
    /// A reference to a named guard (`where ok`).
    Guard(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AssignCfg {
    pub field: String,
    pub expr: Expr,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OnEventCfg {
    /// The kinds joined with `|` (harel's `type`).
    pub kind: String,
    /// Where each kind is written, in order.
    pub kinds_pos: Vec<SrcPos>,
    pub pred: Option<PredCfg>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SelectorCfg {
    pub function: ActionCfg,
    pub mapper: IndexMap<String, String>,
    pub default: Option<String>,
    pub enum_values: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChoiceCfg {
    pub branches: Vec<(PredCfg, String, Vec<AssignCfg>)>,
    pub default: Option<String>,
    pub default_set: Vec<AssignCfg>,
    /// Where each target is written: the branches', then the default's.
    pub targets_pos: Vec<SrcPos>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TransCfg {
    pub pos: SrcPos,
    pub from: String,
    /// Where the source name is written (an unresolvable one is pointed at there).
    pub from_pos: SrcPos,
    pub to: Option<String>,
    /// Where the target name is written.
    pub to_pos: Option<SrcPos>,
    pub on_event: Option<OnEventCfg>,
    pub set: Vec<AssignCfg>,
    pub selector: Option<SelectorCfg>,
    pub choice: Option<ChoiceCfg>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ArgCfg {
    Name(String),
    Dotted(String),
    Lit(Value),
    Pred(PredCfg),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UseCfg {
    pub fragment: String,
    pub alias: Option<String>,
    pub args: IndexMap<String, ArgCfg>,
    pub pos: SrcPos,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamKind {
    Action,
    State,
    Guard,
    Value,
    Event,
}

/// A machine, fragment, state or inline-`invoke` body: harel's config dict.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct StateCfg {
    pub pos: Option<SrcPos>,
    pub orthogonal: bool,
    pub start: Option<String>,
    pub on_enter: Option<ActionCfg>,
    pub on_exit: Option<ActionCfg>,
    pub on_activity: Option<ActionCfg>,
    pub timeout: Option<TimeoutCfg>,
    pub ttl: Option<u64>,
    pub context_schema: Option<IndexMap<String, FieldSpec>>,
    pub outcome: Option<String>,
    pub carry: Option<Vec<String>>,
    pub defer: Option<Vec<String>>,
    pub allow_history: Option<bool>,
    pub cancel_on_failure: Option<bool>,
    pub invoke: Option<String>,
    pub invoke_each: Option<(String, String)>,
    pub invoke_inline: Option<Box<StateCfg>>,
    pub invoke_with: Option<IndexMap<String, String>>,
    pub states: IndexMap<String, Box<StateCfg>>,
    pub transitions: Vec<TransCfg>,
    pub uses: Vec<UseCfg>,
    /// A fragment's parameters, in declaration order.
    pub params: Vec<(String, ParamKind)>,
    /// A fragment's file (harel's `__src__`).
    pub src: Option<FileId>,
}

/// An `import` statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    /// The path as written (relative to the importing file).
    pub path: String,
    pub alias: Option<String>,
    pub line: usize,
    pub column: usize,
}

/// One parsed `.stm` file (no import resolution): what it declares, by name in
/// declaration order, as harel's `Program` holds it (a name declared twice keeps
/// its first place and its last body).
#[derive(Debug, Clone, Default)]
pub struct Program {
    pub machines: Vec<String>,
    pub fragments: Vec<String>,
    pub events: Vec<String>,
    pub guards: Vec<String>,
    pub imports: Vec<Import>,
    /// `bind { handler = impl }`, merged over every `bind` block.
    pub bindings: IndexMap<String, String>,
    pub(crate) machine_cfgs: IndexMap<String, Box<StateCfg>>,
    pub(crate) fragment_cfgs: IndexMap<String, Box<StateCfg>>,
    pub(crate) event_types: IndexMap<String, EventType>,
    pub(crate) guard_cfgs: IndexMap<String, PredCfg>,
}

type TResult<T> = Result<T, DslError>;

struct Transform<'a> {
    src: &'a str,
    file: FileId,
}

/// Parse `src` (file `file`) into a [`Program`]. Errors carry no file name.
pub(crate) fn build_program(src: &str, file: FileId) -> TResult<Program> {
    let stmts = super::parser::parse_program(src)?;
    Transform { src, file }.program(stmts)
}

/// `repr()` of a string, as harel's messages quote names.
pub(crate) fn py_repr(s: &str) -> String {
    pyvalue::repr(&Value::String(s.to_string()))
}

impl Transform<'_> {
    fn err(&self, message: impl Into<String>, at: At) -> DslError {
        DslError::at(message, self.src, at.line, at.col)
    }

    fn pos(&self, at: At) -> SrcPos {
        SrcPos {
            file: self.file,
            line: at.line,
            col: at.col,
        }
    }

    fn program(&self, stmts: Vec<Stmt>) -> TResult<Program> {
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

    fn action(&self, a: ast::Action) -> TResult<ActionCfg> {
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

    fn trigger(&self, t: Option<ast::Trigger>) -> TResult<Option<OnEventCfg>> {
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

    fn assigns(&self, set: Option<Vec<ast::Assignment>>) -> TResult<Vec<AssignCfg>> {
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
            out.push(AssignCfg { field, expr });
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

    fn pred(&self, p: &Pred) -> TResult<PredCfg> {
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
    fn lit(&self, l: &Lit) -> TResult<Value> {
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
