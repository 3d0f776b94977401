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

use std::collections::HashSet;

use super::ast::*;
use super::error::DslError;
use super::lexer::{decode_string, lex, TokKind, Token};
use crate::suggest::edit_distance;

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

enum Refined {
    /// The input fails even with glued keywords split off: harel's error.
    Fails(SyntaxError),
    /// harel would accept the input by splitting a glued keyword; the strict error.
    Accepted(SyntaxError),
}

/// harel's lexer (Lark's dynamic Earley lexer) also matches a keyword at the start of
/// a longer word: it reads `fromA to B` as `from A to B`, and fails `not_rejected`
/// (where an item may start) after `no`, expecting `history`. We require keywords
/// to be whole words, but report a failure where harel does: when the strict parse
/// fails at a word that starts with a keyword expected there, the input is parsed
/// again with that keyword split off, and the furthest failure wins. Only error paths
/// pay for this.
fn refine(src: &str, failure: Failure, depth: usize) -> Refined {
    let Failure {
        error: strict,
        splits,
    } = failure;
    let mut best: Option<SyntaxError> = None;
    for (split, word, token) in splits {
        let glued = format!(
            "`{token}` reads as the keyword `{word}` followed by `{}`",
            &token[word.len()..]
        );
        let src2 = format!("{} {}", &src[..split], &src[split..]);
        let e2 = match try_parse(&src2) {
            Ok(_) => {
                let mut e = strict;
                e.err.hint = Some(format!(
                    "{glued} in harel; put a space after `{word}` if that is meant"
                ));
                return Refined::Accepted(e);
            }
            Err(f2) if depth > 0 => match refine(&src2, f2, depth - 1) {
                Refined::Fails(e) => e,
                Refined::Accepted(_) => {
                    let mut e = strict;
                    e.err.hint = Some(format!(
                        "{glued} in harel; put a space after `{word}` if that is meant"
                    ));
                    return Refined::Accepted(e);
                }
            },
            Err(f2) => f2.error,
        };
        let mapped = map_back(src, split, e2, &glued);
        if mapped.offset > best.as_ref().map_or(strict.offset, |b| b.offset) {
            best = Some(mapped);
        }
    }
    Refined::Fails(best.unwrap_or(strict))
}

/// An error in `src` with a space inserted at `split`, located in `src`.
fn map_back(src: &str, split: usize, mut e: SyntaxError, glued: &str) -> SyntaxError {
    if e.eof {
        let (line, column, snippet) = end_position(src);
        e.err.line = Some(line);
        e.err.column = Some(column);
        e.err.snippet = Some(snippet);
        e.offset = src.len();
        return e;
    }
    if e.offset > split {
        e.offset -= 1;
        let split_line = src[..split].matches('\n').count() + 1;
        if e.err.line == Some(split_line) {
            e.err.column = e.err.column.map(|c| c - 1);
        }
    }
    e.err.snippet = e
        .err
        .line
        .and_then(|l| super::error::source_line(src, l))
        .map(str::to_string);
    if e.err.hint.is_none() {
        e.err.hint = Some(glued.to_string());
    }
    e
}

impl<'s> Parser<'s> {
    // --- token access -------------------------------------------------------------

    fn tok(&self, i: usize) -> &Token {
        &self.toks[i.min(self.toks.len() - 1)]
    }

    fn peek(&self) -> &Token {
        self.tok(self.pos)
    }

