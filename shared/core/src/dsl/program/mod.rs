//! The syntax tree -> a [`Program`]: harel's `_ToProgram` transformer.
//!
//! Each machine and fragment becomes a [`StateCfg`], the typed equivalent of the
//! normalized config dict harel's builder consumes. The dict semantics are kept on
//! purpose: a repeated scalar item (`initial`, `timeout`, ...) is last-wins, a repeated
//! state name replaces the earlier state in the earlier one's place, and the
//! structural errors (`ttl` on a state, a bad namespace, ...) are raised in the order
//! harel's bottom-up transformer raises them (children before their parent).

mod transform;
mod values;

use indexmap::IndexMap;

use super::ast::At;
use super::error::DslError;
use crate::definition::{Assign, CmpOp, EventType, FieldSpec, Source};
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
    pub branches: Vec<(PredCfg, String, Vec<Assign>)>,
    pub default: Option<String>,
    pub default_set: Vec<Assign>,
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
    pub set: Vec<Assign>,
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

// Its methods are split over the child modules: `transform` (statements, items and
// states) and `values` (actions, triggers, `set` clauses, conditions and literals).
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
}
