//! Completion by context, read from the tokens before the cursor: state paths after
//! `from`/`to`/`initial`, events after `on` (and `|`), the trigger's event fields and
//! the guards inside `where`/`when`, bound handlers after `on enter`/`exit`/`activity`,
//! fragments after `use`; the parser's keywords anywhere else.

use lsp_types::{CompletionItem, CompletionItemKind, Position, Uri};
use stm_core::definition::RESERVED_EVENTS;
// the parser's own list: a copy here drifted from it
use stm_core::dsl::KEYWORDS;

use super::documents::Documents;
use super::index::{FileIndex, HOOKS};
use super::lexer::{offset_of, Token, TokenKind};
use super::symbols::visible_events;

/// What the cursor's position asks for.
#[derive(Debug, PartialEq, Eq)]
enum Context {
    States,
    Events,
    Actions,
    Fragments,
    /// Inside a predicate whose trigger names these events.
    Predicate(Vec<String>),
    Anything,
}

/// The completion items at `position` in the document `uri`.
pub(crate) fn completion(documents: &Documents, uri: &Uri, position: Position) -> Vec<CompletionItem> {
    let Some(text) = documents.text(uri) else {
        return Vec::new();
    };
    let index = FileIndex::build(&text);
    let cursor = offset_of(&text, position);
    // the tokens wholly before the cursor, less the word being typed
    let before: Vec<&Token> = index
        .tokens
        .iter()
        .take_while(|t| t.end <= cursor)
        .filter(|t| !(t.end == cursor && t.kind == TokenKind::Ident && t.start < cursor))
        .collect();
    let mut items = match context(&before) {
        Context::States => states(&index, &text, cursor),
        Context::Events => {
            let mut items: Vec<CompletionItem> = visible_events(documents, uri, &index)
                .into_iter()
                .map(|(_, e)| {
                    let fields: Vec<String> = e.fields.iter().map(|f| f.name.clone()).collect();
                    item(
                        &e.name,
                        CompletionItemKind::EVENT,
                        format!("event {{{}}}", fields.join(", ")),
                    )
                })
                .collect();
            items.extend(
                RESERVED_EVENTS
                    .iter()
                    .map(|e| item(e, CompletionItemKind::EVENT, "built-in event".into())),
            );
            items.extend(
                HOOKS
                    .iter()
                    .map(|h| item(h, CompletionItemKind::KEYWORD, "hook".into())),
            );
            items
        }
        Context::Actions => {
            let mut bindings = index.bindings.clone();
            for imported in documents.imports(uri, &index) {
                bindings.extend(imported.index.bindings);
            }
            let mut items: Vec<CompletionItem> = Vec::new();
            for binding in bindings {
                if !items.iter().any(|i| i.label == binding.name) {
                    items.push(item(
                        &binding.name,
                        CompletionItemKind::FUNCTION,
                        format!("bound to {}", binding.target),
                    ));
                }
            }
            items
        }
        Context::Fragments => {
            let mut items: Vec<CompletionItem> = index
                .fragments
                .iter()
                .map(|f| item(&f.name, CompletionItemKind::MODULE, "fragment".into()))
                .collect();
            for imported in documents.imports(uri, &index) {
                items.extend(imported.index.fragments.iter().map(|f| {
                    item(
                        &format!("{}{}", imported.prefix, f.name),
                        CompletionItemKind::MODULE,
                        "fragment".into(),
                    )
                }));
            }
            items
        }
        Context::Predicate(trigger) => {
            let mut items = Vec::new();
            for (_, event) in visible_events(documents, uri, &index) {
                if trigger.contains(&event.name) {
                    for field in event.fields {
                        if !items.iter().any(|i: &CompletionItem| i.label == field.name) {
                            let optional = if field.optional { "?" } else { "" };
                            let detail =
                                format!("{}: {}{optional} (event {})", field.name, field.ty, event.name);
                            items.push(item(&field.name, CompletionItemKind::FIELD, detail));
                        }
                    }
                }
            }
            let mut guards = index.guards.clone();
            for imported in documents.imports(uri, &index) {
                guards.extend(imported.index.guards);
            }
            items.extend(guards.iter().map(|g| {
                item(
                    &g.name,
                    CompletionItemKind::VARIABLE,
                    format!("guard: {}", g.predicate),
                )
            }));
            items.extend(index.context_fields.iter().map(|(_, f)| {
                item(
                    &format!("context.{}", f.name),
                    CompletionItemKind::FIELD,
                    format!("context field: {}", f.ty),
                )
            }));
            items
        }
        Context::Anything => Vec::new(),
    };
    if items.is_empty() {
        items = KEYWORDS
            .iter()
            .map(|k| item(k, CompletionItemKind::KEYWORD, "keyword".into()))
            .collect();
    }
    items
}