    fn text(&self, i: usize) -> &'s str {
        self.tok(i).text(self.src)
    }

    fn at(&self) -> At {
        let t = self.peek();
        At {
            line: t.line,
            col: t.col,
        }
    }

    fn bump(&mut self) {
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
    }

    /// Whether token `i` is the word `kw`.
    fn word_at(&self, i: usize, kw: &str) -> bool {
        let t = self.tok(i);
        t.kind == TokKind::Name && t.text(self.src) == kw
    }

    fn punct_at(&self, i: usize, p: &str) -> bool {
        let t = self.tok(i);
        t.kind == TokKind::Punct && t.text(self.src) == p
    }

    fn kind_at(&self, i: usize) -> TokKind {
        self.tok(i).kind
    }

    // --- failure bookkeeping ------------------------------------------------------

    fn note(&mut self, offset: usize, line: usize, col: usize, found: Found, what: &'static str) {
        match &mut self.far {
            Some(far) if far.offset == offset => {
                if !far.expected.contains(&what) {
                    far.expected.push(what);
                }
            }
            Some(far) if far.offset > offset => {}
            Some(far) => {
                // the frontier moved on: reuse the allocation
                far.offset = offset;
                far.line = line;
                far.col = col;
                far.found = found;
                far.expected.clear();
                far.expected.push(what);
                far.message = None;
            }
            None => {
                self.far = Some(Far {
                    offset,
                    line,
                    col,
                    found,
                    expected: vec![what],
                    message: None,
                })
            }
        }
    }

    /// Record that `what` was expected at the current token.
    fn expected(&mut self, what: &'static str) {
        let t = *self.peek();
        self.note(t.start, t.line, t.col, Found::Tok(self.pos), what);
    }

    /// Fail at the current token, expecting `what`.
    fn fail<T>(&mut self, what: &'static str) -> PResult<T> {
        self.expected(what);
        Err(Fail)
    }

    /// Fail `k` bytes (ASCII characters) into the current token.
    fn fail_inside<T>(&mut self, k: usize, what: &'static str, message: Option<String>) -> PResult<T> {
        let t = *self.peek();
        let found = Found::Text(format!("`{}`", &t.text(self.src)[k..]));
        let offset = t.start + k;
        self.note(offset, t.line, t.col + k, found, what);
        if let (Some(msg), Some(far)) = (message, self.far.as_mut()) {
            if far.offset == offset && far.message.is_none() {
                far.message = Some(msg);
            }
        }
        Err(Fail)
    }

    fn is_word(&mut self, kw: &'static str, label: &'static str) -> bool {
        if self.word_at(self.pos, kw) {
            true
        } else {
            self.expected(label);
            false
        }
    }

    fn eat_word(&mut self, kw: &'static str, label: &'static str) -> bool {
        let ok = self.is_word(kw, label);
        if ok {
            self.bump();
        }
        ok
    }

    fn expect_word(&mut self, kw: &'static str, label: &'static str) -> PResult<()> {
        if self.eat_word(kw, label) {
            Ok(())
        } else {
            Err(Fail)
        }
    }

    fn eat_punct(&mut self, p: &'static str, label: &'static str) -> bool {
        if self.punct_at(self.pos, p) {
            self.bump();
            true
        } else {
            self.expected(label);
            false
        }
    }

    fn expect_punct(&mut self, p: &'static str, label: &'static str) -> PResult<()> {
        if self.eat_punct(p, label) {
            Ok(())
        } else {
            Err(Fail)
        }
    }

    // --- terminals ----------------------------------------------------------------

    /// `NAME` (any word, keywords included). A `DOTTED` here fails at its first dot,
    /// where the `NAME` it starts with ends (as the grammar's lexer sees it).
    fn name(&mut self, label: &'static str) -> PResult<String> {
        match self.peek().kind {
            TokKind::Name => {
                let s = self.text(self.pos).to_string();
                self.bump();
                Ok(s)
            }
            TokKind::Dotted => {
                let text = self.text(self.pos);
                let dot = text.find('.').unwrap_or(0);
                let msg = format!("expected {label}, found `{text}`: a name cannot contain `.` here");
                self.fail_inside(dot, label, Some(msg))
            }
            _ => self.fail(label),
        }
    }

    /// `STRING`, decoded.
    fn string(&mut self, label: &'static str) -> PResult<String> {
        if self.peek().kind != TokKind::Str {
            return self.fail(label);
        }
        let raw = self.text(self.pos);
        match decode_string(raw) {
            Ok(s) => {
                self.bump();
                Ok(s)
            }
            Err((k, why)) => {
                self.fail_inside(k, "a valid string escape", Some(format!("invalid string: {why}")))
            }
        }
    }

    /// `?ref: NAME | STRING`.
    fn ref_(&mut self, label: &'static str) -> PResult<String> {
        if self.peek().kind == TokKind::Str {
            self.string(label)
        } else {
            self.name(label)
        }
    }

    /// `NAME | DOTTED`.
    fn path(&mut self, label: &'static str) -> PResult<Path> {
        match self.peek().kind {
            TokKind::Name | TokKind::Dotted => {
                let dotted = self.peek().kind == TokKind::Dotted;
                let text = self.text(self.pos).to_string();
                self.bump();
                Ok(Path { text, dotted })
            }
            _ => self.fail(label),
        }
    }

    /// `INT` (digits only), as written.
    fn int(&mut self, label: &'static str) -> PResult<(String, At)> {
        let at = self.at();
        if self.peek().kind != TokKind::Num {
            return self.fail(label);
        }
        let text = self.text(self.pos);
        match text.bytes().position(|b| !b.is_ascii_digit()) {
            None => {
                let s = text.to_string();
                self.bump();
                Ok((s, at))
            }
            Some(0) => self.fail(label),
            Some(k) => self.fail_inside(k, "a whole number (no fraction or exponent)", None),
        }
    }

    /// `?value: STRING | SIGNED_NUMBER | BOOL | list`.
    fn value(&mut self, label: &'static str) -> PResult<Lit> {
        let t = *self.peek();
        match t.kind {
            TokKind::Str => Ok(Lit::Str(self.string(label)?)),
            TokKind::Num => {
                let s = t.text(self.src).to_string();
                self.bump();
                Ok(Lit::Num(
                    s,
                    At {
                        line: t.line,
                        col: t.col,
                    },
                ))
            }
            TokKind::Punct if matches!(t.text(self.src), "-" | "+") => {
                // SIGNED_NUMBER: the sign glued to the number
                let n = *self.tok(self.pos + 1);
                if n.kind == TokKind::Num && n.start == t.end {
                    let s = format!("{}{}", t.text(self.src), n.text(self.src));
                    self.bump();
                    self.bump();
                    Ok(Lit::Num(
                        s,
                        At {
                            line: t.line,
                            col: t.col,
                        },
                    ))
                } else {
                    self.fail(label)
                }
            }
            TokKind::Punct if t.text(self.src) == "[" => {
                self.bump();
                self.enter()?;
                let list = self.list_rest();
                self.depth -= 1;
                list
            }
            TokKind::Name if matches!(t.text(self.src), "true" | "false") => {
                self.bump();
                Ok(Lit::Bool(t.text(self.src) == "true"))
            }
            _ => self.fail(label),
        }
    }

    /// The rest of a `[value, ...]` list (the `[` consumed).
    fn list_rest(&mut self) -> PResult<Lit> {
        let mut items = Vec::new();
        if self.eat_punct("]", "`]`") {
            return Ok(Lit::List(items));
        }
        loop {
            items.push(self.value(VALUE)?);
            if self.eat_punct(",", "`,`") {
                continue;
            }
            self.expect_punct("]", "`]`")?;
            return Ok(Lit::List(items));
        }
    }

    fn starts_value(&self, i: usize) -> bool {
        let t = self.tok(i);
        match t.kind {
            TokKind::Str | TokKind::Num => true,
            TokKind::Punct => match t.text(self.src) {
                "[" => true,
                "-" | "+" => {
                    let n = self.tok(i + 1);
                    n.kind == TokKind::Num && n.start == t.end
                }
                _ => false,
            },
            TokKind::Name => matches!(t.text(self.src), "true" | "false"),
            _ => false,
        }
    }

    // --- program & statements -----------------------------------------------------

    fn program(&mut self) -> PResult<Vec<Stmt>> {
        let mut out = Vec::new();
        loop {
            if self.peek().kind == TokKind::Eof && !out.is_empty() {
                return Ok(out);
            }
            out.push(self.stmt()?);
        }
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        let at = self.at();
        let word = if self.peek().kind == TokKind::Name {
            self.text(self.pos)
        } else {
            ""
        };
        match word {
            "import" => {
                self.bump();
                let path = self.string("the imported file's path (a string)")?;
                let alias = if self.eat_word("as", "`as`") {
                    Some(self.name(NAME)?)
                } else {
                    None
                };
                Ok(Stmt::Import { path, alias, at })
            }
            "bind" => {
                self.bump();
                self.expect_punct("{", "`{`")?;
                let mut bindings = Vec::new();
                loop {
                    let name = self.name("a handler name")?;
                    self.expect_punct("=", "`=`")?;
                    let target = self.path("the function the handler runs (`pkg.module.fn`)")?;
                    bindings.push((name, target.text));
                    if self.eat_punct("}", "`}`") {
                        return Ok(Stmt::Bind(bindings));
                    }
                }
            }
            "guard" => {
                self.bump();
                let name = self.name("the guard's name")?;
                self.expect_punct("=", "`=`")?;
                let pred = self.predicate()?;
                Ok(Stmt::Guard { name, pred, at })
            }
            "event" => {
                self.bump();
                let name = self.ref_("the event's name")?;
                self.expect_punct("{", "`{`")?;
                let mut fields = Vec::new();
                while !self.eat_punct("}", "`}`") {
                    let fname = self.ref_("a field name")?;
                    self.expect_punct(":", "`:`")?;
                    let ty = self.field_type()?;
                    let optional = self.eat_punct("?", "`?`");
                    fields.push((fname, ty, optional));
                }
                Ok(Stmt::Event { name, fields, at })
            }
            "machine" => {
                self.bump();
                let name = self.ref_("the machine's name")?;
                self.expect_punct("{", "`{`")?;
                let items = self.block_items()?;
                Ok(Stmt::Machine { name, items, at })
            }
            "fragment" => {
                self.bump();
                let name = self.ref_("the fragment's name")?;
                let mut params = Vec::new();
                if self.eat_punct("(", "`(`") {
                    loop {
                        let pname = self.name("a parameter name")?;
                        self.expect_punct(":", "`:`")?;
                        let kind = self.one_of_words(
                            &PARAM_KINDS,
                            "a parameter kind (`action`, `state`, `guard`, `value` or `event`)",
                        )?;
                        params.push((pname, kind));
                        if self.eat_punct(",", "`,`") {
                            continue;
                        }
                        self.expect_punct(")", "`)`")?;
                        break;
                    }
                }
                self.expect_punct("{", "`{`")?;
                let items = self.block_items()?;
                Ok(Stmt::Fragment {
                    name,
                    params,
                    items,
                    at,
                })
            }
            _ => self.fail(DECL),
        }
    }

    fn one_of_words(&mut self, words: &[&str], label: &'static str) -> PResult<String> {
        if self.peek().kind == TokKind::Name {
            let w = self.text(self.pos);
            if words.contains(&w) {
                self.bump();
                return Ok(w.to_string());
            }
        }
        self.fail(label)
    }

    fn field_type(&mut self) -> PResult<String> {
        self.one_of_words(&TYPES, "a type (`string`, `int`, `float`, `bool` or `any`)")
    }

    // --- blocks & items -----------------------------------------------------------

    /// `item* "}"` (the `{` already consumed).
    fn block_items(&mut self) -> PResult<Vec<Item>> {
        self.enter()?;
        let r = self.block_items_inner();
        self.depth -= 1;
        r
    }

    /// The items of a block, backtracking over the ambiguous prefixes: each one is a
    /// choice point whose preferred reading is kept if the rest of the block parses,
    /// else the other reading is tried. An item position from which the rest of the
    /// block has failed under every reading is remembered, so nothing is parsed twice
    /// in vain (linear in the worst case).
    fn block_items_inner(&mut self) -> PResult<Vec<Item>> {
        struct ChoicePoint {
            start: usize,
            len: usize,
            second: bool,
            /// item positions reached after this choice point (in its current reading)
            run: Vec<usize>,
        }
        let first = self.pos;
        let mut out = Vec::new();
        let mut choices: Vec<ChoicePoint> = Vec::new();
        let mut retry = false;
        loop {
            // forward: items up to the `}`, or a failure
            loop {
                if self.eat_punct("}", "`}`") {
                    return Ok(out);
                }
                let start = self.pos;
                if self.failed_blocks.contains(&start) {
                    break;
                }
                let reading = if retry {
                    retry = false;
                    1
                } else if self.item_is_ambiguous() {
                    choices.push(ChoicePoint {
                        start,
                        len: out.len(),
                        second: false,
                        run: Vec::new(),
                    });
                    0
                } else {
                    if let Some(c) = choices.last_mut() {
                        c.run.push(start);
                    }
                    0
                };
                match self.item(reading) {
                    Ok(item) => out.push(item),
                    Err(Fail) => break,
                }
            }
            // backtrack to the latest choice point with a reading left
            loop {
                let Some(mut c) = choices.pop() else {
                    self.failed_blocks.insert(first);
                    return Err(Fail);
                };
                self.failed_blocks.extend(c.run.drain(..));
                if c.second {
                    self.failed_blocks.insert(c.start);
                    continue;
                }
                c.second = true;
                self.pos = c.start;
                out.truncate(c.len);
                choices.push(c);
                retry = true;
                break;
            }
        }
    }

    /// One nesting level deeper (a block, a parenthesis, a list, a `not`); a hostile
    /// input nested beyond [`MAX_NESTING`] fails instead of exhausting the stack.
    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            self.depth -= 1;
            let t = *self.peek();
            self.note(t.start, t.line, t.col, Found::Tok(self.pos), "less nesting");
            if let Some(far) = self.far.as_mut() {
                if far.offset == t.start {
                    far.message = Some(format!("nesting is too deep (more than {MAX_NESTING} levels)"));
                }
            }
            return Err(Fail);
        }
        Ok(())
    }

    /// Whether the item here starts with one of the prefixes that read two ways.
    fn item_is_ambiguous(&self) -> bool {
        let p = self.pos;
        let is_ref = |i: usize| matches!(self.kind_at(i), TokKind::Name | TokKind::Str);
        if self.word_at(p, "from") {
            // from REF to REF on (enter|exit|activity)
            return is_ref(p + 1)
                && self.word_at(p + 2, "to")
                && is_ref(p + 3)
                && self.word_at(p + 4, "on")
                && ["enter", "exit", "activity"]
                    .iter()
                    .any(|w| self.word_at(p + 5, w));
        }
        if self.word_at(p, "invoke") {
            return self.kind_at(p + 1) == TokKind::Name;
        }
        if self.word_at(p, "timeout") {
            return self.word_at(p + 1, "context")
                && matches!(
                    self.kind_at(p + 2),
                    TokKind::Name | TokKind::Str | TokKind::Dotted
                );
        }
        false
    }

    /// One item; `alt` selects the reading of an ambiguous prefix (0: harel's
    /// preference, 1: the other one). Each kind of item is its own function, so the
    /// stack frames on the path of nested blocks stay small (also in debug builds).
    fn item(&mut self, alt: u8) -> PResult<Item> {
        let at = self.at();
        let word = if self.peek().kind == TokKind::Name {
            self.text(self.pos)
        } else {
            ""
        };
        let known = matches!(
            word,
            "initial"
                | "on"
                | "timeout"
                | "ttl"
                | "context"
                | "outcome"
                | "carry"
                | "defer"
                | "no"
                | "cancel_on_failure"
                | "invoke"
                | "with"
                | "use"
                | "state"
                | "orthogonal"
                | "final"
                | "from"
        );
        if !known {
            return self.fail(ITEM);
        }
        self.bump();
        match word {
            "initial" => Ok(Item::Initial(self.ref_("the initial state's name")?)),
            "on" => self.item_hook(),
            "timeout" => self.item_timeout(alt),
            "ttl" => {
                let (n, at) = self.int("a number of seconds")?;
                Ok(Item::Ttl(n, at))
            }
            "context" => self.item_context(),
            "outcome" => Ok(Item::Outcome(self.ref_("the outcome label")?)),
            "carry" => Ok(Item::Carry(self.ref_list()?)),
            "defer" => Ok(Item::Defer(self.ref_list()?)),
            "no" => {
                self.expect_word("history", "`history`")?;
                Ok(Item::NoHistory)
            }
            "cancel_on_failure" => Ok(Item::CancelOnFailure),
            "invoke" => self.item_invoke(alt),
            "with" => self.item_with(),
            "use" => self.item_use(at),
            "state" | "orthogonal" => self.item_state(word == "orthogonal", at),
            "final" => self.item_final(at),
            _ => self.transition(at, alt),
        }
    }

    fn item_hook(&mut self) -> PResult<Item> {
        let hook = self.one_of_words(&["enter", "exit", "activity"], "`enter`, `exit` or `activity`")?;
        let action = self.action()?;
        Ok(match hook.as_str() {
            "enter" => Item::OnEnter(action),
            "exit" => Item::OnExit(action),
            _ => Item::OnActivity(action),
        })
    }

    fn item_timeout(&mut self, alt: u8) -> PResult<Item> {
        let t = *self.peek();
        let spec = match t.kind {
            TokKind::Num => TimeoutSpec::Literal(self.int("a number of seconds")?.0),
            TokKind::Name
                if t.text(self.src) == "context"
                    && alt == 0
                    && matches!(
                        self.kind_at(self.pos + 1),
                        TokKind::Name | TokKind::Str | TokKind::Dotted
                    ) =>
            {
                self.bump();
                TimeoutSpec::Context(self.ref_("the context key holding the seconds")?)
            }
            // a value parameter (a `DOTTED` fails at its dot, where a `NAME` ends)
            TokKind::Name | TokKind::Dotted => TimeoutSpec::Param(self.name(NAME)?),
            _ => return self.fail("a number of seconds, `context <key>` or a value parameter"),
        };
        Ok(Item::Timeout(spec))
    }

    fn item_context(&mut self) -> PResult<Item> {
        self.expect_punct("{", "`{`")?;
        let mut fields = Vec::new();
        while !self.eat_punct("}", "`}`") {
            let at = self.at();
            let name = self.ref_("a field name")?;
            self.expect_punct(":", "`:`")?;
            let ty = self.field_type()?;
            let optional = self.eat_punct("?", "`?`");
            let default = if self.eat_punct("=", "`=`") {
                Some(self.value(VALUE)?)
            } else {
                None
            };
            fields.push(ContextField {
                name,
                ty,
                optional,
                default,
                at,
            });
        }
        Ok(Item::Context(fields))
    }

    /// `ref ("," ref)*`
    fn ref_list(&mut self) -> PResult<Vec<String>> {
        let mut names = vec![self.ref_(REF)?];
        while self.eat_punct(",", "`,`") {
            names.push(self.ref_(REF)?);
        }
        Ok(names)
    }

    fn item_invoke(&mut self, alt: u8) -> PResult<Item> {
        let fqn = match self.peek().kind {
            TokKind::Dotted => Some(self.path(NAME)?.text),
            TokKind::Name if alt == 0 => Some(self.path(NAME)?.text),
            _ => {
                self.expected("the machine to invoke");
                None
            }
        };
        let each = if self.eat_word("for", "`for`") {
            let var = self.ref_("the loop variable")?;
            self.expect_word("in", "`in`")?;
            let coll = self.ref_("the context list to fan out over")?;
            Some((var, coll))
        } else {
            None
        };
        let inline = if self.punct_at(self.pos, "{") {
            let at = self.at();
            self.bump();
            Some((self.block_items()?, at))
        } else {
            self.expected("`{`");
            None
        };
        Ok(Item::Invoke { fqn, each, inline })
    }

    fn item_with(&mut self) -> PResult<Item> {
        self.expect_punct("{", "`{`")?;
        let mut pairs = Vec::new();
        loop {
            let child = self.ref_("a child context key")?;
            self.expect_punct(":", "`:`")?;
            let parent = self.ref_("a parent context key")?;
            pairs.push((child, parent));
            if self.eat_punct("}", "`}`") {
                return Ok(Item::InvokeWith(pairs));
            }
        }
    }

    fn item_use(&mut self, at: At) -> PResult<Item> {
        let name = self.path("the fragment's name")?.text;
        let mut args = Vec::new();
        if self.eat_punct("(", "`(`") && !self.eat_punct(")", "`)`") {
            loop {
                let aname = self.name("a parameter name")?;
                self.expect_punct("=", "`=`")?;
                args.push((aname, self.arg_value()?));
                if self.eat_punct(",", "`,`") {
                    continue;
                }
                self.expect_punct(")", "`)`")?;
                break;
            }
        }
        let alias = if self.eat_word("as", "`as`") {
            Some(self.ref_("the state's name")?)
        } else {
            None
        };
        Ok(Item::Use {
            name,
            args,
            alias,
            at,
        })
    }

    fn item_state(&mut self, orthogonal: bool, at: At) -> PResult<Item> {
        let name = self.ref_("the state's name")?;
        self.expect_punct("{", "`{`")?;
        let items = self.block_items()?;
        Ok(Item::State {
            orthogonal,
            name,
            items,
            at,
        })
    }

    fn item_final(&mut self, at: At) -> PResult<Item> {
        let name = self.ref_("the state's name")?;
        let outcome = self.ref_("the outcome label (`final Done success`)")?;
        let items = if self.eat_punct("{", "`{`") {
            self.block_items()?
        } else {
            Vec::new()
        };
        Ok(Item::Final {
            name,
            outcome,
            items,
            at,
        })
    }

    fn arg_value(&mut self) -> PResult<Arg> {
        let t = *self.peek();
        match t.kind {
            // a bare word (even `true`/`false`, as harel's parser reads it)
            TokKind::Name => {
                self.bump();
                Ok(Arg::Name(t.text(self.src).to_string()))
            }
            TokKind::Dotted => {
                self.bump();
                Ok(Arg::Dotted(t.text(self.src).to_string()))
            }
            TokKind::Punct if t.text(self.src) == "(" => {
                self.bump();
                let pred = self.predicate()?;
                self.expect_punct(")", "`)`")?;
                Ok(Arg::Pred(pred))
            }
            _ => Ok(Arg::Lit(
                self.value("a name, a `pkg.fn` path, a value or a `(condition)`")?,
            )),
        }
    }

    /// `action: action_ref ("(" [input ("," input)*] ")")?`
    fn action(&mut self) -> PResult<Action> {
        let target = self.path("an action (a bound handler name or a `pkg.module.fn` path)")?;
        let mut inputs = Vec::new();
        if self.eat_punct("(", "`(`") && !self.eat_punct(")", "`)`") {
            loop {
                let key = self.ref_("an input name")?;
                self.expect_punct(":", "`:`")?;
                let val = if self.starts_value(self.pos) {
                    InputVal::Lit(self.value(VALUE)?)
                } else if matches!(self.peek().kind, TokKind::Name | TokKind::Dotted) {
                    // a value parameter (a `DOTTED` fails at its dot, as a `NAME` ends there)
                    InputVal::Param(self.name("a value or a value parameter")?)
                } else {
                    InputVal::Lit(self.value("a value or a value parameter")?)
                };
                inputs.push((key, val));
                if self.eat_punct(",", "`,`") {
                    continue;
                }
                self.expect_punct(")", "`)`")?;
                break;
            }
        }
        Ok(Action { target, inputs })
    }

    // --- transitions --------------------------------------------------------------

    fn transition(&mut self, at: At, alt: u8) -> PResult<Item> {
        let from_at = self.at();
        let from = self.ref_("the source state")?;
        let word = if self.peek().kind == TokKind::Name {
            self.text(self.pos)
        } else {
            ""
        };
        match word {
            "to" => {
                self.bump();
                let to_at = self.at();
                let to = self.ref_("the target state")?;
                // alt 0 of an ambiguous `on enter|exit|activity`: the `on` starts a hook item
                let trigger = if alt == 0 && self.word_at(self.pos, "on") && self.item_hook_follows() {
                    None
                } else {
                    self.trigger()?
                };
                let set = self.assign_clause()?;
                Ok(Item::Transition {
                    from,
                    to,
                    trigger,
                    set,
                    at,
                    names_at: NamesAt {
                        from: from_at,
                        targets: vec![to_at],
                    },
                })
            }
            "choose" => {
                self.bump();
                let trigger = self.trigger()?;
                let set = self.assign_clause()?;
                self.expect_punct("{", "`{`")?;
                let mut branches = Vec::new();
                let mut targets = Vec::new();
                loop {
                    if !self.eat_word("when", "`when`") {
                        if branches.is_empty() {
                            return Err(Fail);
                        }
                        break;
                    }
                    let pred = self.predicate()?;
                    self.expect_word("to", "`to`")?;
                    targets.push(self.at());
                    let to = self.ref_("the target state")?;
                    let set = self.assign_clause()?;
                    branches.push((pred, to, set));
                }
                let default = if self.eat_word("else", "`else`") {
                    self.expect_word("to", "`to`")?;
                    targets.push(self.at());
                    let to = self.ref_("the target state")?;
                    Some((to, self.assign_clause()?))
                } else {
                    None
                };
                self.expect_punct("}", "`}`")?;
                Ok(Item::Choice {
                    from,
                    trigger,
                    set,
                    branches,
                    default,
                    at,
                    names_at: NamesAt {
                        from: from_at,
                        targets,
                    },
                })
            }
            "select" => {
                self.bump();
                let action = self.action()?;
                let returns = if self.eat_word("returns", "`returns`") {
                    self.expect_punct("{", "`{`")?;
                    let mut values = vec![self.value(VALUE)?];
                    while self.eat_punct(",", "`,`") {
                        values.push(self.value(VALUE)?);
                    }
                    self.expect_punct("}", "`}`")?;
                    Some(values)
                } else {
                    None
                };
                let trigger = self.trigger()?;
                self.expect_punct("{", "`{`")?;
                let mut branches = Vec::new();
                loop {
                    if !self.starts_value(self.pos) {
                        self.expected("a result value (`\"ok\" to S`)");
                        if branches.is_empty() {
                            return Err(Fail);
                        }
                        break;
                    }
                    let v = self.value(VALUE)?;
                    self.expect_word("to", "`to`")?;
                    branches.push((v, self.ref_("the target state")?));
                }
                let default = if self.eat_word("else", "`else`") {
                    self.expect_word("to", "`to`")?;
                    Some(self.ref_("the target state")?)
                } else {
                    None
                };
                self.expect_punct("}", "`}`")?;
                Ok(Item::Select {
                    from_at,
                    from,
                    action,
                    returns,
                    trigger,
                    branches,
                    default,
                    at,
                })
            }
            "join" => {
                self.bump();
                let mode = self.one_of_words(&["all", "any"], "`all` or `any`")?;
                self.expect_word("to", "`to`")?;
                let success = self.ref_("the target state")?;
                self.expect_word("else", "`else`")?;
                self.expect_word("to", "`to`")?;
                let otherwise = self.ref_("the target state")?;
                Ok(Item::Join {
                    from_at,
                    from,
                    all: mode == "all",
                    success,
                    otherwise,
                    at,
                })
            }
            _ => self.fail("`to`, `choose`, `select` or `join`"),
        }
    }

    /// At `on`: whether `on enter|exit|activity` follows (the hook reading).
    fn item_hook_follows(&self) -> bool {
        ["enter", "exit", "activity"]
            .iter()
            .any(|w| self.word_at(self.pos + 1, w))
    }

    /// `trigger: "on" kinds ("where" predicate)?` (optional).
    fn trigger(&mut self) -> PResult<Option<Trigger>> {
        if !self.eat_word("on", "`on`") {
            return Ok(None);
        }
        let mut kinds_at = vec![self.at()];
        let mut kinds = vec![self.ref_("an event name")?];
        while self.eat_punct("|", "`|`") {
            kinds_at.push(self.at());
            kinds.push(self.ref_("an event name")?);
        }
        let pred = if self.eat_word("where", "`where`") {
            Some(self.predicate()?)
        } else {
            None
        };
        Ok(Some(Trigger {
            kinds,
            kinds_at,
            pred,
        }))
    }

    /// `assign_clause: "set" assignment ("," assignment)*` (optional).
    fn assign_clause(&mut self) -> PResult<Option<Vec<Assignment>>> {
        if !self.eat_word("set", "`set`") {
            return Ok(None);
        }
        let mut out = Vec::new();
        loop {
            let at = self.at();
            if self.peek().kind != TokKind::Dotted {
                return self.fail("a `context.<field>` to set");
            }
            let target = self.text(self.pos).to_string();
            self.bump();
            self.expect_punct("=", "`=`")?;
            let left = self.operand()?;
            let arith = match self.peek().kind {
                TokKind::Punct if matches!(self.text(self.pos), "+" | "-" | "*" | "/") => {
                    let op = self.text(self.pos).chars().next().unwrap_or('+');
                    self.bump();
                    let (right, rat) = self.operand()?;
                    Some((op, right, rat))
                }
                _ => {
                    self.expected("an arithmetic operator (`+`, `-`, `*`, `/`)");
                    None
                }
            };
            out.push(Assignment {
                target,
                at,
                left,
                arith,
            });
            if !self.eat_punct(",", "`,`") {
                return Ok(Some(out));
            }
        }
    }

    /// `operand: DOTTED | value`.
    fn operand(&mut self) -> PResult<(Operand, At)> {
        let at = self.at();
        if self.peek().kind == TokKind::Dotted {
            let s = self.text(self.pos).to_string();
            self.bump();
            return Ok((Operand::Dotted(s), at));
        }
        Ok((
            Operand::Lit(self.value("a value or an `event.x` / `context.x` reference")?),
            at,
        ))
    }

    // --- predicates ---------------------------------------------------------------

    fn predicate(&mut self) -> PResult<Pred> {
        let first = self.and_expr()?;
        if !self.is_word("or", "`or`") {
            return Ok(first);
        }
        let mut all = vec![first];
        while self.eat_word("or", "`or`") {
            all.push(self.and_expr()?);
        }
        Ok(Pred::Any(all))
    }

    fn and_expr(&mut self) -> PResult<Pred> {
        let first = self.not_expr()?;
        if !self.is_word("and", "`and`") {
            return Ok(first);
        }
        let mut all = vec![first];
        while self.eat_word("and", "`and`") {
            all.push(self.not_expr()?);
        }
        Ok(Pred::All(all))
    }

    fn is_op(&self, i: usize) -> bool {
        let t = self.tok(i);
        match t.kind {
            TokKind::Punct => matches!(t.text(self.src), "==" | "!=" | "<" | "<=" | ">" | ">="),
            TokKind::Name => t.text(self.src) == "in",
            _ => false,
        }
    }

    fn not_expr(&mut self) -> PResult<Pred> {
        if self.word_at(self.pos, "not") && !self.is_op(self.pos + 1) && self.negation_follows() {
            self.bump();
            self.enter()?;
            let inner = self.not_expr();
            self.depth -= 1;
            return Ok(Pred::Not(Box::new(inner?)));
        }
        self.atom()
    }

    /// At `not`: whether it negates what follows, rather than being a guard named
    /// `not` followed by whatever ends the condition (`when not to S`, `not and x`).
    fn negation_follows(&self) -> bool {
        let next = self.tok(self.pos + 1);
        match next.kind {
            TokKind::Str | TokKind::Dotted => true,
            TokKind::Punct => next.text(self.src) == "(",
            TokKind::Name => {
                // `not x == 1`; `not ok` unless `ok` is a word that ends the condition and
                // the token after it cannot follow a guard
                self.is_op(self.pos + 2)
                    || !self.ends_condition(self.pos + 1)
                    || self.ends_condition(self.pos + 2)
            }
            _ => false,
        }
    }

    /// Whether token `i` can follow a whole condition.
    fn ends_condition(&self, i: usize) -> bool {
        let t = self.tok(i);
        match t.kind {
            TokKind::Eof => true,
            TokKind::Punct => matches!(t.text(self.src), ")" | "{" | "}"),
            TokKind::Name => {
                let w = t.text(self.src);
                matches!(w, "and" | "or" | "to" | "set") || ITEM_WORDS.contains(&w) || DECL_WORDS.contains(&w)
            }
            _ => false,
        }
    }

    fn atom(&mut self) -> PResult<Pred> {
        let t = *self.peek();
        let at = At {
            line: t.line,
            col: t.col,
        };
        let lhs = match t.kind {
            TokKind::Punct if t.text(self.src) == "(" => {
                self.bump();
                self.enter()?;
                let p = self.predicate();
                self.depth -= 1;
                let p = p?;
                self.expect_punct(")", "`)`")?;
                return Ok(p);
            }
            TokKind::Name => {
                if !self.is_op(self.pos + 1) {
                    // a named guard
                    self.bump();
                    self.expected(OPERATOR);
                    return Ok(Pred::Guard(t.text(self.src).to_string()));
                }
                self.bump();
                Operand::Field(t.text(self.src).to_string())
            }
            TokKind::Str => Operand::Field(self.string(REF)?),
            TokKind::Dotted => {
                self.bump();
                Operand::Dotted(t.text(self.src).to_string())
            }
            _ => return self.fail("a condition (`field == value`, a guard name, `not ...` or `(...)`)"),
        };
        if !self.is_op(self.pos) {
            return self.fail(OPERATOR);
        }
        let op = self.text(self.pos).to_string();
        self.bump();
        let rhs = if self.peek().kind == TokKind::Dotted {
            let s = self.text(self.pos).to_string();
            self.bump();
            Operand::Dotted(s)
        } else {
            Operand::Lit(self.value("a value or an `event.x` / `context.x` reference")?)
        };
        Ok(Pred::Cmp { lhs, op, rhs, at })
    }

    // --- the error ----------------------------------------------------------------

    fn error(&self) -> SyntaxError {
        let Some(far) = &self.far else {
            return SyntaxError {
                err: DslError::new("syntax error"),
                offset: 0,
                eof: false,
            };
        };
        let expected = join_or(&far.expected);
        let (found_tok, found) = match &far.found {
            Found::Tok(i) => (Some(*self.tok(*i)), self.describe(*i)),
            Found::Text(s) => (None, s.clone()),
        };
        if found_tok.is_some_and(|t| t.kind == TokKind::Eof) {
            // harel points an end-of-input error at the end of the last line
            let (line, column, snippet) = end_position(self.src);
            let mut e = DslError::new(format!("unexpected end of input, expected {expected}"));
            e.line = Some(line);
            e.column = Some(column);
            e.snippet = Some(snippet);
            if far.expected.contains(&"`}`") {
                e.hint = Some("a `{` block is likely missing its closing `}`".into());
            }
            return SyntaxError {
                err: e,
                offset: far.offset,
                eof: true,
            };
        }
        let message = far
            .message
            .clone()
            .unwrap_or_else(|| match found_tok.map(|t| t.kind) {
                Some(TokKind::Bad) => format!("unexpected character {found}, expected {expected}"),
                _ => format!("expected {expected}, found {found}"),
            });
        let mut e = DslError::at(message, self.src, far.line, far.col);
        e.hint = syntax_hint(e.snippet.as_deref().unwrap_or(""))
            .or_else(|| found_tok.and_then(|t| self.keyword_hint(&t, &far.expected)));
        SyntaxError {
            err: e,
            offset: far.offset,
            eof: false,
        }
    }

    /// Where harel's lexer would split the word it failed at: after each keyword
    /// expected there that the word starts with (and `=` out of an `==`).
    fn glued_splits(&self) -> Vec<(usize, &'static str, String)> {
        let Some(far) = &self.far else { return Vec::new() };
        let Found::Tok(i) = far.found else {
            return Vec::new();
        };
        let t = *self.tok(i);
        let text = t.text(self.src);
        let mut out = Vec::new();
        match t.kind {
            TokKind::Name | TokKind::Dotted => {
                for label in &far.expected {
                    for word in label_words(label) {
                        if text.len() > word.len()
                            && text.starts_with(word)
                            && !out.iter().any(|(_, w, _)| w == &word)
                        {
                            out.push((t.start + word.len(), word, text.to_string()));
                        }
                    }
                }
            }
            TokKind::Punct if text == "==" && far.expected.contains(&"`=`") => {
                out.push((t.start + 1, "=", text.into()))
            }
            _ => {}
        }
        out
    }

    fn describe(&self, i: usize) -> String {
        let t = self.tok(i);
        let text = t.text(self.src);
        match t.kind {
            TokKind::Eof => "end of input".into(),
            TokKind::Unterminated => {
                "an unterminated string (a `\"` with no closing `\"` on its line)".into()
            }
            TokKind::Str if text.chars().count() > 40 => {
                format!("`{}...\"`", text.chars().take(36).collect::<String>())
            }
            _ => format!("`{}`", text.escape_debug()),
        }
    }

    /// "did you mean `state`?" for a near-miss of a keyword that fits here.
    fn keyword_hint(&self, t: &Token, expected: &[&str]) -> Option<String> {
        if t.kind != TokKind::Name {
            return None;
        }
        let word = t.text(self.src);
        let mut candidates: Vec<&str> = Vec::new();
        if expected.contains(&ITEM) {
            candidates.extend(ITEM_WORDS);
        }
        if expected.contains(&DECL) {
            candidates.extend(DECL_WORDS);
        }
        for e in expected {
            if let Some(kw) = e.strip_prefix('`').and_then(|s| s.strip_suffix('`')) {
                if kw.chars().all(|c| c.is_ascii_alphabetic() || c == '_') {
                    candidates.push(kw);
                }
            }
        }
        let best = candidates
            .into_iter()
            .filter(|c| *c != word)
            .map(|c| (edit_distance(word, c), c))
            .filter(|(d, c)| *d <= if c.len() <= 3 { 1 } else { 2 })
            .min_by_key(|(d, _)| *d)?;
        Some(format!("did you mean `{}`?", best.1))
    }
}

