//! Keywords glued to the word after them (`fromA`), which harel's lexer splits off and
//! ours does not: where such a split leads harel's parse, so a syntax error is reported
//! where harel reports it (see [`refine`]).

use super::report::end_position;
use super::{try_parse, Failure, Found, Parser, SyntaxError, DECL, DECL_WORDS, ITEM, ITEM_WORDS};
use crate::dsl::lexer::TokKind;

pub(super) enum Refined {
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
pub(super) fn refine(src: &str, failure: Failure, depth: usize) -> Refined {
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
        .and_then(|l| crate::dsl::error::source_line(src, l))
        .map(str::to_string);
    if e.err.hint.is_none() {
        e.err.hint = Some(glued.to_string());
    }
    e
}

impl<'s> Parser<'s> {
    /// Where harel's lexer would split the word it failed at: after each keyword
    /// expected there that the word starts with (and `=` out of an `==`).
    pub(super) fn glued_splits(&self) -> Vec<(usize, &'static str, String)> {
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