fn item(label: &str, kind: CompletionItemKind, detail: String) -> CompletionItem {
    CompletionItem {
        label: label.to_string(),
        kind: Some(kind),
        detail: Some(detail),
        ..CompletionItem::default()
    }
}

/// The context the tokens `before` the cursor set.
fn context(before: &[&Token]) -> Context {
    let Some(last) = before.last() else {
        return Context::Anything;
    };
    let previous = before.len().checked_sub(2).map(|i| before[i]);
    if ["to", "from", "initial"].iter().any(|k| last.is(k)) {
        return Context::States;
    }
    if HOOKS.iter().any(|h| last.is(h)) && previous.is_some_and(|p| p.is("on")) {
        return Context::Actions;
    }
    if last.is("on") || (last.is("|") && in_trigger(before)) {
        return Context::Events;
    }
    if last.is("use") {
        return Context::Fragments;
    }
    // inside a predicate: a `where`/`when` since the last word that ends one
    for (i, token) in before.iter().enumerate().rev() {
        if token.is("where") || token.is("when") {
            return Context::Predicate(trigger_events(&before[..i]));
        }
        if token.kind != TokenKind::Str
            && ["to", "set", "{", "}", "from", "select"].contains(&token.text.as_str())
        {
            break;
        }
    }
    Context::Anything
}

/// Whether the `|` at the end of `before` continues an `on A | B` list.
fn in_trigger(before: &[&Token]) -> bool {
    let mut i = before.len().saturating_sub(1);
    while i >= 2 && before[i].is("|") && before[i - 1].is_ref() {
        if before[i - 2].is("on") {
            return true;
        }
        i -= 2;
    }
    false
}

/// The events the trigger of the transition ending `before` names: the refs after the
/// last `on` of the statement (for a `when`, the enclosing `choose`'s).
fn trigger_events(before: &[&Token]) -> Vec<String> {
    for (i, token) in before.iter().enumerate().rev() {
        if token.is("on") {
            let mut events = Vec::new();
            let mut j = i + 1;
            while let Some(t) = before.get(j).filter(|t| t.is_ref()) {
                events.push(t.text.clone());
                if !before.get(j + 1).is_some_and(|n| n.is("|")) {
                    break;
                }
                j += 2;
            }
            return events;
        }
        if token.is("from") {
            break;
        }
    }
    Vec::new()
}

/// The states of the container the cursor is in, each by the shortest name that
/// resolves to it from the cursor's scope.
fn states(index: &FileIndex, text: &str, cursor: usize) -> Vec<CompletionItem> {
    let Some((container, scope)) = scope_at(text, cursor) else {
        return Vec::new();
    };
    index
        .states
        .iter()
        .filter(|s| s.container == container)
        .map(|s| {
            let short = index
                .resolve_state_in_scope(&container, &scope, &s.name)
                .is_some_and(|found| found.path == s.path);
            let label = if short { s.name.clone() } else { s.path.clone() };
            item(
                &label,
                CompletionItemKind::CLASS,
                format!("{} {}.{}", s.keyword, container, s.path),
            )
        })
        .collect()
}

/// The container and state scope at byte `cursor`: the index of the text up to there,
/// with a probe reference appended, places the probe where a reference typed at the
/// cursor would be.
fn scope_at(text: &str, cursor: usize) -> Option<(String, String)> {
    const PROBE: &str = "__stm_cursor__";
    let head = text.get(..cursor)?;
    let probed = FileIndex::build(&format!("{head} ; from {PROBE}"));
    let probe = probed.occurrences.iter().rev().find(|o| o.name == PROBE)?;
    Some((probe.container.clone()?, probe.scope.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsp::lexer::tokenize;

    fn context_of(src: &str) -> Context {
        let tokens = tokenize(src);
        let refs: Vec<&Token> = tokens.iter().collect();
        context(&refs)
    }

    #[test]
    fn the_word_before_sets_the_context() {
        assert_eq!(context_of("from A to"), Context::States);
        assert_eq!(context_of("from A to B on"), Context::Events);
        assert_eq!(context_of("from A to B on X |"), Context::Events);
        assert_eq!(context_of("state A { on enter"), Context::Actions);
        assert_eq!(context_of("use"), Context::Fragments);
        assert_eq!(
            context_of("from A to B on X | Y where amount > 1 and"),
            Context::Predicate(vec!["X".into(), "Y".into()])
        );
        assert_eq!(context_of("from A to B on X set"), Context::Anything);
    }
}
