//! The lexical index of one document: its declarations and references, each with
//! its range, read from the tokens (no parse needed, so a broken document still has
//! one).
//!
//! The walk keeps a stack of the braces it is inside: a `machine` or `fragment` body
//! is a container, a `state`/`orthogonal`/`final` body a state scope inside it, any
//! other block (`context`, `with`, a `choose` body, ...) is transparent. A state
//! reference remembers its container and scope, so it resolves the way the loader
//! resolves it: relative to its scope, then each enclosing one.

use lsp_types::Range;

use super::lexer::{tokenize, Token, TokenKind};

/// What a name refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SymbolKind {
    State,
    Event,
    Guard,
    Fragment,
    Machine,
    /// A bound handler (`on enter charge`, `bind { charge = ... }`).
    Action,
}

/// A declared or referenced name in the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Occurrence {
    pub kind: SymbolKind,
    pub name: String,
    /// The name itself (inside the quotes of a quoted name).
    pub range: Range,
    pub is_declaration: bool,
    /// The enclosing machine or fragment, for a state.
    pub container: Option<String>,
    /// The enclosing state's path inside the container (`""` at its top).
    pub scope: String,
}

/// A state, final state or orthogonal state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StateDecl {
    pub name: String,
    /// The dotted path from the container (`Payment.Charging`).
    pub path: String,
    pub container: String,
    pub container_is_fragment: bool,
    /// `state`, `orthogonal`, `final`, or `use` for the state a fragment becomes.
    pub keyword: String,
    pub range: Range,
}

