//! The grammar's terminals: names, strings, paths, integers and values (lists
//! included).

use super::{At, Lit, PResult, Parser, Path, VALUE};
use crate::dsl::lexer::{decode_string, TokKind};

impl<'s> Parser<'s> {
    /// `NAME` (any word, keywords included). A `DOTTED` here fails at its first dot,
    /// where the `NAME` it starts with ends (as the grammar's lexer sees it).
    pub(super) fn name(&mut self, label: &'static str) -> PResult<String> {
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
    pub(super) fn string(&mut self, label: &'static str) -> PResult<String> {
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
    pub(super) fn ref_(&mut self, label: &'static str) -> PResult<String> {
        if self.peek().kind == TokKind::Str {
            self.string(label)
        } else {
            self.name(label)
        }
    }

    /// `NAME | DOTTED`.
    pub(super) fn path(&mut self, label: &'static str) -> PResult<Path> {
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
    pub(super) fn int(&mut self, label: &'static str) -> PResult<(String, At)> {
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
    pub(super) fn value(&mut self, label: &'static str) -> PResult<Lit> {
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

    pub(super) fn starts_value(&self, i: usize) -> bool {
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
}
