//! Resolving a name under the cursor to its declaration, in the document or in a file
//! it imports.
//!
//! States are local to their machine or fragment and resolve by scope; events, guards
//! and handler bindings are one namespace across a file and its imports (the local
//! declaration wins); fragments and machines of an imported file take its alias
//! (`import "x.stm" as r` makes `r.Retry`).

use lsp_types::{Location, Uri};

use super::documents::Documents;
use super::index::{
    BindingDecl, EventDecl, FileIndex, FragmentDecl, GuardDecl, NamedDecl, Occurrence, StateDecl, SymbolKind,
};

/// What a name was resolved to, and where.
#[derive(Debug, Clone)]
pub(crate) enum Declaration {
    State(Uri, StateDecl),
    Event(Uri, EventDecl),
    Guard(Uri, GuardDecl),
    /// The fragment and the name it is used by (its alias prefix included).
    Fragment(Uri, FragmentDecl, String),
    Machine(Uri, NamedDecl, String),
    Action(Uri, BindingDecl),
}

impl Declaration {
    /// Where the declaration's name is.
    pub(crate) fn location(&self) -> Location {
        let (uri, range) = match self {
            Declaration::State(u, d) => (u, d.range),
            Declaration::Event(u, d) => (u, d.range),
            Declaration::Guard(u, d) => (u, d.range),
            Declaration::Fragment(u, d, _) => (u, d.range),
            Declaration::Machine(u, d, _) => (u, d.range),
            Declaration::Action(u, d) => (u, d.range),
        };
        Location::new(uri.clone(), range)
    }
}

/// The declaration `occurrence` (in the document `uri`, indexed as `index`) refers to.
pub(crate) fn resolve(
    documents: &Documents,
    uri: &Uri,
    index: &FileIndex,
    occurrence: &Occurrence,
) -> Option<Declaration> {
    if occurrence.kind == SymbolKind::State {
        let container = occurrence.container.as_deref()?;
        let state = if occurrence.is_declaration {
            index.state_declared_at(&occurrence.range)
        } else {
            index.resolve_state(container, &occurrence.scope, &occurrence.name)
        };
        return state.map(|s| Declaration::State(uri.clone(), s.clone()));
    }
    let local = find_in(uri, index, "", occurrence.kind, &occurrence.name);
    if local.is_some() {
        return local;
    }
    documents.imports(uri, index).iter().rev().find_map(|imported| {
        find_in(
            &imported.uri,
            &imported.index,
            &imported.prefix,
            occurrence.kind,
            &occurrence.name,
        )
    })
}

/// The declaration of `name` as a `kind` among `index`'s (a file whose fragments and
/// machines are named with `prefix`).
fn find_in(uri: &Uri, index: &FileIndex, prefix: &str, kind: SymbolKind, name: &str) -> Option<Declaration> {
    let uri = uri.clone();
    match kind {
        SymbolKind::State => None,
        SymbolKind::Event => index
            .events
            .iter()
            .find(|e| e.name == name)
            .map(|e| Declaration::Event(uri, e.clone())),
        SymbolKind::Guard => index
            .guards
            .iter()
            .find(|g| g.name == name)
            .map(|g| Declaration::Guard(uri, g.clone())),
        SymbolKind::Action => index
            .bindings
            .iter()
            .find(|b| b.name == name)
            .map(|b| Declaration::Action(uri, b.clone())),
        SymbolKind::Fragment => index
            .fragments
            .iter()
            .find(|f| format!("{prefix}{}", f.name) == name)
            .map(|f| Declaration::Fragment(uri, f.clone(), name.to_string())),
        SymbolKind::Machine => index
            .machines
            .iter()
            .find(|m| format!("{prefix}{}", m.name) == name)
            .map(|m| Declaration::Machine(uri, m.clone(), name.to_string())),
    }
}

/// Every event declared in the document or its imports (the local ones first), each
/// name once.
pub(crate) fn visible_events(documents: &Documents, uri: &Uri, index: &FileIndex) -> Vec<(Uri, EventDecl)> {
    let mut out: Vec<(Uri, EventDecl)> = index.events.iter().map(|e| (uri.clone(), e.clone())).collect();
    for imported in documents.imports(uri, index).into_iter().rev() {
        for event in imported.index.events {
            if !out.iter().any(|(_, e)| e.name == event.name) {
                out.push((imported.uri.clone(), event));
            }
        }
    }
    out
}
