//! The items of a `{ ... }` block, with the block's backtracking over the prefixes
//! that read two ways, the nesting bound, and actions with their inputs.

use super::{
    Action, Arg, At, ContextField, Fail, Found, InputVal, Item, PResult, Parser, TimeoutSpec, ITEM,
    MAX_NESTING, NAME, REF, VALUE,
};
use crate::dsl::lexer::TokKind;

impl<'s> Parser<'s> {
    /// `item* "}"` (the `{` already consumed).
    pub(super) fn block_items(&mut self) -> PResult<Vec<Item>> {
        self.enter()?;
        let r = self.block_items_inner();
        self.depth -= 1;
        r
    }

    /// The items of a block, backtracking over the ambiguous prefixes: each one is a
    /// choice point whose preferred reading is kept if the rest of the block parses,
    /// else the other reading is tried. An item position from which the rest of the
    /// block has failed under every reading is remembered, so nothing is parsed twice
    /// in vain (linear in the worst case).
    fn block_items_inner(&mut self) -> PResult<Vec<Item>> {
        struct ChoicePoint {
            start: usize,
            len: usize,
            second: bool,
            /// item positions reached after this choice point (in its current reading)
            run: Vec<usize>,
        }
        let first = self.pos;
        let mut out = Vec::new();
        let mut choices: Vec<ChoicePoint> = Vec::new();
        let mut retry = false;
        loop {
            // forward: items up to the `}`, or a failure
            loop {
                if self.eat_punct("}", "`}`") {
                    return Ok(out);
                }
                let start = self.pos;
                if self.failed_blocks.contains(&start) {
                    break;
                }
                let reading = if retry {
                    retry = false;
                    1
                } else if self.item_is_ambiguous() {
                    choices.push(ChoicePoint {
                        start,
                        len: out.len(),
                        second: false,
                        run: Vec::new(),
                    });
                    0
                } else {
                    if let Some(c) = choices.last_mut() {
                        c.run.push(start);
                    }
                    0
                };
                match self.item(reading) {
                    Ok(item) => out.push(item),
                    Err(Fail) => break,
                }
            }
            // backtrack to the latest choice point with a reading left
            loop {
                let Some(mut c) = choices.pop() else {
                    self.failed_blocks.insert(first);
                    return Err(Fail);
                };
                self.failed_blocks.extend(c.run.drain(..));
                if c.second {
                    self.failed_blocks.insert(c.start);
                    continue;
                }
                c.second = true;
                self.pos = c.start;
                out.truncate(c.len);
                choices.push(c);
                retry = true;
                break;
            }
        }
    }

