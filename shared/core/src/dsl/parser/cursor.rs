//! The parser's cursor over the tokens, and the bookkeeping of the furthest failure:
//! what was expected there and what was found.

use super::{At, Fail, Far, Found, PResult, Parser};
use crate::dsl::lexer::{TokKind, Token};

impl<'s> Parser<'s> {
    // --- token access -------------------------------------------------------------

    pub(super) fn tok(&self, i: usize) -> &Token {
        &self.toks[i.min(self.toks.len() - 1)]
    }

    pub(super) fn peek(&self) -> &Token {
        self.tok(self.pos)
    }

    pub(super) fn text(&self, i: usize) -> &'s str {
        self.tok(i).text(self.src)
    }

    pub(super) fn at(&self) -> At {
        let t = self.peek();
        At {
            line: t.line,
            col: t.col,
        }
    }

    pub(super) fn bump(&mut self) {
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
    }

    /// Whether token `i` is the word `kw`.
    pub(super) fn word_at(&self, i: usize, kw: &str) -> bool {
        let t = self.tok(i);
        t.kind == TokKind::Name && t.text(self.src) == kw
    }

    pub(super) fn punct_at(&self, i: usize, p: &str) -> bool {
        let t = self.tok(i);
        t.kind == TokKind::Punct && t.text(self.src) == p
    }

    pub(super) fn kind_at(&self, i: usize) -> TokKind {
        self.tok(i).kind
    }

    // --- failure bookkeeping ------------------------------------------------------

    pub(super) fn note(&mut self, offset: usize, line: usize, col: usize, found: Found, what: &'static str) {
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
    pub(super) fn expected(&mut self, what: &'static str) {
        let t = *self.peek();
        self.note(t.start, t.line, t.col, Found::Tok(self.pos), what);
    }

    /// Fail at the current token, expecting `what`.
    pub(super) fn fail<T>(&mut self, what: &'static str) -> PResult<T> {
        self.expected(what);
        Err(Fail)
    }

    /// Fail `k` bytes (ASCII characters) into the current token.
    pub(super) fn fail_inside<T>(
        &mut self,
        k: usize,
        what: &'static str,
        message: Option<String>,
    ) -> PResult<T> {
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

    pub(super) fn is_word(&mut self, kw: &'static str, label: &'static str) -> bool {
        if self.word_at(self.pos, kw) {
            true
        } else {
            self.expected(label);
            false
        }
    }

    pub(super) fn eat_word(&mut self, kw: &'static str, label: &'static str) -> bool {
        let ok = self.is_word(kw, label);
        if ok {
            self.bump();
        }
        ok
    }

    pub(super) fn expect_word(&mut self, kw: &'static str, label: &'static str) -> PResult<()> {
        if self.eat_word(kw, label) {
            Ok(())
        } else {
            Err(Fail)
        }
    }

    pub(super) fn eat_punct(&mut self, p: &'static str, label: &'static str) -> bool {
        if self.punct_at(self.pos, p) {
            self.bump();
            true
        } else {
            self.expected(label);
            false
        }
    }

    pub(super) fn expect_punct(&mut self, p: &'static str, label: &'static str) -> PResult<()> {
        if self.eat_punct(p, label) {
            Ok(())
        } else {
            Err(Fail)
        }
    }
}
