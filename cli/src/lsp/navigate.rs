//! Go-to-definition, find-references and rename.
//!
//! All three start from the declaration the cursor's name resolves to. References of a
//! state are in its own document (states are local to their machine); references of an
//! event are in every open document and every file the document imports, wherever the
//! name resolves to the same declaration.

use std::collections::HashMap;

use super::uri;
use lsp_types::{Location, Position, Range, TextEdit, Uri, WorkspaceEdit};

use super::documents::{resolve_import, Documents};
use super::index::{FileIndex, SymbolKind};
use super::symbols::{resolve, Declaration};

/// Where the name (or import) under the cursor is declared.
pub(crate) fn definition(documents: &Documents, uri: &Uri, position: Position) -> Option<Location> {
    let index = documents.index(uri)?;
    if let Some(import) = index.import_at(position) {
        let target = resolve_import(uri, &import.path)?;
        uri::to_file_path(&target).filter(|p| p.exists())?;
        return Some(Location::new(target, Range::default()));
    }
    let occurrence = index.occurrence_at(position)?;
    resolve(documents, uri, &index, occurrence).map(|d| d.location())
}

/// Every occurrence of the state or event under the cursor, its declaration included
/// when `include_declaration`.
pub(crate) fn references(
    documents: &Documents,
    uri: &Uri,
    position: Position,
    include_declaration: bool,
) -> Vec<Location> {
    let Some(index) = documents.index(uri) else {
        return Vec::new();
    };
    let Some(occurrence) = index.occurrence_at(position) else {
        return Vec::new();
    };
    let Some(target) = resolve(documents, uri, &index, occurrence) else {
        // an event no file declares (`Timeout`, a typo): its uses in this document
        if occurrence.kind == SymbolKind::Event {
            return index
                .occurrences
                .iter()
                .filter(|o| o.kind == SymbolKind::Event && o.name == occurrence.name)
                .map(|o| Location::new(uri.clone(), o.range))
                .collect();
        }
        return Vec::new();
    };
    let kind = match target {
        Declaration::State(..) => SymbolKind::State,
        Declaration::Event(..) => SymbolKind::Event,
        _ => return Vec::new(),
    };
    let wanted = target.location();
    let mut files: Vec<(Uri, FileIndex)> = vec![(uri.clone(), index.clone())];
    if kind == SymbolKind::Event {
        let mut others: Vec<Uri> = documents.uris().cloned().collect();
        others.extend(documents.imports(uri, &index).into_iter().map(|i| i.uri));
        others.push(wanted.uri.clone());
        others.sort();
        others.dedup();
        for other in others {
            if other != *uri {
                if let Some(other_index) = documents.index(&other) {
                    files.push((other, other_index));
                }
            }
        }
    }
    let mut out = Vec::new();
    for (file, file_index) in &files {
        for candidate in file_index.occurrences.iter().filter(|o| o.kind == kind) {
            if candidate.name != wanted_name(&target) && kind == SymbolKind::Event {
                continue;
            }
            if candidate.is_declaration && !include_declaration {
                continue;
            }
            let same =
                resolve(documents, file, file_index, candidate).is_some_and(|d| d.location() == wanted);
            if same {
                out.push(Location::new(
                    file.clone(),
                    last_segment(&candidate.name, candidate.range),
                ));
            }
        }
    }
    out
}

/// The range of the last segment of a dotted path (`Charging` of `Payment.Charging`):
/// the part that names the state itself.
fn last_segment(name: &str, range: Range) -> Range {
    match name.rsplit_once('.') {
        Some((_, last)) if range.start.line == range.end.line => {
            let width = last.encode_utf16().count() as u32;
            Range::new(
                Position::new(range.end.line, range.end.character.saturating_sub(width)),
                range.end,
            )
        }
        _ => range,
    }
}

fn wanted_name(declaration: &Declaration) -> &str {
    match declaration {
        Declaration::State(_, d) => &d.name,
        Declaration::Event(_, d) => &d.name,
        Declaration::Guard(_, d) => &d.name,
        Declaration::Fragment(_, d, _) => &d.name,
        Declaration::Machine(_, d, _) => &d.name,
        Declaration::Action(_, d) => &d.name,
    }
}

