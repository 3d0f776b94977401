//! The `.stm` language front end: lexer, parser, loader (imports, bindings, guards,
//! fragments) and builder into a [`Definition`](crate::Definition).
//!
//! (Being written: see the module docs once filled.)
