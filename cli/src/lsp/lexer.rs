//! The language server's tokens: the core's lexer ([`stm_core::dsl::tokens`]), the
//! parser's own reading of the grammar, with each token's LSP range.
//!
//! The core never fails on any input, so a document in mid-edit still has tokens and
//! an index: a string with no closing quote is read to the end of its line, and a
//! character no token starts with is a one-character punctuation token here (never a
//! name, so the index passes over it). Columns count UTF-16 code units, LSP's default
//! position encoding.

use lsp_types::{Position, Range};
use stm_core::dsl::{self, TokKind};

/// What a [`Token`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// A name or a dotted path (`Charging`, `harel.lib.retry`).
    Ident,
    /// A string literal, closed or not; [`Token::text`] is its inner text, escapes
    /// left as written.
    Str,
    /// An unsigned number (a sign is its own punctuation token).
    Number,
    /// Punctuation and operators (`{`, `|`, `==`, ...), and any character the grammar
    /// has no token for.
    Punct,
}

/// One token of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: TokenKind,
    /// The token's text; a string's without its quotes.
    pub text: String,
    /// The whole token, quotes included.
    pub range: Range,
    /// The name the token spells: a string's inside of its quotes, else the whole token.
    pub name_range: Range,
    /// Byte offsets of the token in the document.
    pub start: usize,
    pub end: usize,
}

impl Token {
    /// Whether this is the keyword or punctuation `text` (a string never is).
    pub fn is(&self, text: &str) -> bool {
        self.kind != TokenKind::Str && self.text == text
    }

    /// Whether the token can name something (`ref` in the grammar: a name or a string).
    pub fn is_ref(&self) -> bool {
        matches!(self.kind, TokenKind::Ident | TokenKind::Str)
    }
}

/// Every token of `text`, in order.
pub(crate) fn tokenize(text: &str) -> Vec<Token> {
    let mut walker = Utf16Walker::new(text);
    dsl::tokens(text)
        .into_iter()
        .filter_map(|token| {
            let kind = match token.kind {
                TokKind::Name | TokKind::Dotted => TokenKind::Ident,
                TokKind::Str | TokKind::Unterminated => TokenKind::Str,
                TokKind::Num => TokenKind::Number,
                TokKind::Eof => return None,
                // `Punct`, `Bad`, and any class the core adds later: never a name
                _ => TokenKind::Punct,
            };
            let start = walker.position(token.start);
            let end = walker.position(token.end);
            let raw = token.text(text);
            let (token_text, name_range) = if kind == TokenKind::Str {
                // a string never spans lines, and its quotes are one unit each
                let closed = token.kind == TokKind::Str;
                let inner = if closed { &raw[1..raw.len() - 1] } else { &raw[1..] };
                let inner_end = if closed {
                    Position::new(end.line, end.character - 1)
                } else {
                    end
                };
                (
                    inner.to_string(),
                    Range::new(Position::new(start.line, start.character + 1), inner_end),
                )
            } else {
                (raw.to_string(), Range::new(start, end))
            };
            Some(Token {
                kind,
                text: token_text,
                range: Range::new(start, end),
                name_range,
                start: token.start,
                end: token.end,
            })
        })
        .collect()
}

/// Converts increasing byte offsets of a text into LSP positions in one pass.
struct Utf16Walker<'a> {
    text: &'a str,
    offset: usize,
    at: Position,
}

impl<'a> Utf16Walker<'a> {
    fn new(text: &'a str) -> Self {
        Utf16Walker {
            text,
            offset: 0,
            at: Position::new(0, 0),
        }
    }

    /// The position of byte `offset`, a character boundary no earlier than the last one
    /// asked for.
    fn position(&mut self, offset: usize) -> Position {
        for c in self.text[self.offset..offset].chars() {
            if c == '\n' {
                self.at = Position::new(self.at.line + 1, 0);
            } else {
                self.at.character += c.len_utf16() as u32;
            }
        }
        self.offset = offset;
        self.at
    }
}

/// Whether `position` is inside `range` or touches either end of it (a cursor right
/// after a word is on that word).
pub(crate) fn touches(range: &Range, position: Position) -> bool {
    range.start <= position && position <= range.end
}

/// The byte offset of an LSP `position` in `text` (clamped to the text).
pub(crate) fn offset_of(text: &str, position: Position) -> usize {
    let mut line = 0u32;
    let mut line_start = 0;
    if position.line > 0 {
        for (i, c) in text.char_indices() {
            if c == '\n' {
                line += 1;
                if line == position.line {
                    line_start = i + 1;
                    break;
                }
            }
        }
        if line < position.line {
            return text.len();
        }
    }
    let mut units = 0u32;
    for (i, c) in text[line_start..].char_indices() {
        if units >= position.character || c == '\n' {
            return line_start + i;
        }
        units += c.len_utf16() as u32;
    }
    text.len()
}

/// The LSP position of a 1-based line and character column (the core's positions).
pub(crate) fn position_of(text: &str, line: usize, column: usize) -> Position {
    let line_text = text.split('\n').nth(line.saturating_sub(1)).unwrap_or("");
    let character: usize = line_text
        .chars()
        .take(column.saturating_sub(1))
        .map(char::len_utf16)
        .sum();
    Position::new(line.saturating_sub(1) as u32, character as u32)
}