/// harel's `_syntax_hint`: the common slips, recognized on the offending line.
fn syntax_hint(line: &str) -> Option<String> {
    if line.contains("->") {
        return Some("transitions read `from A to B` — there is no `->` arrow".into());
    }
    if line.contains("=>") {
        return Some("use `to` for a target and `select`/`{ ... }` for a selector — there is no `=>`".into());
    }
    None
}

/// The keywords (fixed words) an expectation label stands for.
fn label_words(label: &'static str) -> Vec<&'static str> {
    if label == ITEM {
        return ITEM_WORDS.to_vec();
    }
    if label == DECL {
        return DECL_WORDS.to_vec();
    }
    // the backticked words of the label: "`enter`, `exit` or `activity`", "`true`/`false`"
    let mut words: Vec<&'static str> = label
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_'))
        .collect();
    // a value may be the `BOOL` terminal
    if label.contains("value") {
        for b in ["true", "false"] {
            if !words.contains(&b) {
                words.push(b);
            }
        }
    }
    words
}

fn join_or(items: &[&str]) -> String {
    match items {
        [] => "something else".into(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// Where harel reports an end-of-input error: the end of the last line of
/// `text.splitlines()` (Python's line boundaries), and that line.
pub(crate) fn end_position(text: &str) -> (usize, usize, String) {
    let mut count = 0;
    let mut last = "";
    let mut rest = text;
    while !rest.is_empty() {
        let (line, next) = match rest.char_indices().find(|(_, c)| is_py_line_break(*c)) {
            Some((i, c)) => {
                let mut j = i + c.len_utf8();
                if c == '\r' && rest[j..].starts_with('\n') {
                    j += 1;
                }
                (&rest[..i], &rest[j..])
            }
            None => (rest, ""),
        };
        count += 1;
        last = line;
        rest = next;
    }
    if count == 0 {
        return (1, 1, String::new());
    }
    (count, last.chars().count() + 1, last.to_string())
}

fn is_py_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(src: &str) -> DslError {
        parse_program(src).expect_err("should fail")
    }

    #[test]
    fn end_position_matches_python_splitlines() {
        assert_eq!(end_position(""), (1, 1, String::new()));
        assert_eq!(end_position("a\n"), (1, 2, "a".into()));
        assert_eq!(end_position("a\n\n"), (2, 1, String::new()));
        assert_eq!(end_position("ab\r\ncd"), (2, 3, "cd".into()));
        assert_eq!(end_position("ab\rc"), (2, 2, "c".into()));
    }

    #[test]
    fn error_positions() {
        // a word running into a keyword fails where harel's lexer fails
        let e = err("machine M { from A to B on X where high or or not_rejected }");
        assert_eq!((e.line, e.column), (Some(1), Some(49)), "{e}");
        let e = err("event E { x: stringall }");
        assert_eq!((e.line, e.column), (Some(1), Some(24)), "{e}");
        let e = err("machine M {\n  context.x\n}");
        assert_eq!((e.line, e.column), (Some(2), Some(10)), "{e}");
        let e = err("bind { a == pkg.f }");
        assert_eq!((e.line, e.column), (Some(1), Some(11)), "{e}");
        // harel would accept it: our (whole-word) error, with a hint
        let e = err("machine M { fromA to B }");
        assert_eq!((e.line, e.column), (Some(1), Some(13)), "{e}");
        assert!(
            e.hint
                .as_deref()
                .unwrap_or("")
                .contains("`fromA` reads as the keyword `from` followed by `A`"),
            "{e}"
        );
        let e = err("machine M {\n  from A to B on\n}");
        assert_eq!((e.line, e.column), (Some(3), Some(1)));
        assert!(e.message.contains("an event name"), "{}", e.message);
        let e = err("machine M {\n  from A -> B\n}");
        assert_eq!((e.line, e.column), (Some(2), Some(10)));
        assert!(e.hint.as_deref().unwrap_or("").contains("->"));
        let e = err("machine M {\n  state A {\n");
        assert_eq!((e.line, e.column), (Some(2), Some(12)));
        assert!(e.message.starts_with("unexpected end of input"));
        let e = err("machine M { timeout 1.5 }");
        assert_eq!((e.line, e.column), (Some(1), Some(22)));
        let e = err("machine M { from A to B on enter foo bar }");
        assert_eq!((e.line, e.column), (Some(1), Some(38)));
        let e = err("machine M {\n  stat A {}\n}");
        assert_eq!((e.line, e.column), (Some(2), Some(3)));
        assert_eq!(e.hint.as_deref(), Some("did you mean `state`?"));
        let e = err("");
        assert_eq!((e.line, e.column), (Some(1), Some(1)));
        let e = err("machine M { state a.b {} }");
        assert_eq!((e.line, e.column), (Some(1), Some(20)));
    }

    #[test]
    fn ambiguous_prefixes_read_like_harel() {
        let items = |src: &str| match parse_program(src).expect("parses").remove(0) {
            Stmt::Machine { items, .. } => items,
            other => panic!("{other:?}"),
        };
        // `on enter X` after a transition: the hook when both read
        let it = items("machine M { from A to B on enter cancel_on_failure }");
        assert!(
            matches!(
                &it[..],
                [Item::Transition { trigger: None, .. }, Item::OnEnter(_)]
            ),
            "{it:?}"
        );
        let it = items("machine M { from A to B on enter from B to C }");
        assert!(
            matches!(
                &it[..],
                [Item::Transition { trigger: Some(_), .. }, Item::Transition { .. }]
            ),
            "{it:?}"
        );
        // `not` as a guard name
        let it = items("machine M { from A choose { when x == 1 and not to B } }");
        assert!(matches!(&it[..], [Item::Choice { .. }]), "{it:?}");
        let it = items("machine M { from A to B on X where not and y == 1 }");
        let [Item::Transition {
            trigger:
                Some(Trigger {
                    pred: Some(Pred::All(v)),
                    ..
                }),
            ..
        }] = &it[..]
        else {
            panic!("{it:?}")
        };
        assert_eq!(v[0], Pred::Guard("not".into()));
        let it = items("machine M { from A to B on X where not ok }");
        assert!(matches!(
            &it[..],
            [Item::Transition {
                trigger: Some(Trigger {
                    pred: Some(Pred::Not(_)),
                    ..
                }),
                ..
            }]
        ));
        // `invoke X`: the machine X when both read
        let it = items("machine M { invoke cancel_on_failure }");
        assert!(matches!(&it[..], [Item::Invoke { fqn: Some(_), .. }]), "{it:?}");
        let it = items("machine M { invoke for x in y }");
        assert!(
            matches!(
                &it[..],
                [Item::Invoke {
                    fqn: None,
                    each: Some(_),
                    ..
                }]
            ),
            "{it:?}"
        );
        let it = items("machine M { invoke with { a: b } }");
        assert!(
            matches!(&it[..], [Item::Invoke { fqn: None, .. }, Item::InvokeWith(_)]),
            "{it:?}"
        );
        // `timeout context k`: the context key when both read
        let it = items("machine M { timeout context cancel_on_failure }");
        assert!(
            matches!(&it[..], [Item::Timeout(TimeoutSpec::Context(_))]),
            "{it:?}"
        );
        let it = items("machine M { timeout context initial X }");
        assert!(
            matches!(&it[..], [Item::Timeout(TimeoutSpec::Param(_)), Item::Initial(_)]),
            "{it:?}"
        );
    }
}
