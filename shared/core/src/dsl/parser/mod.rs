//! A hand-written recursive-descent parser for harel's `grammar.lark`.
//!
//! harel parses with Lark's Earley parser, which accepts any input that has *some*
//! derivation. The grammar is LL(1) almost everywhere; the few places where a prefix
//! reads two ways and only a later token decides are parsed here by trying the
//! reading harel prefers first (Earley's `resolve` picks it when both derive) and
//! falling back to the other one:
//!
//! * `from A to B on enter f`: a trigger on the event `enter`, or the transition
//!   followed by an `on enter f` hook (harel prefers the hook);
//! * `invoke X`: `X` the machine to invoke, or a bare `invoke` followed by an item
//!   starting with the word `X` (prefers the machine);
//! * `timeout context k`: the context key `k`, or a value parameter named `context`
//!   followed by an item (prefers the context key).
//!
//! Each of these sits at the start of an item of a `{ ... }` block: a choice point
//! of that block's (iterative) backtracking, which re-parses the rest of the block
//! only, remembering the positions from which it failed (linear in the worst case).
//! Inside conditions, `not` followed by a word that may end the condition is told
//! apart from a guard named `not` by a two-token lookahead.
//!
//! A syntax error is reported where harel reports it: at the furthest token no
//! derivation could consume (the position an Earley parser stops at), with the
//! union of what was expected there. harel's lexer also splits a keyword off the
//! front of a longer word (`fromA`); we do not, but find the position such a split
//! leads harel to (see [`refine`]). Nesting is bounded by [`MAX_NESTING`].

mod cursor;
mod glued;
mod items;
mod predicates;
mod report;
mod statements;
mod terminals;
#[cfg(test)]
mod tests;
mod transitions;

use std::collections::HashSet;

use super::ast::*;
use super::error::DslError;
use super::lexer::{lex, Token};
use glued::{refine, Refined};

/// The marker of a failed parse; what failed is in [`Parser::far`].
#[derive(Debug)]
pub(crate) struct Fail;

type PResult<T> = Result<T, Fail>;

#[derive(Debug, Clone)]
enum Found {
    /// The token at this index.
    Tok(usize),
    /// A description of what is there (for a failure inside a token).
    Text(String),
}

/// The furthest failure so far.
#[derive(Debug, Clone)]
struct Far {
    offset: usize,
    line: usize,
    col: usize,
    found: Found,
    expected: Vec<&'static str>,
    /// A message overriding the `expected ..., found ...` one.
    message: Option<String>,
}

// Its methods are split by concern over the child modules: `cursor` (tokens and the
// furthest failure), `terminals`, `statements`, `items`, `transitions`, `predicates`,
// and `report` and `glued` for the error.
pub(crate) struct Parser<'s> {
    src: &'s str,
    toks: Vec<Token>,
    pos: usize,
    far: Option<Far>,
    /// item positions from which the rest of their block fails to parse (memo)
    failed_blocks: HashSet<usize>,
    /// the current nesting (blocks, parentheses, lists, negations)
    depth: usize,
}

/// How deep blocks, parentheses, lists and negations may nest.
pub(crate) const MAX_NESTING: usize = 100;

const ITEM: &str = "a state item (`state`, `final`, `from`, `on`, `initial`, ...)";
const DECL: &str = "a declaration (`machine`, `fragment`, `event`, `guard`, `bind` or `import`)";
const NAME: &str = "a name";
const REF: &str = "a name or a string";
const VALUE: &str = "a value (a string, a number, `true`/`false` or a `[list]`)";
const OPERATOR: &str = "a comparison operator (`==`, `!=`, `<`, `<=`, `>`, `>=`, `in`)";
const TYPES: [&str; 5] = ["string", "int", "float", "bool", "any"];
const PARAM_KINDS: [&str; 5] = ["action", "state", "guard", "value", "event"];
/// the words that start an item
const ITEM_WORDS: [&str; 17] = [
    "initial",
    "on",
    "timeout",
    "ttl",
    "context",
    "outcome",
    "carry",
    "defer",
    "no",
    "cancel_on_failure",
    "invoke",
    "with",
    "use",
    "state",
    "orthogonal",
    "final",
    "from",
];
const DECL_WORDS: [&str; 6] = ["import", "bind", "guard", "event", "machine", "fragment"];

/// The fixed words in none of the lists above: the rest of the items', the transitions',
/// the conditions' and the values'.
const OTHER_WORDS: [&str; 29] = [
    "as", "enter", "exit", "activity", "history", "for", "in", "to", "choose", "when", "else", "select",
    "returns", "join", "all", "any", "where", "set", "and", "or", "not", "true", "false", "string", "int",
    "float", "bool", "action", "value",
];

/// Every fixed word of the language, each once: the words of harel's `grammar.lark`
/// (its keywords, types, parameter kinds and booleans). An editor offers these where
/// no name is expected, so a word the grammar gains belongs in one of the lists it is
/// made of (the harel parity test compares it with the grammar).
pub const KEYWORDS: &[&str] = &concat::<{ DECL_WORDS.len() + ITEM_WORDS.len() + OTHER_WORDS.len() }>(&[
    &DECL_WORDS,
    &ITEM_WORDS,
    &OTHER_WORDS,
]);

/// `parts` one after the other, as an array of `N` words (evaluated at compile time,
/// where an `N` that is not their total length fails the build).
const fn concat<const N: usize>(parts: &[&[&'static str]]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut n = 0;
    let mut p = 0;
    while p < parts.len() {
        let mut i = 0;
        while i < parts[p].len() {
            out[n] = parts[p][i];
            n += 1;
            i += 1;
        }
        p += 1;
    }
    assert!(n == N, "KEYWORDS: N is not the total length of its parts");
    out
}

/// Parse a whole program into its statements.
pub(crate) fn parse_program(src: &str) -> Result<Vec<Stmt>, DslError> {
    match try_parse(src) {
        Ok(stmts) => Ok(stmts),
        Err(failure) => Err(match refine(src, failure, 6) {
            Refined::Fails(e) | Refined::Accepted(e) => e.err,
        }),
    }
}

/// A syntax error and where it is (byte offset), for [`refine`].
struct SyntaxError {
    err: DslError,
    offset: usize,
    eof: bool,
}

/// A failed parse: the error, and the places where harel's lexer would have split a
/// word after a keyword it starts with (offset, the keyword, the word).
struct Failure {
    error: SyntaxError,
    splits: Vec<(usize, &'static str, String)>,
}

fn try_parse(src: &str) -> Result<Vec<Stmt>, Failure> {
    let mut p = Parser {
        src,
        toks: lex(src),
        pos: 0,
        far: None,
        failed_blocks: HashSet::new(),
        depth: 0,
    };
    match p.program() {
        Ok(stmts) => Ok(stmts),
        Err(Fail) => Err(Failure {
            error: p.error(),
            splits: p.glued_splits(),
        }),
    }
}