/// The position at the end of line `line` (0-based) of `text`.
pub(crate) fn line_end(text: &str, line: u32) -> Position {
    let line_text = text.split('\n').nth(line as usize).unwrap_or("");
    let line_text = line_text.strip_suffix('\r').unwrap_or(line_text);
    Position::new(line, line_text.chars().map(char::len_utf16).sum::<usize>() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(src: &str) -> Vec<String> {
        tokenize(src).into_iter().map(|t| t.text).collect()
    }

    fn kinds(src: &str) -> Vec<(TokenKind, String)> {
        tokenize(src).into_iter().map(|t| (t.kind, t.text)).collect()
    }

    fn range(line: u32, from: u32, to: u32) -> Range {
        Range::new(Position::new(line, from), Position::new(line, to))
    }

    #[test]
    fn reads_names_paths_strings_operators_and_skips_comments() {
        assert_eq!(
            texts("from A to \"Place Order\" on E where n >= 2 # note\n  on enter a.b.c // x"),
            [
                "from",
                "A",
                "to",
                "Place Order",
                "on",
                "E",
                "where",
                "n",
                ">=",
                "2",
                "on",
                "enter",
                "a.b.c"
            ]
        );
    }

    #[test]
    fn ranges_count_utf16_units_and_strings_name_their_inside() {
        let tokens = tokenize("state \"é😀\" {}");
        let name = &tokens[1];
        assert_eq!(name.range, range(0, 6, 11));
        assert_eq!(name.name_range, range(0, 7, 10));
        assert_eq!(tokens[2].range.start, Position::new(0, 12));
    }

    #[test]
    fn columns_after_non_ascii_text_count_utf16_units() {
        // a comment, a string and a stray character, each with a character outside
        // the BMP (two UTF-16 units) or a two-byte one (one unit)
        let src = "# ü😀\nfrom \"é😀\" to B😀 on Go\n  on X";
        let tokens = tokenize(src);
        let found: Vec<(&str, Range)> = tokens.iter().map(|t| (t.text.as_str(), t.range)).collect();
        assert_eq!(
            found,
            [
                ("from", range(1, 0, 4)),
                ("é😀", range(1, 5, 10)),
                ("to", range(1, 11, 13)),
                ("B", range(1, 14, 15)),
                ("😀", range(1, 15, 17)),
                ("on", range(1, 18, 20)),
                ("Go", range(1, 21, 23)),
                ("on", range(2, 2, 4)),
                ("X", range(2, 5, 6)),
            ]
        );
        assert_eq!(tokens[4].kind, TokenKind::Punct);
        // byte offsets are the document's
        assert_eq!(&src[tokens[1].start..tokens[1].end], "\"é😀\"");
    }

    #[test]
    fn an_unterminated_string_ends_at_its_line() {
        assert_eq!(kinds("event \"Oops\nstate B"), {
            use TokenKind::*;
            [
                (Ident, "event".to_string()),
                (Str, "Oops".to_string()),
                (Ident, "state".to_string()),
                (Ident, "B".to_string()),
            ]
        });
        let tokens = tokenize("from A to \"Place Or\nstate B {");
        assert_eq!(tokens[3].range, range(0, 10, 19));
        assert_eq!(tokens[3].name_range, range(0, 11, 19));
        // an escaped quote does not close it
        let tokens = tokenize("to \"a\\\"");
        assert_eq!(
            (tokens[1].kind, tokens[1].text.as_str()),
            (TokenKind::Str, "a\\\"")
        );
        assert_eq!(tokens[1].name_range, range(0, 4, 7));
    }

    #[test]
    fn a_dotted_path_is_one_token() {
        let tokens = tokenize("from a.b.c to x.y");
        assert_eq!(
            (tokens[1].kind, tokens[1].text.as_str()),
            (TokenKind::Ident, "a.b.c")
        );
        assert_eq!(tokens[1].range, range(0, 5, 10));
        assert_eq!(tokens[3].text, "x.y");
        // a dot with no name after it is not part of the path
        assert_eq!(texts("to a. b"), ["to", "a", ".", "b"]);
    }

    #[test]
    fn numbers_and_signs_read_as_the_parser_reads_them() {
        use TokenKind::*;
        assert_eq!(
            kinds("n > -1 2.5e-3 1abc"),
            [
                (Ident, "n".to_string()),
                (Punct, ">".to_string()),
                (Punct, "-".to_string()),
                (Number, "1".to_string()),
                (Number, "2.5e-3".to_string()),
                (Number, "1".to_string()),
                (Ident, "abc".to_string()),
            ]
        );
    }

    #[test]
    fn every_prefix_of_a_document_in_mid_edit_has_consistent_tokens() {
        let doc = "machine M {\n  state \"é 😀\" { on enter a.b }\r\n  from A to B on X where n >= -1.5 \
                   and \"\\\"q\" # ü\n  !\u{a0}\u{b}? \"x\\";
        for (cut, _) in doc.char_indices().chain([(doc.len(), ' ')]) {
            let text = &doc[..cut];
            let mut last_end = 0;
            for token in tokenize(text) {
                assert!(
                    last_end <= token.start && token.start < token.end,
                    "{text:?}: {token:?}"
                );
                last_end = token.end;
                assert_eq!(
                    offset_of(text, token.range.start),
                    token.start,
                    "{text:?}: {token:?}"
                );
                assert_eq!(offset_of(text, token.range.end), token.end, "{text:?}: {token:?}");
                assert!(token.range.start <= token.name_range.start);
                assert!(token.name_range.start <= token.name_range.end);
                assert!(token.name_range.end <= token.range.end);
            }
        }
    }

    #[test]
    fn offsets_and_positions_convert() {
        let text = "ab\ncdé\nf";
        assert_eq!(offset_of(text, Position::new(1, 2)), 5);
        assert_eq!(offset_of(text, Position::new(9, 0)), text.len());
        assert_eq!(position_of(text, 2, 4), Position::new(1, 3));
        assert_eq!(line_end(text, 1), Position::new(1, 3));
    }
}