    /// One nesting level deeper (a block, a parenthesis, a list, a `not`); a hostile
    /// input nested beyond [`MAX_NESTING`] fails instead of exhausting the stack.
    pub(super) fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            self.depth -= 1;
            let t = *self.peek();
            self.note(t.start, t.line, t.col, Found::Tok(self.pos), "less nesting");
            if let Some(far) = self.far.as_mut() {
                if far.offset == t.start {
                    far.message = Some(format!("nesting is too deep (more than {MAX_NESTING} levels)"));
                }
            }
            return Err(Fail);
        }
        Ok(())
    }

    /// Whether the item here starts with one of the prefixes that read two ways.
    fn item_is_ambiguous(&self) -> bool {
        let p = self.pos;
        let is_ref = |i: usize| matches!(self.kind_at(i), TokKind::Name | TokKind::Str);
        if self.word_at(p, "from") {
            // from REF to REF on (enter|exit|activity)
            return is_ref(p + 1)
                && self.word_at(p + 2, "to")
                && is_ref(p + 3)
                && self.word_at(p + 4, "on")
                && ["enter", "exit", "activity"]
                    .iter()
                    .any(|w| self.word_at(p + 5, w));
        }
        if self.word_at(p, "invoke") {
            return self.kind_at(p + 1) == TokKind::Name;
        }
        if self.word_at(p, "timeout") {
            return self.word_at(p + 1, "context")
                && matches!(
                    self.kind_at(p + 2),
                    TokKind::Name | TokKind::Str | TokKind::Dotted
                );
        }
        false
    }

    /// One item; `alt` selects the reading of an ambiguous prefix (0: harel's
    /// preference, 1: the other one). Each kind of item is its own function, so the
    /// stack frames on the path of nested blocks stay small (also in debug builds).
    fn item(&mut self, alt: u8) -> PResult<Item> {
        let at = self.at();
        let word = if self.peek().kind == TokKind::Name {
            self.text(self.pos)
        } else {
            ""
        };
        let known = matches!(
            word,
            "initial"
                | "on"
                | "timeout"
                | "ttl"
                | "context"
                | "outcome"
                | "carry"
                | "defer"
                | "no"
                | "cancel_on_failure"
                | "invoke"
                | "with"
                | "use"
                | "state"
                | "orthogonal"
                | "final"
                | "from"
        );
        if !known {
            return self.fail(ITEM);
        }
        self.bump();
        match word {
            "initial" => Ok(Item::Initial(self.ref_("the initial state's name")?)),
            "on" => self.item_hook(),
            "timeout" => self.item_timeout(alt),
            "ttl" => {
                let (n, at) = self.int("a number of seconds")?;
                Ok(Item::Ttl(n, at))
            }
            "context" => self.item_context(),
            "outcome" => Ok(Item::Outcome(self.ref_("the outcome label")?)),
            "carry" => Ok(Item::Carry(self.ref_list()?)),
            "defer" => Ok(Item::Defer(self.ref_list()?)),
            "no" => {
                self.expect_word("history", "`history`")?;
                Ok(Item::NoHistory)
            }
            "cancel_on_failure" => Ok(Item::CancelOnFailure),
            "invoke" => self.item_invoke(alt),
            "with" => self.item_with(),
            "use" => self.item_use(at),
            "state" | "orthogonal" => self.item_state(word == "orthogonal", at),
            "final" => self.item_final(at),
            _ => self.transition(at, alt),
        }
    }

    fn item_hook(&mut self) -> PResult<Item> {
        let hook = self.one_of_words(&["enter", "exit", "activity"], "`enter`, `exit` or `activity`")?;
        let action = self.action()?;
        Ok(match hook.as_str() {
            "enter" => Item::OnEnter(action),
            "exit" => Item::OnExit(action),
            _ => Item::OnActivity(action),
        })
    }

    fn item_timeout(&mut self, alt: u8) -> PResult<Item> {
        let t = *self.peek();
        let spec = match t.kind {
            TokKind::Num => TimeoutSpec::Literal(self.int("a number of seconds")?.0),
            TokKind::Name
                if t.text(self.src) == "context"
                    && alt == 0
                    && matches!(
                        self.kind_at(self.pos + 1),
                        TokKind::Name | TokKind::Str | TokKind::Dotted
                    ) =>
            {
                self.bump();
                TimeoutSpec::Context(self.ref_("the context key holding the seconds")?)
            }
            // a value parameter (a `DOTTED` fails at its dot, where a `NAME` ends)
            TokKind::Name | TokKind::Dotted => TimeoutSpec::Param(self.name(NAME)?),
            _ => return self.fail("a number of seconds, `context <key>` or a value parameter"),
        };
        Ok(Item::Timeout(spec))
    }

    fn item_context(&mut self) -> PResult<Item> {
        self.expect_punct("{", "`{`")?;
        let mut fields = Vec::new();
        while !self.eat_punct("}", "`}`") {
            let at = self.at();
            let name = self.ref_("a field name")?;
            self.expect_punct(":", "`:`")?;
            let ty = self.field_type()?;
            let optional = self.eat_punct("?", "`?`");
            let default = if self.eat_punct("=", "`=`") {
                Some(self.value(VALUE)?)
            } else {
                None
            };
            fields.push(ContextField {
                name,
                ty,
                optional,
                default,
                at,
            });
        }
        Ok(Item::Context(fields))
    }

    /// `ref ("," ref)*`
    fn ref_list(&mut self) -> PResult<Vec<String>> {
        let mut names = vec![self.ref_(REF)?];
        while self.eat_punct(",", "`,`") {
            names.push(self.ref_(REF)?);
        }
        Ok(names)
    }

    fn item_invoke(&mut self, alt: u8) -> PResult<Item> {
        let fqn = match self.peek().kind {
            TokKind::Dotted => Some(self.path(NAME)?.text),
            TokKind::Name if alt == 0 => Some(self.path(NAME)?.text),
            _ => {
                self.expected("the machine to invoke");
                None
            }
        };
        let each = if self.eat_word("for", "`for`") {
            let var = self.ref_("the loop variable")?;
            self.expect_word("in", "`in`")?;
            let coll = self.ref_("the context list to fan out over")?;
            Some((var, coll))
        } else {
            None
        };
        let inline = if self.punct_at(self.pos, "{") {
            let at = self.at();
            self.bump();
            Some((self.block_items()?, at))
        } else {
            self.expected("`{`");
            None
        };
        Ok(Item::Invoke { fqn, each, inline })
    }

    fn item_with(&mut self) -> PResult<Item> {
        self.expect_punct("{", "`{`")?;
        let mut pairs = Vec::new();
        loop {
            let child = self.ref_("a child context key")?;
            self.expect_punct(":", "`:`")?;
            let parent = self.ref_("a parent context key")?;
            pairs.push((child, parent));
            if self.eat_punct("}", "`}`") {
                return Ok(Item::InvokeWith(pairs));
            }
        }
    }

    fn item_use(&mut self, at: At) -> PResult<Item> {
        let name = self.path("the fragment's name")?.text;
        let mut args = Vec::new();
        if self.eat_punct("(", "`(`") && !self.eat_punct(")", "`)`") {
            loop {
                let aname = self.name("a parameter name")?;
                self.expect_punct("=", "`=`")?;
                args.push((aname, self.arg_value()?));
                if self.eat_punct(",", "`,`") {
                    continue;
                }
                self.expect_punct(")", "`)`")?;
                break;
            }
        }
        let alias = if self.eat_word("as", "`as`") {
            Some(self.ref_("the state's name")?)
        } else {
            None
        };
        Ok(Item::Use {
            name,
            args,
            alias,
            at,
        })
    }

    fn item_state(&mut self, orthogonal: bool, at: At) -> PResult<Item> {
        let name = self.ref_("the state's name")?;
        self.expect_punct("{", "`{`")?;
        let items = self.block_items()?;
        Ok(Item::State {
            orthogonal,
            name,
            items,
            at,
        })
    }

    fn item_final(&mut self, at: At) -> PResult<Item> {
        let name = self.ref_("the state's name")?;
        let outcome = self.ref_("the outcome label (`final Done success`)")?;
        let items = if self.eat_punct("{", "`{`") {
            self.block_items()?
        } else {
            Vec::new()
        };
        Ok(Item::Final {
            name,
            outcome,
            items,
            at,
        })
    }

    fn arg_value(&mut self) -> PResult<Arg> {
        let t = *self.peek();
        match t.kind {
            // a bare word (even `true`/`false`, as harel's parser reads it)
            TokKind::Name => {
                self.bump();
                Ok(Arg::Name(t.text(self.src).to_string()))
            }
            TokKind::Dotted => {
                self.bump();
                Ok(Arg::Dotted(t.text(self.src).to_string()))
            }
            TokKind::Punct if t.text(self.src) == "(" => {
                self.bump();
                let pred = self.predicate()?;
                self.expect_punct(")", "`)`")?;
                Ok(Arg::Pred(pred))
            }
            _ => Ok(Arg::Lit(
                self.value("a name, a `pkg.fn` path, a value or a `(condition)`")?,
            )),
        }
    }

    /// `action: action_ref ("(" [input ("," input)*] ")")?`
    pub(super) fn action(&mut self) -> PResult<Action> {
        let target = self.path("an action (a bound handler name or a `pkg.module.fn` path)")?;
        let mut inputs = Vec::new();
        if self.eat_punct("(", "`(`") && !self.eat_punct(")", "`)`") {
            loop {
                let key = self.ref_("an input name")?;
                self.expect_punct(":", "`:`")?;
                let val = if self.starts_value(self.pos) {
                    InputVal::Lit(self.value(VALUE)?)
                } else if matches!(self.peek().kind, TokKind::Name | TokKind::Dotted) {
                    // a value parameter (a `DOTTED` fails at its dot, as a `NAME` ends there)
                    InputVal::Param(self.name("a value or a value parameter")?)
                } else {
                    InputVal::Lit(self.value("a value or a value parameter")?)
                };
                inputs.push((key, val));
                if self.eat_punct(",", "`,`") {
                    continue;
                }
                self.expect_punct(")", "`)`")?;
                break;
            }
        }
        Ok(Action { target, inputs })
    }
}
