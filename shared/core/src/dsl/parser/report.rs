//! The syntax error a failed parse reports: its message, position and hint, as harel
//! words and places it.

use super::{Found, Parser, SyntaxError, DECL, DECL_WORDS, ITEM, ITEM_WORDS};
use crate::dsl::error::DslError;
use crate::dsl::lexer::{TokKind, Token};
use crate::suggest::edit_distance;

impl Parser<'_> {
    pub(super) fn error(&self) -> SyntaxError {
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