/// The edits renaming the state or event under the cursor to `new_name`, or why not.
pub(crate) fn rename(
    documents: &Documents,
    uri: &Uri,
    position: Position,
    new_name: &str,
) -> Result<Option<WorkspaceEdit>, String> {
    let declared = documents.index(uri).is_some_and(|index| {
        index
            .occurrence_at(position)
            .is_some_and(|o| resolve(documents, uri, &index, o).is_some())
    });
    if !declared {
        return Ok(None); // a built-in event or an unresolved name: nothing to rename
    }
    let locations = references(documents, uri, position, true);
    if locations.is_empty() {
        return Ok(None);
    }
    let quoted = locations.iter().all(|l| is_quoted(documents, &l.uri, &l.range));
    if !is_identifier(new_name) && !quoted {
        return Err(format!(
            "{new_name:?} is not a name (letters, digits and _, not starting with a digit)"
        ));
    }
    // the protocol's own type for a workspace edit's changes; `Uri` hashes its text
    #[allow(clippy::mutable_key_type)]
    let mut changes: HashMap<Uri, Vec<TextEdit>> = HashMap::new();
    for location in locations {
        changes
            .entry(location.uri)
            .or_default()
            .push(TextEdit::new(location.range, new_name.to_string()));
    }
    Ok(Some(WorkspaceEdit::new(changes)))
}

/// Whether the name at `range` is written inside quotes.
fn is_quoted(documents: &Documents, uri: &Uri, range: &Range) -> bool {
    documents.index(uri).is_some_and(|index| {
        index
            .tokens
            .iter()
            .any(|t| t.name_range == *range && t.kind == super::lexer::TokenKind::Str)
    })
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: &str = "import \"lib.stm\"\nmachine M {\n  initial A\n  state A {\n    initial A\n    state A {}\n    from A to B on Go\n  }\n  state B {}\n  from B to A on Go\n  from A to B on Timeout\n}\n";
    const LIB: &str = "event Go {}\n";

    fn documents() -> (Documents, Uri, Uri) {
        let main = uri::parse("file:///nowhere/main.stm").expect("a url");
        let lib = uri::parse("file:///nowhere/lib.stm").expect("a url");
        let mut documents = Documents::default();
        documents.open(main.clone(), MAIN.to_string());
        documents.open(lib.clone(), LIB.to_string());
        (documents, main, lib)
    }

    fn at(line: u32, character: u32) -> Position {
        Position::new(line, character)
    }

    #[test]
    fn a_state_resolves_in_its_scope() {
        let (documents, main, _) = documents();
        // `from A` inside the outer A is the inner A; at the top it is the outer one
        let inner = definition(&documents, &main, at(6, 9)).map(|l| l.range.start);
        assert_eq!(inner, Some(at(5, 10)));
        let outer = definition(&documents, &main, at(9, 12)).map(|l| l.range.start);
        assert_eq!(outer, Some(at(3, 8)));
    }

    #[test]
    fn an_event_is_found_across_the_import_and_renamed_everywhere() {
        let (documents, main, lib) = documents();
        let found = definition(&documents, &main, at(6, 20));
        assert_eq!(
            found,
            Some(Location::new(lib.clone(), Range::new(at(0, 6), at(0, 8))))
        );
        let edit = rename(&documents, &main, at(6, 20), "Went")
            .expect("renamed")
            .expect("edits");
        #[allow(clippy::mutable_key_type)] // the protocol's type; `Uri` hashes its text
        let changes = edit.changes.unwrap_or_default();
        assert_eq!(changes.get(&main).map(Vec::len), Some(2));
        assert_eq!(changes.get(&lib).map(Vec::len), Some(1));
    }

    #[test]
    fn a_built_in_event_has_references_but_no_rename() {
        let (documents, main, _) = documents();
        assert_eq!(references(&documents, &main, at(10, 18), true).len(), 1);
        assert_eq!(rename(&documents, &main, at(10, 18), "Later"), Ok(None));
    }

    #[test]
    fn a_rename_to_a_non_name_is_refused() {
        let (documents, main, _) = documents();
        assert!(rename(&documents, &main, at(8, 8), "two words").is_err());
    }
}
