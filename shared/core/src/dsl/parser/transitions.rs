//! Transitions (`from ... to`, `choose`, `select`, `join`), their triggers and their
//! `set` clauses.

use super::{Assignment, At, Fail, Item, NamesAt, Operand, PResult, Parser, Trigger, VALUE};
use crate::dsl::lexer::TokKind;

impl Parser<'_> {
    pub(super) fn transition(&mut self, at: At, alt: u8) -> PResult<Item> {
        let from_at = self.at();
        let from = self.ref_("the source state")?;
        let word = if self.peek().kind == TokKind::Name {
            self.text(self.pos)
        } else {
            ""
        };
        match word {
            "to" => {
                self.bump();
                let to_at = self.at();
                let to = self.ref_("the target state")?;
                // alt 0 of an ambiguous `on enter|exit|activity`: the `on` starts a hook item
                let trigger = if alt == 0 && self.word_at(self.pos, "on") && self.item_hook_follows() {
                    None
                } else {
                    self.trigger()?
                };
                let set = self.assign_clause()?;
                Ok(Item::Transition {
                    from,
                    to,
                    trigger,
                    set,
                    at,
                    names_at: NamesAt {
                        from: from_at,
                        targets: vec![to_at],
                    },
                })
            }
            "choose" => {
                self.bump();
                let trigger = self.trigger()?;
                let set = self.assign_clause()?;
                self.expect_punct("{", "`{`")?;
                let mut branches = Vec::new();
                let mut targets = Vec::new();
                loop {
                    if !self.eat_word("when", "`when`") {
                        if branches.is_empty() {
                            return Err(Fail);
                        }
                        break;
                    }
                    let pred = self.predicate()?;
                    self.expect_word("to", "`to`")?;
                    targets.push(self.at());
                    let to = self.ref_("the target state")?;
                    let set = self.assign_clause()?;
                    branches.push((pred, to, set));
                }
                let default = if self.eat_word("else", "`else`") {
                    self.expect_word("to", "`to`")?;
                    targets.push(self.at());
                    let to = self.ref_("the target state")?;
                    Some((to, self.assign_clause()?))
                } else {
                    None
                };
                self.expect_punct("}", "`}`")?;
                Ok(Item::Choice {
                    from,
                    trigger,
                    set,
                    branches,
                    default,
                    at,
                    names_at: NamesAt {
                        from: from_at,
                        targets,
                    },
                })
            }
            "select" => {
                self.bump();
                let action = self.action()?;
                let returns = if self.eat_word("returns", "`returns`") {
                    self.expect_punct("{", "`{`")?;
                    let mut values = vec![self.value(VALUE)?];
                    while self.eat_punct(",", "`,`") {
                        values.push(self.value(VALUE)?);
                    }
                    self.expect_punct("}", "`}`")?;
                    Some(values)
                } else {
                    None
                };
                let trigger = self.trigger()?;
                self.expect_punct("{", "`{`")?;
                let mut branches = Vec::new();
                loop {
                    if !self.starts_value(self.pos) {
                        self.expected("a result value (`\"ok\" to S`)");
                        if branches.is_empty() {
                            return Err(Fail);
                        }
                        break;
                    }
                    let v = self.value(VALUE)?;
                    self.expect_word("to", "`to`")?;
                    branches.push((v, self.ref_("the target state")?));
                }
                let default = if self.eat_word("else", "`else`") {
                    self.expect_word("to", "`to`")?;
                    Some(self.ref_("the target state")?)
                } else {
                    None
                };
                self.expect_punct("}", "`}`")?;
                Ok(Item::Select {
                    from_at,
                    from,
                    action,
                    returns,
                    trigger,
                    branches,
                    default,
                    at,
                })
            }
            "join" => {
                self.bump();
                let mode = self.one_of_words(&["all", "any"], "`all` or `any`")?;
                self.expect_word("to", "`to`")?;
                let success = self.ref_("the target state")?;
                self.expect_word("else", "`else`")?;
                self.expect_word("to", "`to`")?;
                let otherwise = self.ref_("the target state")?;
                Ok(Item::Join {
                    from_at,
                    from,
                    all: mode == "all",
                    success,
                    otherwise,
                    at,
                })
            }
            _ => self.fail("`to`, `choose`, `select` or `join`"),
        }
    }

    /// At `on`: whether `on enter|exit|activity` follows (the hook reading).
    fn item_hook_follows(&self) -> bool {
        ["enter", "exit", "activity"]
            .iter()
            .any(|w| self.word_at(self.pos + 1, w))
    }

    /// `trigger: "on" kinds ("where" predicate)?` (optional).
    fn trigger(&mut self) -> PResult<Option<Trigger>> {
        if !self.eat_word("on", "`on`") {
            return Ok(None);
        }
        let mut kinds_at = vec![self.at()];
        let mut kinds = vec![self.ref_("an event name")?];
        while self.eat_punct("|", "`|`") {
            kinds_at.push(self.at());
            kinds.push(self.ref_("an event name")?);
        }
        let pred = if self.eat_word("where", "`where`") {
            Some(self.predicate()?)
        } else {
            None
        };
        Ok(Some(Trigger {
            kinds,
            kinds_at,
            pred,
        }))
    }

    /// `assign_clause: "set" assignment ("," assignment)*` (optional).
    fn assign_clause(&mut self) -> PResult<Option<Vec<Assignment>>> {
        if !self.eat_word("set", "`set`") {
            return Ok(None);
        }
        let mut out = Vec::new();
        loop {
            let at = self.at();
            if self.peek().kind != TokKind::Dotted {
                return self.fail("a `context.<field>` to set");
            }
            let target = self.text(self.pos).to_string();
            self.bump();
            self.expect_punct("=", "`=`")?;
            let left = self.operand()?;
            let arith = match self.peek().kind {
                TokKind::Punct if matches!(self.text(self.pos), "+" | "-" | "*" | "/") => {
                    let op = self.text(self.pos).chars().next().unwrap_or('+');
                    self.bump();
                    let (right, rat) = self.operand()?;
                    Some((op, right, rat))
                }
                _ => {
                    self.expected("an arithmetic operator (`+`, `-`, `*`, `/`)");
                    None
                }
            };
            out.push(Assignment {
                target,
                at,
                left,
                arith,
            });
            if !self.eat_punct(",", "`,`") {
                return Ok(Some(out));
            }
        }
    }

    /// `operand: DOTTED | value`.
    fn operand(&mut self) -> PResult<(Operand, At)> {
        let at = self.at();
        if self.peek().kind == TokKind::Dotted {
            let s = self.text(self.pos).to_string();
            self.bump();
            return Ok((Operand::Dotted(s), at));
        }
        Ok((
            Operand::Lit(self.value("a value or an `event.x` / `context.x` reference")?),
            at,
        ))
    }
}
