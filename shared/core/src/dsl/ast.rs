//! The syntax tree the parser produces: one node per grammar rule of harel's
//! `grammar.lark`, with the source position harel's transformer reads (`meta`: the
//! first token of the rule).

/// A 1-based line and character column in the parsed text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct At {
    pub line: usize,
    pub col: usize,
}

/// Where a transition's state names are written: its source, then its targets in the
/// order they appear.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct NamesAt {
    pub from: At,
    pub targets: Vec<At>,
}

/// A literal value (`?value: STRING | SIGNED_NUMBER | BOOL | list`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    Str(String),
    /// The number as written (sign included), converted by `_lit`'s rule later.
    Num(String, At),
    Bool(bool),
    List(Vec<Lit>),
}

/// `NAME | DOTTED` where both are accepted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Path {
    pub text: String,
    pub dotted: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stmt {
    Import {
        path: String,
        alias: Option<String>,
        at: At,
    },
    Bind(Vec<(String, String)>),
    Guard {
        name: String,
        pred: Pred,
        at: At,
    },
    Event {
        name: String,
        fields: Vec<(String, String, bool)>,
        at: At,
    },
    Machine {
        name: String,
        items: Vec<Item>,
        at: At,
    },
    Fragment {
        name: String,
        params: Vec<(String, String)>,
        items: Vec<Item>,
        at: At,
    },
}

/// One comparison side that may be a reference: a bare name / string (the event's
/// field) or a `DOTTED` namespace reference.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Operand {
    /// A bare field (`NAME` or `STRING`): the event's.
    Field(String),
    Dotted(String),
    Lit(Lit),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pred {
    Cmp {
        lhs: Operand,
        op: String,
        rhs: Operand,
        at: At,
    },
    Guard(String),
    All(Vec<Pred>),
    Any(Vec<Pred>),
    Not(Box<Pred>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum InputVal {
    Lit(Lit),
    Param(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Action {
    pub target: Path,
    pub inputs: Vec<(String, InputVal)>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TimeoutSpec {
    /// `INT`, as written.
    Literal(String),
    Context(String),
    Param(String),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Trigger {
    pub kinds: Vec<String>,
    /// Where each of `kinds` is written (an undeclared event is pointed at).
    pub kinds_at: Vec<At>,
    pub pred: Option<Pred>,
}

/// `DOTTED = operand [ARITH operand]`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assignment {
    pub target: String,
    pub at: At,
    pub left: (Operand, At),
    pub arith: Option<(char, Operand, At)>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Arg {
    Name(String),
    Dotted(String),
    Lit(Lit),
    Pred(Pred),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContextField {
    pub name: String,
    pub ty: String,
    pub optional: bool,
    pub default: Option<Lit>,
    pub at: At,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
    Initial(String),
    OnEnter(Action),
    OnExit(Action),
    OnActivity(Action),
    Timeout(TimeoutSpec),
    /// `ttl INT`, as written.
    Ttl(String, At),
    Context(Vec<ContextField>),
    Outcome(String),
    Carry(Vec<String>),
    Defer(Vec<String>),
    NoHistory,
    CancelOnFailure,
    Invoke {
        fqn: Option<String>,
        each: Option<(String, String)>,
        inline: Option<(Vec<Item>, At)>,
    },
    InvokeWith(Vec<(String, String)>),
    Use {
        name: String,
        args: Vec<(String, Arg)>,
        alias: Option<String>,
        at: At,
    },
    State {
        orthogonal: bool,
        name: String,
        items: Vec<Item>,
        at: At,
    },
    Final {
        name: String,
        outcome: String,
        items: Vec<Item>,
        at: At,
    },
    Transition {
        from: String,
        to: String,
        trigger: Option<Trigger>,
        set: Option<Vec<Assignment>>,
        at: At,
        /// Where the source and the target names are written (an error points at them).
        names_at: NamesAt,
    },
    Choice {
        from: String,
        trigger: Option<Trigger>,
        set: Option<Vec<Assignment>>,
        branches: Vec<(Pred, String, Option<Vec<Assignment>>)>,
        default: Option<(String, Option<Vec<Assignment>>)>,
        at: At,
        /// Where the source and the targets (the branches', then the default's) are written.
        names_at: NamesAt,
    },
    Select {
        /// Where the source name is written.
        from_at: At,
        from: String,
        action: Action,
        returns: Option<Vec<Lit>>,
        trigger: Option<Trigger>,
        branches: Vec<(Lit, String)>,
        default: Option<String>,
        at: At,
    },
    Join {
        /// Where the source name is written.
        from_at: At,
        from: String,
        all: bool,
        success: String,
        otherwise: String,
        at: At,
    },
}
