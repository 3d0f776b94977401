//! A forgiving tokenizer for the editor: every token with its LSP range.
//!
//! The core's lexer (`stm_core::dsl`) never fails either and knows each token's byte
//! range, but it is private to the core: no public API hands its tokens out. Until one
//! does, the language server reads the text again its own way, with the same terminals:
//! identifiers (dotted paths as one token), strings, numbers and punctuation, comments
//! skipped, and anything it does not know as a one-character punctuation token. It never
//! fails, so a document in mid-edit still has an index. Columns count UTF-16 code units,
//! LSP's default position encoding.

use lsp_types::{Position, Range};

/// What a [`Token`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// A name or a dotted path (`Charging`, `harel.lib.retry`).
    Ident,
    /// A string literal; [`Token::text`] is its inner text, escapes left as written.
    Str,
    Number,
    /// Punctuation and operators (`{`, `|`, `==`, ...).
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

const TWO_CHAR_OPERATORS: [&str; 4] = ["==", "!=", "<=", ">="];

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every token of `text`, in order.
pub(crate) fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut tokens = Vec::new();
    let (mut line, mut column) = (0u32, 0u32);
    let mut i = 0;
    // the position of chars[i], advanced as characters are consumed
    let advance = |c: char, line: &mut u32, column: &mut u32| {
        if c == '\n' {
            *line += 1;
            *column = 0;
        } else {
            *column += c.len_utf16() as u32;
        }
    };
    while i < chars.len() {
        let (offset, c) = chars[i];
        if c.is_whitespace() {
            advance(c, &mut line, &mut column);
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).map(|&(_, n)| n);
        if c == '#' || (c == '/' && next == Some('/')) {
            while i < chars.len() && chars[i].1 != '\n' {
                advance(chars[i].1, &mut line, &mut column);
                i += 1;
            }
            continue;
        }
        let start = Position::new(line, column);
        let first = i;
        let kind = if is_ident_start(c) {
            while i < chars.len() {
                let ch = chars[i].1;
                let dotted_segment =
                    ch == '.' && chars.get(i + 1).is_some_and(|&(_, n)| is_ident_start(n)) && i > first;
                if !(is_ident_char(ch) || dotted_segment) {
                    break;
                }
                advance(ch, &mut line, &mut column);
                i += 1;
            }
            TokenKind::Ident
        } else if c == '"' {
            advance(c, &mut line, &mut column);
            i += 1;
            while i < chars.len() {
                let ch = chars[i].1;
                if ch == '\n' {
                    break; // an unterminated string ends at its line
                }
                advance(ch, &mut line, &mut column);
                i += 1;
                if ch == '\\' {
                    if let Some(&(_, escaped)) = chars.get(i) {
                        if escaped != '\n' {
                            advance(escaped, &mut line, &mut column);
                            i += 1;
                        }
                    }
                } else if ch == '"' {
                    break;
                }
            }
            TokenKind::Str
        } else if c.is_ascii_digit() || (c == '-' && next.is_some_and(|n| n.is_ascii_digit())) {
            advance(c, &mut line, &mut column);
            i += 1;
            while i < chars.len() && (chars[i].1.is_ascii_alphanumeric() || chars[i].1 == '.') {
                advance(chars[i].1, &mut line, &mut column);
                i += 1;
            }
            TokenKind::Number
        } else {
            let pair: String = [Some(c), next].iter().flatten().collect();
            let width = if TWO_CHAR_OPERATORS.contains(&pair.as_str()) {
                2
            } else {
                1
            };
            for _ in 0..width {
                advance(chars[i].1, &mut line, &mut column);
                i += 1;
            }
            TokenKind::Punct
        };
        let end_offset = chars.get(i).map_or(text.len(), |&(o, _)| o);
        let end = Position::new(line, column);
        let raw = &text[offset..end_offset];
        let (token_text, name_range) = if kind == TokenKind::Str {
            let closed = raw.len() >= 2 && raw.ends_with('"');
            let inner = if closed { &raw[1..raw.len() - 1] } else { &raw[1..] };
            let inner_end = if closed {
                Position::new(end.line, end.character.saturating_sub(1))
            } else {
                end
            };
            (
                inner.to_string(),
                Range::new(Position::new(line, start.character + 1), inner_end),
            )
        } else {
            (raw.to_string(), Range::new(start, end))
        };
        tokens.push(Token {
            kind,
            text: token_text,
            range: Range::new(start, end),
            name_range,
            start: offset,
            end: end_offset,
        });
    }
    tokens
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
        assert_eq!(name.range, Range::new(Position::new(0, 6), Position::new(0, 11)));
        assert_eq!(
            name.name_range,
            Range::new(Position::new(0, 7), Position::new(0, 10))
        );
        assert_eq!(tokens[2].range.start, Position::new(0, 12));
    }

    #[test]
    fn an_unterminated_string_ends_at_its_line() {
        assert_eq!(texts("event \"Oops\nstate B"), ["event", "Oops", "state", "B"]);
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
