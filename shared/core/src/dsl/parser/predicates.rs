//! Conditions: `or`, `and`, `not`, parentheses, comparisons and named guards.

use super::{At, Operand, PResult, Parser, Pred, DECL_WORDS, ITEM_WORDS, OPERATOR, REF};
use crate::dsl::lexer::TokKind;

impl Parser<'_> {
    pub(super) fn predicate(&mut self) -> PResult<Pred> {
        let first = self.and_expr()?;
        if !self.is_word("or", "`or`") {
            return Ok(first);
        }
        let mut all = vec![first];
        while self.eat_word("or", "`or`") {
            all.push(self.and_expr()?);
        }
        Ok(Pred::Any(all))
    }

    fn and_expr(&mut self) -> PResult<Pred> {
        let first = self.not_expr()?;
        if !self.is_word("and", "`and`") {
            return Ok(first);
        }
        let mut all = vec![first];
        while self.eat_word("and", "`and`") {
            all.push(self.not_expr()?);
        }
        Ok(Pred::All(all))
    }

    fn is_op(&self, i: usize) -> bool {
        let t = self.tok(i);
        match t.kind {
            TokKind::Punct => matches!(t.text(self.src), "==" | "!=" | "<" | "<=" | ">" | ">="),
            TokKind::Name => t.text(self.src) == "in",
            _ => false,
        }
    }

    fn not_expr(&mut self) -> PResult<Pred> {
        if self.word_at(self.pos, "not") && !self.is_op(self.pos + 1) && self.negation_follows() {
            self.bump();
            self.enter()?;
            let inner = self.not_expr();
            self.depth -= 1;
            return Ok(Pred::Not(Box::new(inner?)));
        }
        self.atom()
    }

    /// At `not`: whether it negates what follows, rather than being a guard named
    /// `not` followed by whatever ends the condition (`when not to S`, `not and x`).
    fn negation_follows(&self) -> bool {
        let next = self.tok(self.pos + 1);
        match next.kind {
            TokKind::Str | TokKind::Dotted => true,
            TokKind::Punct => next.text(self.src) == "(",
            TokKind::Name => {
                // `not x == 1`; `not ok` unless `ok` is a word that ends the condition and
                // the token after it cannot follow a guard
                self.is_op(self.pos + 2)
                    || !self.ends_condition(self.pos + 1)
                    || self.ends_condition(self.pos + 2)
            }
            _ => false,
        }
    }

    /// Whether token `i` can follow a whole condition.
    fn ends_condition(&self, i: usize) -> bool {
        let t = self.tok(i);
        match t.kind {
            TokKind::Eof => true,
            TokKind::Punct => matches!(t.text(self.src), ")" | "{" | "}"),
            TokKind::Name => {
                let w = t.text(self.src);
                matches!(w, "and" | "or" | "to" | "set") || ITEM_WORDS.contains(&w) || DECL_WORDS.contains(&w)
            }
            _ => false,
        }
    }

    fn atom(&mut self) -> PResult<Pred> {
        let t = *self.peek();
        let at = At {
            line: t.line,
            col: t.col,
        };
        let lhs = match t.kind {
            TokKind::Punct if t.text(self.src) == "(" => {
                self.bump();
                self.enter()?;
                let p = self.predicate();
                self.depth -= 1;
                let p = p?;
                self.expect_punct(")", "`)`")?;
                return Ok(p);
            }
            TokKind::Name => {
                if !self.is_op(self.pos + 1) {
                    // a named guard
                    self.bump();
                    self.expected(OPERATOR);
                    return Ok(Pred::Guard(t.text(self.src).to_string()));
                }
                self.bump();
                Operand::Field(t.text(self.src).to_string())
            }
            TokKind::Str => Operand::Field(self.string(REF)?),
            TokKind::Dotted => {
                self.bump();
                Operand::Dotted(t.text(self.src).to_string())
            }
            _ => return self.fail("a condition (`field == value`, a guard name, `not ...` or `(...)`)"),
        };
        if !self.is_op(self.pos) {
            return self.fail(OPERATOR);
        }
        let op = self.text(self.pos).to_string();
        self.bump();
        let rhs = if self.peek().kind == TokKind::Dotted {
            let s = self.text(self.pos).to_string();
            self.bump();
            Operand::Dotted(s)
        } else {
            Operand::Lit(self.value("a value or an `event.x` / `context.x` reference")?)
        };
        Ok(Pred::Cmp { lhs, op, rhs, at })
    }
}
