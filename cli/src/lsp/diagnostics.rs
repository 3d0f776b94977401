//! Diagnostics: what `stm validate` reports for the document, each at its range.
//!
//! A syntax error stops there (nothing else can be read); otherwise every machine is
//! loaded (imports resolved next to the file) and validated. A located error or
//! finding covers the token at its position, else the rest of its line; one located in
//! an imported file lands on the `import` that brings it in.

use std::path::Path;

use lsp_types::{Diagnostic, DiagnosticSeverity, Position, Range, Uri};
use stm_core::validate::Severity;

use super::documents::{path_of, resolve_import};
use super::index::FileIndex;
use super::lexer::{line_end, position_of};

const SOURCE: &str = "stm";

/// The diagnostics of `text`, the document `uri`.
pub(crate) fn diagnostics(uri: &Uri, text: &str) -> Vec<Diagnostic> {
    let index = FileIndex::build(text);
    let origin = path_of(uri);
    let program = match stm_core::dsl::parse(text) {
        Ok(program) => program,
        Err(err) => return vec![from_dsl_error(uri, text, &index, &err)],
    };
    let mut out: Vec<Diagnostic> = Vec::new();
    let mut push = |d: Diagnostic| {
        if !out.contains(&d) {
            out.push(d);
        }
    };
    for machine in &program.machines {
        match stm_core::dsl::load_definition_str(text, Some(machine), origin.as_deref()) {
            Ok(definition) => {
                for finding in stm_core::validate::validate(&definition) {
                    let severity = match finding.severity {
                        Severity::Error => DiagnosticSeverity::ERROR,
                        Severity::Warning => DiagnosticSeverity::WARNING,
                    };
                    let at = match finding.path.as_deref() {
                        Some(path) if !path.is_empty() => format!(" (at {machine}.{path})"),
                        _ => format!(" (in {machine})"),
                    };
                    let message = format!("{}: {}{at}", finding.code, finding.message);
                    let range = locate(
                        uri,
                        text,
                        &index,
                        finding.file.as_deref(),
                        finding.line,
                        finding.column,
                    );
                    push(diagnostic(range, severity, Some(finding.code.clone()), message));
                }
            }
            Err(err) => push(from_dsl_error(uri, text, &index, &err)),
        }
    }
    out
}

fn diagnostic(
    range: Range,
    severity: DiagnosticSeverity,
    code: Option<String>,
    message: String,
) -> Diagnostic {
    Diagnostic {
        range,
        severity: Some(severity),
        code: code.map(lsp_types::NumberOrString::String),
        source: Some(SOURCE.to_string()),
        message,
        ..Diagnostic::default()
    }
}

fn from_dsl_error(uri: &Uri, text: &str, index: &FileIndex, err: &stm_core::dsl::DslError) -> Diagnostic {
    let mut message = err.message.clone();
    if let Some(hint) = &err.hint {
        message.push_str(&format!("\nhint: {hint}"));
    }
    let range = locate(uri, text, index, err.file.as_deref(), err.line, err.column);
    if let (Some(file), false) = (&err.file, is_this_file(uri, err.file.as_deref())) {
        let line = err.line.map_or(String::new(), |l| format!(":{l}"));
        message = format!("{message}\n(in {file}{line})");
    }
    diagnostic(range, DiagnosticSeverity::ERROR, None, message)
}

fn is_this_file(uri: &Uri, file: Option<&str>) -> bool {
    let (Some(file), Some(this)) = (file, path_of(uri)) else {
        return true;
    };
    same_file(Path::new(file), &this)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The range for a 1-based `line`/`column` of `file`: the token starting there, else
/// the rest of the line; for another file, the import of it (or the first line).
fn locate(
    uri: &Uri,
    text: &str,
    index: &FileIndex,
    file: Option<&str>,
    line: Option<usize>,
    column: Option<usize>,
) -> Range {
    if !is_this_file(uri, file) {
        let imported = file.map(Path::new);
        let import = index.imports.iter().find(|i| {
            let target = resolve_import(uri, &i.path).and_then(|u| path_of(&u));
            matches!((target, imported), (Some(t), Some(f)) if same_file(&t, f))
        });
        // an import of an import: no range of this document names the file, so the
        // first import stands for the chain
        if let Some(import) = import.or(index.imports.first()) {
            return import.range;
        }
        return Range::new(Position::new(0, 0), line_end(text, 0));
    }
    let Some(line) = line else {
        return Range::new(Position::new(0, 0), line_end(text, 0));
    };
    let start = position_of(text, line, column.unwrap_or(1));
    if let Some(token) = index.tokens.iter().find(|t| t.range.start == start) {
        return token.range;
    }
    let end = line_end(text, start.line);
    Range::new(
        start,
        if end > start {
            end
        } else {
            Position::new(start.line, start.character + 1)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri() -> Uri {
        crate::lsp::uri::parse("untitled:x.stm")
            .unwrap_or_else(|| crate::lsp::uri::parse("file:///x.stm").expect("a url"))
    }

    #[test]
    fn a_syntax_error_covers_its_token() {
        let text = "machine M {\n  initial A\n  state A {}\n  from A to }\n}\n";
        let found = diagnostics(&uri(), text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].range,
            Range::new(Position::new(3, 12), Position::new(3, 13))
        );
    }

    #[test]
    fn validation_findings_are_located() {
        let text = "machine M {\n  initial A\n  state A {}\n  state B {}\n}\n";
        let found = diagnostics(&uri(), text);
        assert!(
            found.iter().any(|d| d.message.starts_with("unreachable")),
            "{found:?}"
        );
        let unreachable = found.iter().find(|d| d.message.starts_with("unreachable"));
        assert_eq!(unreachable.map(|d| d.range.start.line), Some(3));
    }

    #[test]
    fn a_valid_machine_has_none() {
        let text =
            "event Go {}\nmachine M {\n  initial A\n  state A {}\n  final B done\n  from A to B on Go\n}\n";
        assert_eq!(diagnostics(&uri(), text), Vec::<Diagnostic>::new());
    }
}
