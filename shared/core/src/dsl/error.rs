//! [`DslError`]: a located, caret-annotated error of the `.stm` front end.

use std::fmt;

/// An error found while reading a `.stm` program: a syntax error, a structural
/// mistake the parser rejects (`ttl` on a state, ...), or a resolution failure of the
/// loader (unknown fragment, unbound handler, unresolvable target, missing import, ...).
///
/// `line`/`column` are 1-based (the column counts characters, like harel's); `snippet`
/// is the offending source line, rendered by [`Display`](fmt::Display) with a caret
/// under `column`:
///
/// ```text
/// error: expected an event name, found `}`
///   --> order.stm:12:17
///    |
/// 12 |   from A to B on }
///    |                  ^
///    = hint: ...
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DslError {
    pub message: String,
    /// The file the location refers to (the importing or the imported one), when the
    /// source came from a file.
    pub file: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// The text of the offending line (without its line break).
    pub snippet: Option<String>,
    pub hint: Option<String>,
}

impl DslError {
    /// An error with a message only (no location).
    pub fn new(message: impl Into<String>) -> Self {
        DslError {
            message: message.into(),
            file: None,
            line: None,
            column: None,
            snippet: None,
            hint: None,
        }
    }

    /// An error at `line`:`column` of `source` (whose offending line becomes the snippet).
    pub fn at(message: impl Into<String>, source: &str, line: usize, column: usize) -> Self {
        DslError {
            message: message.into(),
            file: None,
            line: Some(line),
            column: Some(column),
            snippet: source_line(source, line).map(str::to_string),
            hint: None,
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }

    /// `file:line:column` (whichever parts are known), as printed after `-->`.
    pub fn location(&self) -> Option<String> {
        let mut out = match (&self.file, self.line) {
            (None, None) => return None,
            (Some(f), _) => f.clone(),
            (None, Some(_)) => "<input>".to_string(),
        };
        if let Some(line) = self.line {
            out.push_str(&format!(":{line}"));
            if let Some(col) = self.column {
                out.push_str(&format!(":{col}"));
            }
        }
        Some(out)
    }
}

/// Line `line` (1-based) of `source`, split the way the lexer counts lines (on `\n`),
/// without a trailing `\r`.
pub(crate) fn source_line(source: &str, line: usize) -> Option<&str> {
    if line == 0 {
        return None;
    }
    let text = source.split('\n').nth(line - 1)?;
    Some(text.strip_suffix('\r').unwrap_or(text))
}

impl fmt::Display for DslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = format!("error: {}", self.message);
        let at = Position {
            line: self.line,
            column: self.column,
            snippet: self.snippet.as_deref(),
        };
        write_diagnostic(f, &head, self.location(), at, self.hint.as_deref())
    }
}

/// Where in its file a diagnostic is: the line and column (1-based) and the line's text.
#[derive(Clone, Copy)]
pub(crate) struct Position<'s> {
    pub(crate) line: Option<usize>,
    pub(crate) column: Option<usize>,
    pub(crate) snippet: Option<&'s str>,
}

/// The one shape of everything `stm` reports about a `.stm` file, a parse error and a
/// validation finding alike: `head`, then where (`--> file:line:col`), the offending
/// line with a caret under `column`, and the hint.
pub(crate) fn write_diagnostic(
    f: &mut impl fmt::Write,
    head: &str,
    location: Option<String>,
    at: Position<'_>,
    hint: Option<&str>,
) -> fmt::Result {
    f.write_str(head)?;
    let Position {
        line,
        column,
        snippet,
    } = at;
    let width = line.map_or(1, |l| l.to_string().len());
    let pad = " ".repeat(width);
    if let Some(loc) = location {
        write!(f, "\n{pad}--> {loc}")?;
    }
    if let (Some(line), Some(snippet)) = (line, snippet) {
        write!(f, "\n{pad} |\n{line} | {snippet}")?;
        if let Some(col) = column {
            // copy tabs so the caret lines up under a tab-indented line
            let lead: String = snippet
                .chars()
                .take(col.saturating_sub(1))
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            let extra = col.saturating_sub(1).saturating_sub(snippet.chars().count());
            write!(f, "\n{pad} | {lead}{}^", " ".repeat(extra))?;
        }
    }
    if let Some(hint) = hint {
        write!(f, "\n{pad} = hint: {hint}")?;
    }
    Ok(())
}

impl std::error::Error for DslError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_rustc() {
        let src = "machine M {\n  from A to B on\n}\n";
        let e = DslError::at("expected an event name, found `}`", src, 3, 1)
            .with_file("order.stm")
            .with_hint("name the event that triggers the transition");
        assert_eq!(
            e.to_string(),
            "error: expected an event name, found `}`\n --> order.stm:3:1\n  |\n3 | }\n  | ^\n  = hint: name the event that triggers the transition"
        );
    }

    #[test]
    fn caret_follows_tabs_and_end_of_line() {
        let src = "\tfrom A to B on";
        let e = DslError::at("x", src, 1, 16);
        let text = e.to_string();
        assert!(
            text.ends_with("1 | \tfrom A to B on\n  | \t              ^"),
            "{text}"
        );
    }

    #[test]
    fn positionless() {
        let e = DslError::new("no machine declared").with_file("a.stm");
        assert_eq!(e.to_string(), "error: no machine declared\n --> a.stm");
    }
}