/// A field of an event or of a machine's context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldDecl {
    pub name: String,
    pub ty: String,
    pub optional: bool,
    pub range: Range,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EventDecl {
    pub name: String,
    pub fields: Vec<FieldDecl>,
    pub range: Range,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GuardDecl {
    pub name: String,
    /// The predicate as written, whitespace collapsed.
    pub predicate: String,
    pub range: Range,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FragmentDecl {
    pub name: String,
    /// `(name, kind)` pairs: `(retry, action)`.
    pub params: Vec<(String, String)>,
    pub range: Range,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NamedDecl {
    pub name: String,
    pub range: Range,
}

/// A `bind { handler = impl }` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BindingDecl {
    pub name: String,
    pub target: String,
    pub range: Range,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImportDecl {
    /// The path as written (relative to the importing file).
    pub path: String,
    pub alias: Option<String>,
    /// The path's string token, quotes included.
    pub range: Range,
    pub alias_range: Option<Range>,
}

/// Everything the server knows of one document's text.
#[derive(Debug, Clone, Default)]
pub(crate) struct FileIndex {
    pub tokens: Vec<Token>,
    pub occurrences: Vec<Occurrence>,
    pub states: Vec<StateDecl>,
    pub events: Vec<EventDecl>,
    pub guards: Vec<GuardDecl>,
    pub fragments: Vec<FragmentDecl>,
    pub machines: Vec<NamedDecl>,
    pub bindings: Vec<BindingDecl>,
    pub imports: Vec<ImportDecl>,
    /// `(machine, field)` for every `context { ... }` field.
    pub context_fields: Vec<(String, FieldDecl)>,
}

/// Statement keywords that open a top-level declaration: a guard's predicate ends at one.
const TOP_LEVEL_KEYWORDS: [&str; 6] = ["import", "bind", "guard", "event", "machine", "fragment"];
/// Words that end a `where`/`when` predicate.
const PREDICATE_END: [&str; 7] = ["to", "set", "{", "}", "from", "on", "select"];
/// Words inside a predicate that are not guard names.
const PREDICATE_WORDS: [&str; 6] = ["and", "or", "not", "in", "true", "false"];
const COMPARISON_OPERATORS: [&str; 7] = ["==", "!=", "<=", ">=", "<", ">", "in"];
/// The hooks `on` introduces instead of an event.
pub(crate) const HOOKS: [&str; 3] = ["enter", "exit", "activity"];

#[derive(Debug)]
enum Scope {
    Machine(String),
    Fragment(String),
    State(String),
    Other,
}

impl FileIndex {
    /// The index of `text`.
    pub(crate) fn build(text: &str) -> FileIndex {
        let tokens = tokenize(text);
        let mut walk = Walk {
            text,
            tokens: &tokens,
            out: FileIndex::default(),
            stack: Vec::new(),
            pending: None,
        };
        walk.run();
        let mut index = walk.out;
        index.tokens = tokens;
        index
    }

    /// The occurrence whose name the cursor touches.
    pub(crate) fn occurrence_at(&self, position: lsp_types::Position) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .find(|o| super::lexer::touches(&o.range, position))
    }

    /// The import whose path or alias the cursor touches.
    pub(crate) fn import_at(&self, position: lsp_types::Position) -> Option<&ImportDecl> {
        self.imports.iter().find(|i| {
            super::lexer::touches(&i.range, position)
                || i.alias_range.is_some_and(|r| super::lexer::touches(&r, position))
        })
    }

    /// The state `name` resolves to from `scope` in `container`: relative to the scope,
    /// then to each enclosing scope up to the container's top, as the loader resolves it;
    /// else (a reference the loader would refuse) the first state of the container so
    /// named.
    pub(crate) fn resolve_state(&self, container: &str, scope: &str, name: &str) -> Option<&StateDecl> {
        self.resolve_state_in_scope(container, scope, name).or_else(|| {
            self.states
                .iter()
                .find(|s| s.container == container && s.name == name)
        })
    }

    /// The state `name` (a path) names from `scope` by the loader's rule alone: below
    /// the scope, else below each enclosing scope.
    pub(crate) fn resolve_state_in_scope(
        &self,
        container: &str,
        scope: &str,
        name: &str,
    ) -> Option<&StateDecl> {
        let in_container = |path: &str| {
            self.states
                .iter()
                .find(|s| s.container == container && s.path == path)
        };
        let mut scope = scope.to_string();
        loop {
            let candidate = if scope.is_empty() {
                name.to_string()
            } else {
                format!("{scope}.{name}")
            };
            if let Some(found) = in_container(&candidate) {
                return Some(found);
            }
            if scope.is_empty() {
                break;
            }
            scope = scope
                .rsplit_once('.')
                .map_or(String::new(), |(up, _)| up.to_string());
        }
        None
    }

    /// The state declared exactly at `range`.
    pub(crate) fn state_declared_at(&self, range: &Range) -> Option<&StateDecl> {
        self.states.iter().find(|s| &s.range == range)
    }
}

struct Walk<'a> {
    text: &'a str,
    tokens: &'a [Token],
    out: FileIndex,
    stack: Vec<Scope>,
    /// The scope the next `{` opens (set by a declaration expecting a body).
    pending: Option<Scope>,
}

impl Walk<'_> {
    fn token(&self, i: usize) -> Option<&Token> {
        self.tokens.get(i)
    }

    fn is(&self, i: usize, text: &str) -> bool {
        self.token(i).is_some_and(|t| t.is(text))
    }

    fn ref_at(&self, i: usize) -> Option<&Token> {
        self.token(i).filter(|t| t.is_ref())
    }

    /// The innermost machine or fragment and whether it is a fragment.
    fn container(&self) -> Option<(String, bool)> {
        self.stack.iter().rev().find_map(|s| match s {
            Scope::Machine(n) => Some((n.clone(), false)),
            Scope::Fragment(n) => Some((n.clone(), true)),
            _ => None,
        })
    }

    /// The path of the enclosing states inside the innermost container.
    fn scope_path(&self) -> String {
        let mut names = Vec::new();
        for scope in self.stack.iter().rev() {
            match scope {
                Scope::State(n) => names.push(n.as_str()),
                Scope::Machine(_) | Scope::Fragment(_) => break,
                Scope::Other => {}
            }
        }
        names.reverse();
        names.join(".")
    }

    fn occurrence(&mut self, kind: SymbolKind, token_index: usize, is_declaration: bool) {
        let Some(token) = self.token(token_index) else {
            return;
        };
        let (name, range) = (token.text.clone(), token.name_range);
        let container = self.container().map(|(n, _)| n);
        let scope = self.scope_path();
        self.out.occurrences.push(Occurrence {
            kind,
            name,
            range,
            is_declaration,
            container,
            scope,
        });
    }

    fn run(&mut self) {
        let mut i = 0;
        while i < self.tokens.len() {
            i = self.step(i);
        }
    }

    /// Reads the construct at token `i`; returns the index of the next unread token.
    fn step(&mut self, i: usize) -> usize {
        let token = &self.tokens[i];
        if token.kind == TokenKind::Str {
            return i + 1;
        }
        match token.text.as_str() {
            "{" => {
                let scope = self.pending.take().unwrap_or(Scope::Other);
                self.stack.push(scope);
                i + 1
            }
            "}" => {
                self.stack.pop();
                self.pending = None;
                i + 1
            }
            "import" => self.import(i),
            "bind" if self.is(i + 1, "{") => self.bind(i + 1),
            "guard" if self.ref_at(i + 1).is_some() && self.is(i + 2, "=") => self.guard(i),
            "event" if self.ref_at(i + 1).is_some() && self.is(i + 2, "{") => {
                let name = self.tokens[i + 1].clone();
                let (fields, next) = self.fields(i + 3);
                self.occurrence(SymbolKind::Event, i + 1, true);
                self.out.events.push(EventDecl {
                    name: name.text,
                    fields,
                    range: name.name_range,
                });
                next
            }
            "context" if self.is(i + 1, "{") => {
                let (fields, next) = self.fields(i + 2);
                let machine = self.container().map(|(n, _)| n).unwrap_or_default();
                self.out
                    .context_fields
                    .extend(fields.into_iter().map(|f| (machine.clone(), f)));
                next
            }
            "machine" if self.ref_at(i + 1).is_some() => {
                let name = &self.tokens[i + 1];
                self.out.machines.push(NamedDecl {
                    name: name.text.clone(),
                    range: name.name_range,
                });
                self.occurrence(SymbolKind::Machine, i + 1, true);
                self.pending = Some(Scope::Machine(self.tokens[i + 1].text.clone()));
                i + 2
            }
            "fragment" if self.ref_at(i + 1).is_some() => self.fragment(i),
            "state" | "orthogonal" if self.ref_at(i + 1).is_some() && self.is(i + 2, "{") => {
                self.state(i, i + 1);
                i + 2
            }
            "final" if self.ref_at(i + 1).is_some() && self.ref_at(i + 2).is_some() => {
                self.state(i, i + 1);
                if !self.is(i + 3, "{") {
                    self.pending = None;
                }
                i + 3
            }
            "from" | "to" | "initial" if self.ref_at(i + 1).is_some() => {
                self.occurrence(SymbolKind::State, i + 1, false);
                i + 2
            }
            "on" => self.trigger(i),
            "when" => self.predicate(i + 1),
            "use" if self.ref_at(i + 1).is_some() => self.use_fragment(i),
            "invoke"
                if self
                    .token(i + 1)
                    .is_some_and(|t| t.kind == TokenKind::Ident && !t.is("for")) =>
            {
                self.occurrence(SymbolKind::Machine, i + 1, false);
                i + 2
            }
            "defer" => {
                let mut j = i + 1;
                while self.ref_at(j).is_some() {
                    self.occurrence(SymbolKind::Event, j, false);
                    if !self.is(j + 1, ",") {
                        return j + 1;
                    }
                    j += 2;
                }
                j
            }
            _ => i + 1,
        }
    }

    fn import(&mut self, i: usize) -> usize {
        let Some(path) = self.token(i + 1).filter(|t| t.kind == TokenKind::Str).cloned() else {
            return i + 1;
        };
        let alias = if self.is(i + 2, "as") {
            self.token(i + 3).filter(|t| t.kind == TokenKind::Ident).cloned()
        } else {
            None
        };
        let next = if alias.is_some() { i + 4 } else { i + 2 };
        self.out.imports.push(ImportDecl {
            path: path.text,
            alias: alias.as_ref().map(|a| a.text.clone()),
            range: path.range,
            alias_range: alias.map(|a| a.range),
        });
        next
    }

    /// `bind { NAME = impl ... }`, `open` at the brace.
    fn bind(&mut self, open: usize) -> usize {
        let mut j = open + 1;
        while let Some(token) = self.token(j) {
            if token.is("}") {
                return j + 1;
            }
            if token.kind == TokenKind::Ident && self.is(j + 1, "=") {
                let target = self.token(j + 2).map(|t| t.text.clone()).unwrap_or_default();
                self.out.bindings.push(BindingDecl {
                    name: token.text.clone(),
                    target,
                    range: token.range,
                });
                self.occurrence(SymbolKind::Action, j, true);
                j += 3;
            } else {
                j += 1;
            }
        }
        j
    }

    fn guard(&mut self, i: usize) -> usize {
        let name = self.tokens[i + 1].clone();
        self.occurrence(SymbolKind::Guard, i + 1, true);
        let body_start = i + 3;
        let mut end = body_start;
        while let Some(token) = self.token(end) {
            if TOP_LEVEL_KEYWORDS.iter().any(|k| token.is(k)) {
                break;
            }
            end += 1;
        }
        let predicate = match (
            self.token(body_start),
            end.checked_sub(1).and_then(|e| self.token(e)),
        ) {
            (Some(first), Some(last)) if end > body_start => self.text[first.start..last.end]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        };
        self.out.guards.push(GuardDecl {
            name: name.text,
            predicate,
            range: name.name_range,
        });
        self.guard_references(body_start, end);
        end
    }

    /// `fragment NAME (p: kind, ...)? {`
    fn fragment(&mut self, i: usize) -> usize {
        let name = self.tokens[i + 1].clone();
        self.occurrence(SymbolKind::Fragment, i + 1, true);
        let mut params = Vec::new();
        let mut j = i + 2;
        if self.is(j, "(") {
            j += 1;
            while let Some(token) = self.token(j) {
                if token.is(")") {
                    j += 1;
                    break;
                }
                if token.kind == TokenKind::Ident && self.is(j + 1, ":") {
                    let kind = self.token(j + 2).map(|t| t.text.clone()).unwrap_or_default();
                    params.push((token.text.clone(), kind));
                    j += 3;
                } else {
                    j += 1;
                }
            }
        }
        self.out.fragments.push(FragmentDecl {
            name: name.text.clone(),
            params,
            range: name.name_range,
        });
        self.pending = Some(Scope::Fragment(name.text));
        j
    }

    /// `use FRAGMENT (args)? (as NAME)?`: a reference to the fragment, and the state it
    /// becomes when named.
    fn use_fragment(&mut self, i: usize) -> usize {
        self.occurrence(SymbolKind::Fragment, i + 1, false);
        let mut j = i + 2;
        if self.is(j, "(") {
            let mut depth = 0usize;
            while let Some(token) = self.token(j) {
                if token.is("(") {
                    depth += 1;
                } else if token.is(")") {
                    depth -= 1;
                    if depth == 0 {
                        j += 1;
                        break;
                    }
                } else if token.is("{") || token.is("}") {
                    return j; // an unclosed list: leave the braces to the walk
                }
                j += 1;
            }
        }
        if self.is(j, "as") && self.ref_at(j + 1).is_some() {
            self.state(i, j + 1);
            self.pending = None;
            return j + 2;
        }
        j
    }

    fn state(&mut self, keyword: usize, name: usize) {
        let name_token = self.tokens[name].clone();
        self.occurrence(SymbolKind::State, name, true);
        let scope = self.scope_path();
        let path = if scope.is_empty() {
            name_token.text.clone()
        } else {
            format!("{scope}.{}", name_token.text)
        };
        if let Some((container, container_is_fragment)) = self.container() {
            self.out.states.push(StateDecl {
                name: name_token.text.clone(),
                path,
                container,
                container_is_fragment,
                keyword: self.tokens[keyword].text.clone(),
                range: name_token.name_range,
            });
        }
        self.pending = Some(Scope::State(name_token.text));
    }

    /// `on enter ACTION`, or `on E | F (where PREDICATE)?`.
    fn trigger(&mut self, i: usize) -> usize {
        if self.token(i + 1).is_some_and(|t| HOOKS.iter().any(|h| t.is(h))) {
            if self.token(i + 2).is_some_and(|t| t.kind == TokenKind::Ident) {
                self.occurrence(SymbolKind::Action, i + 2, false);
                return i + 3;
            }
            return i + 2;
        }
        let mut j = i + 1;
        while self.ref_at(j).is_some() {
            self.occurrence(SymbolKind::Event, j, false);
            if !self.is(j + 1, "|") {
                j += 1;
                break;
            }
            j += 2;
        }
        if self.is(j, "where") {
            return self.predicate(j + 1);
        }
        j
    }

    /// A `where`/`when` predicate from `start`: its guard references.
    fn predicate(&mut self, start: usize) -> usize {
        let mut end = start;
        while let Some(token) = self.token(end) {
            if token.kind != TokenKind::Str && PREDICATE_END.contains(&token.text.as_str()) {
                break;
            }
            end += 1;
        }
        self.guard_references(start, end);
        end
    }

    /// The guard names among tokens `start..end` of a predicate: bare names that are
    /// neither side of a comparison.
    fn guard_references(&mut self, start: usize, end: usize) {
        let is_operator = |t: Option<&Token>| t.is_some_and(|t| COMPARISON_OPERATORS.iter().any(|o| t.is(o)));
        for j in start..end {
            let token = &self.tokens[j];
            let bare_name = token.kind == TokenKind::Ident
                && !token.text.contains('.')
                && !PREDICATE_WORDS.contains(&token.text.as_str());
            let compared = is_operator(self.token(j + 1)) || j > 0 && is_operator(self.token(j - 1));
            if bare_name && !compared {
                self.occurrence(SymbolKind::Guard, j, false);
            }
        }
    }

    /// `NAME: TYPE?` fields from `start` up to the closing brace; returns them and the
    /// index after the brace.
    fn fields(&mut self, start: usize) -> (Vec<FieldDecl>, usize) {
        let mut fields = Vec::new();
        let mut j = start;
        while let Some(token) = self.token(j) {
            if token.is("}") {
                return (fields, j + 1);
            }
            if token.is_ref() && self.is(j + 1, ":") {
                let ty = self.token(j + 2).map(|t| t.text.clone()).unwrap_or_default();
                let optional = self.is(j + 3, "?");
                fields.push(FieldDecl {
                    name: token.text.clone(),
                    ty,
                    optional,
                    range: token.name_range,
                });
                j += if optional { 4 } else { 3 };
            } else {
                j += 1;
            }
        }
        (fields, j)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: &str = r#"import "lib/kyc.stm" as kyc
event Submit { amount: float, note: string? }
guard big = amount > 100 and not flagged
bind { charge = shop.charge }
fragment Retry(on_fail: state, attempts: value) {
  state Trying {}
}
machine Order {
  context { total: float = 0 }
  initial Draft
  state Draft {}
  state Payment {
    initial Charging
    state Charging { on enter charge }
    from Charging to Draft on Submit | Cancel where big
  }
  from Draft to Payment on Submit
  use Retry(on_fail = Draft) as Again
}
"#;

    #[test]
    fn collects_declarations_with_paths_and_details() {
        let index = FileIndex::build(ORDER);
        let paths: Vec<&str> = index.states.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths, ["Trying", "Draft", "Payment", "Payment.Charging", "Again"]);
        assert_eq!(index.states[4].keyword, "use");
        assert_eq!(index.states[0].container, "Retry");
        assert!(index.states[0].container_is_fragment);
        assert_eq!(index.events[0].fields.len(), 2);
        assert!(index.events[0].fields[1].optional);
        assert_eq!(index.guards[0].predicate, "amount > 100 and not flagged");
        assert_eq!(index.fragments[0].params[1], ("attempts".into(), "value".into()));
        assert_eq!(index.bindings[0].target, "shop.charge");
        assert_eq!(index.imports[0].alias.as_deref(), Some("kyc"));
        assert_eq!(index.context_fields[0].0, "Order");
    }

    #[test]
    fn references_know_their_kind_and_scope() {
        let index = FileIndex::build(ORDER);
        let refs: Vec<(SymbolKind, &str, &str)> = index
            .occurrences
            .iter()
            .filter(|o| !o.is_declaration)
            .map(|o| (o.kind, o.name.as_str(), o.scope.as_str()))
            .collect();
        assert!(refs.contains(&(SymbolKind::State, "Charging", "Payment")));
        assert!(refs.contains(&(SymbolKind::Event, "Cancel", "Payment")));
        assert!(refs.contains(&(SymbolKind::Guard, "big", "Payment")));
        assert!(refs.contains(&(SymbolKind::Guard, "flagged", "")));
        assert!(!refs.iter().any(|r| r.1 == "amount"));
        assert!(refs.contains(&(SymbolKind::Action, "charge", "Payment.Charging")));
        assert!(refs.contains(&(SymbolKind::Fragment, "Retry", "")));
    }

    #[test]
    fn states_resolve_from_the_innermost_scope_outwards() {
        let index = FileIndex::build(ORDER);
        let found = index
            .resolve_state("Order", "Payment", "Draft")
            .map(|s| s.path.as_str());
        assert_eq!(found, Some("Draft"));
        let found = index
            .resolve_state("Order", "Payment", "Charging")
            .map(|s| s.path.as_str());
        assert_eq!(found, Some("Payment.Charging"));
        assert!(index.resolve_state("Order", "", "Nowhere").is_none());
    }

    #[test]
    fn a_broken_document_still_indexes() {
        let index = FileIndex::build("machine M {\n  state A {\n  from A to");
        assert_eq!(index.states.len(), 1);
    }
}
