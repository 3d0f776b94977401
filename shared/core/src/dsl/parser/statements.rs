//! A program and its top-level statements: `import`, `bind`, `guard`, `event`,
//! `machine` and `fragment`.

use super::{PResult, Parser, Stmt, DECL, NAME, PARAM_KINDS, TYPES};
use crate::dsl::lexer::TokKind;

impl<'s> Parser<'s> {
    pub(super) fn program(&mut self) -> PResult<Vec<Stmt>> {
        let mut out = Vec::new();
        loop {
            if self.peek().kind == TokKind::Eof && !out.is_empty() {
                return Ok(out);
            }
            out.push(self.stmt()?);
        }
    }

    fn stmt(&mut self) -> PResult<Stmt> {
        let at = self.at();
        let word = if self.peek().kind == TokKind::Name {
            self.text(self.pos)
        } else {
            ""
        };
        match word {
            "import" => {
                self.bump();
                let path = self.string("the imported file's path (a string)")?;
                let alias = if self.eat_word("as", "`as`") {
                    Some(self.name(NAME)?)
                } else {
                    None
                };
                Ok(Stmt::Import { path, alias, at })
            }
            "bind" => {
                self.bump();
                self.expect_punct("{", "`{`")?;
                let mut bindings = Vec::new();
                loop {
                    let name = self.name("a handler name")?;
                    self.expect_punct("=", "`=`")?;
                    let target = self.path("the function the handler runs (`pkg.module.fn`)")?;
                    bindings.push((name, target.text));
                    if self.eat_punct("}", "`}`") {
                        return Ok(Stmt::Bind(bindings));
                    }
                }
            }
            "guard" => {
                self.bump();
                let name = self.name("the guard's name")?;
                self.expect_punct("=", "`=`")?;
                let pred = self.predicate()?;
                Ok(Stmt::Guard { name, pred, at })
            }
            "event" => {
                self.bump();
                let name = self.ref_("the event's name")?;
                self.expect_punct("{", "`{`")?;
                let mut fields = Vec::new();
                while !self.eat_punct("}", "`}`") {
                    let fname = self.ref_("a field name")?;
                    self.expect_punct(":", "`:`")?;
                    let ty = self.field_type()?;
                    let optional = self.eat_punct("?", "`?`");
                    fields.push((fname, ty, optional));
                }
                Ok(Stmt::Event { name, fields, at })
            }
            "machine" => {
                self.bump();
                let name = self.ref_("the machine's name")?;
                self.expect_punct("{", "`{`")?;
                let items = self.block_items()?;
                Ok(Stmt::Machine { name, items, at })
            }
            "fragment" => {
                self.bump();
                let name = self.ref_("the fragment's name")?;
                let mut params = Vec::new();
                if self.eat_punct("(", "`(`") {
                    loop {
                        let pname = self.name("a parameter name")?;
                        self.expect_punct(":", "`:`")?;
                        let kind = self.one_of_words(
                            &PARAM_KINDS,
                            "a parameter kind (`action`, `state`, `guard`, `value` or `event`)",
                        )?;
                        params.push((pname, kind));
                        if self.eat_punct(",", "`,`") {
                            continue;
                        }
                        self.expect_punct(")", "`)`")?;
                        break;
                    }
                }
                self.expect_punct("{", "`{`")?;
                let items = self.block_items()?;
                Ok(Stmt::Fragment {
                    name,
                    params,
                    items,
                    at,
                })
            }
            _ => self.fail(DECL),
        }
    }

    pub(super) fn one_of_words(&mut self, words: &[&str], label: &'static str) -> PResult<String> {
        if self.peek().kind == TokKind::Name {
            let w = self.text(self.pos);
            if words.contains(&w) {
                self.bump();
                return Ok(w.to_string());
            }
        }
        self.fail(label)
    }

    pub(super) fn field_type(&mut self) -> PResult<String> {
        self.one_of_words(&TYPES, "a type (`string`, `int`, `float`, `bool` or `any`)")
    }
}
