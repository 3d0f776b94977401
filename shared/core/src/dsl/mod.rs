//! The `.stm` language front end: lexer, parser, loader (imports, bindings, guards,
//! fragments) and builder into a [`Definition`].
//!
//! The language is harel 0.9.0's DSL (`harel/dsl/grammar.lark`) and a file builds
//! into the same definition harel's `definition_from_dsl_file` builds:
//!
//! ```text
//! text --lexer--> tokens --parser--> syntax tree --program--> Program (config per machine)
//!      --loader--> imports merged, fragments expanded, handlers/guards bound
//!      --builder--> Definition (nodes, resolved transitions, inline submachines)
//! ```
//!
//! * [`tokens`] is the lexer's reading of a text, for tools (an editor's) that need
//!   the grammar's tokens without a parse, and [`KEYWORDS`] its fixed words (what an
//!   editor completes);
//! * [`parse`] reads one file without resolving imports (what `stm list` prints);
//! * [`load_definition_file`] / [`load_definition_str`] run the whole pipeline for one
//!   machine, [`load_all_file`] for every machine of a file.
//!
//! Every failure is a [`DslError`] located (file, line, column, source line) where
//! harel locates it.
//!
//! String escapes are Python's `unicode_escape`, `\N{NAME}` included (Unicode 14.0's
//! names and aliases, as Python 3.11 has them: `unicode_names.rs`).
//!
//! Deliberate differences from harel, all on input harel mishandles:
//! * a keyword must be a whole word: harel's scannerless lexer also reads `fromA to B`
//!   as `from A to B` and `x == 1 ordinal == 2` as `... or dinal == 2`;
//! * a string keeps its non-ASCII characters (harel decodes the UTF-8 bytes as
//!   Latin-1), and an escaped surrogate pair is one character (Python keeps two lone
//!   surrogates, which no durable path of harel's can carry);
//! * an import cycle is an error (harel silently stops at the repeated file);
//! * a fragment using itself and a guard referring to itself are errors (harel
//!   recurses until Python's stack overflows);
//! * `use F(flag = true)` passes the boolean to a `value` parameter (harel reads the
//!   bare word as a parameter name and reports it unbound);
//! * a `timeout` whose value parameter is not a number is refused when loading;
//! * an integer literal beyond 64 bits is refused.

// `DslError` is returned by value (the public API); it is built only on the cold error
// path, and the parser's hot path fails with a zero-sized marker instead.
#![allow(clippy::result_large_err)]

mod ast;
mod builder;
mod error;
mod lexer;
mod loader;
mod parser;
mod program;
mod unicode_names;

use std::path::Path;

pub use error::DslError;
pub(crate) use error::{source_line, write_diagnostic, Position};
pub use lexer::{TokKind, Token};
pub use parser::KEYWORDS;
pub use program::{Import, Program};

use crate::Definition;

/// Every token of `source`, in order, as the parser reads them: names, dotted paths,
/// strings, numbers and punctuation with their byte ranges; whitespace and comments
/// are skipped. The last token is always a [`TokKind::Eof`] at `source.len()`.
///
/// This never fails, so a document in mid-edit still has tokens: a string with no
/// closing quote on its line is one [`TokKind::Unterminated`] token up to the line's
/// end, and a character no token starts with is one [`TokKind::Bad`] token.
///
/// ```
/// use stm_core::dsl::{tokens, TokKind};
///
/// let src = "from A to b.C on \"Go\" # done";
/// let read: Vec<(TokKind, &str)> = tokens(src).iter().map(|t| (t.kind, t.text(src))).collect();
/// assert_eq!(
///     read,
///     [
///         (TokKind::Name, "from"),
///         (TokKind::Name, "A"),
///         (TokKind::Name, "to"),
///         (TokKind::Dotted, "b.C"),
///         (TokKind::Name, "on"),
///         (TokKind::Str, "\"Go\""),
///         (TokKind::Eof, ""),
///     ]
/// );
/// // byte ranges, and 1-based line and character columns
/// let quoted = tokens("é \"x").remove(1);
/// assert_eq!((quoted.kind, quoted.span(), quoted.col), (TokKind::Unterminated, 3..5, 3));
/// ```
pub fn tokens(source: &str) -> Vec<Token> {
    lexer::lex(source)
}

/// Parse one `.stm` text (no import resolution): the names it declares. Syntax and
/// structural errors are reported as [`DslError`]s without a file name.
pub fn parse(text: &str) -> Result<Program, DslError> {
    program::build_program(text, 0)
}

/// Load the machine `name` of the file at `path` (the file's only machine when
/// `None`; more than one is then an error naming them). Imports resolve relative to
/// the file; the machines of imported files are registered as submachines.
pub fn load_definition_file(path: &Path, name: Option<&str>) -> Result<Definition, DslError> {
    let mut loader = loader::Loader::new();
    let file = loader.add_file(path)?;
    loader.definition(file, name, true)
}

/// Like [`load_definition_file`], from `text`; `origin` is the file the text came
/// from (imports resolve next to it, errors name it), else imports resolve against
/// the working directory.
pub fn load_definition_str(
    text: &str,
    name: Option<&str>,
    origin: Option<&Path>,
) -> Result<Definition, DslError> {
    let mut loader = loader::Loader::new();
    let file = loader.add_text(text, origin);
    loader.definition(file, name, true)
}

/// Every machine of the file at `path`, in declaration order (none for a file that
/// only declares fragments, events or guards).
pub fn load_all_file(path: &Path) -> Result<Vec<Definition>, DslError> {
    let mut loader = loader::Loader::new();
    let file = loader.add_file(path)?;
    loader.all_definitions(file)
}
