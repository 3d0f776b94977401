//! The `.stm` lexer: source text -> tokens with byte ranges and 1-based line/column
//! positions.
//!
//! The token classes are harel's grammar terminals: `NAME`, `DOTTED`
//! (`a.b[.c..]`), `STRING` (Lark's `ESCAPED_STRING`), numbers and punctuation.
//! Keywords are plain names: the parser decides from context whether `from` is a
//! keyword or a state called `from`, as harel's Earley parser does. A sign is its
//! own token; the parser glues a `-`/`+` to an adjacent number where a value is
//! expected (`SIGNED_NUMBER`) and reads it as an operator after an operand
//! (`context.n - 1`). Whitespace (`[ \t\f\r\n]`) and `#` / `//` comments are skipped.
//!
//! Lexing never fails: a character no terminal can start with becomes a
//! [`TokKind::Bad`] token, which the parser reports (with what it expected) only
//! when it reaches it — so an earlier syntax error is reported first.
//!
//! [`TokKind`] and [`Token`] are public (through [`crate::dsl::tokens`]) so that
//! tools reading `.stm` text, such as the language server, see the same tokens the
//! parser does instead of a second reading of the grammar.

/// A token class.
///
/// More classes may be added; a tool should treat an unknown one like
/// [`TokKind::Bad`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokKind {
    /// `[A-Za-z_][A-Za-z0-9_]*` (keywords included).
    Name,
    /// Two or more names joined by `.` (no spaces).
    Dotted,
    /// A double-quoted string, raw (quotes and escapes included).
    Str,
    /// An unsigned number: `12`, `1.5`, `1.`, `.5`, `1e3`, `2.5E-3`.
    Num,
    /// Punctuation or an operator: `{ } ( ) [ ] , : | ? = == != < <= > >= + - * /`.
    Punct,
    /// A string with no closing quote on its line: from its opening quote to the end
    /// of the line (the `\n` excluded).
    Unterminated,
    /// A character no token starts with (one whole character, possibly multi-byte).
    Bad,
    /// The end of the input: an empty token at `src.len()`, always the last one.
    Eof,
}

/// A token: its class and where it is.
///
/// `start..end` is a byte range of the source, always on character boundaries;
/// `line` and `col` locate `start` (1-based; `col` counts characters, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Token {
    pub kind: TokKind,
    /// Byte offset of the token's first character.
    pub start: usize,
    /// Byte offset just past the token.
    pub end: usize,
    /// 1-based line of `start`.
    pub line: usize,
    /// 1-based character column of `start`.
    pub col: usize,
}

impl Token {
    /// The token's text in `src`, the source it was read from (a different string
    /// may panic or give nonsense).
    pub fn text<'s>(&self, src: &'s str) -> &'s str {
        &src[self.start..self.end]
    }

    /// The token's byte range in its source.
    pub fn span(&self) -> std::ops::Range<usize> {
        self.start..self.end
    }
}

const PUNCT2: [&str; 4] = ["==", "!=", "<=", ">="];
const PUNCT1: &[u8] = b"{}()[],:|?=<>+-*/";

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Tokenize `src`. The last token is always [`TokKind::Eof`].
pub(crate) fn lex(src: &str) -> Vec<Token> {
    let bytes = src.as_bytes();
    let mut toks = Vec::with_capacity(src.len() / 4 + 1);
    let mut i = 0;
    let mut line = 1;
    // byte offset of the first character of the current line; columns count characters
    let mut line_start = 0;
    // the last column computed (byte offset, column), to count characters incrementally
    let mut last = (0usize, 1usize);
    let mut col_of = |line_start: usize, at: usize| -> usize {
        let (from, base) = if last.0 >= line_start && last.0 <= at {
            last
        } else {
            (line_start, 1)
        };
        let seg = &bytes[from..at];
        let col = base
            + if seg.is_ascii() {
                seg.len()
            } else {
                src[from..at].chars().count()
            };
        last = (at, col);
        col
    };
    while i < bytes.len() {
        let b = bytes[i];
        // whitespace (Lark's common.WS) and comments
        if matches!(b, b' ' | b'\t' | b'\x0c' | b'\r' | b'\n') {
            if b == b'\n' {
                line += 1;
                line_start = i + 1;
            }
            i += 1;
            continue;
        }
        if b == b'#' || (b == b'/' && bytes.get(i + 1) == Some(&b'/')) {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let start = i;
        let kind = if is_name_start(b) {
            i = scan_name(bytes, i);
            let mut kind = TokKind::Name;
            // DOTTED: `.name` segments glued on
            while i + 1 < bytes.len() && bytes[i] == b'.' && is_name_start(bytes[i + 1]) {
                i = scan_name(bytes, i + 1);
                kind = TokKind::Dotted;
            }
            kind
        } else if b.is_ascii_digit() || (b == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            i = scan_number(bytes, i);
            TokKind::Num
        } else if b == b'"' {
            match scan_string(bytes, i) {
                Some(end) => {
                    i = end;
                    TokKind::Str
                }
                None => {
                    // up to the end of the line, for the message
                    i += 1;
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                    TokKind::Unterminated
                }
            }
        } else if src.get(i..i + 2).is_some_and(|two| PUNCT2.contains(&two)) {
            // `get`: the two bytes may cut a multi-byte character, which is no punctuation
            i += 2;
            TokKind::Punct
        } else if PUNCT1.contains(&b) {
            i += 1;
            TokKind::Punct
        } else {
            // one (possibly multi-byte) character
            i += src[i..].chars().next().map_or(1, char::len_utf8);
            TokKind::Bad
        };
        toks.push(Token {
            kind,
            start,
            end: i,
            line,
            col: col_of(line_start, start),
        });
    }
    // where the input ends (used for end-of-input errors)
    toks.push(Token {
        kind: TokKind::Eof,
        start: src.len(),
        end: src.len(),
        line,
        col: col_of(line_start, src.len()),
    });
    toks
}

fn scan_name(bytes: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < bytes.len() && is_name_char(bytes[i]) {
        i += 1;
    }
    i
}

fn scan_digits(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// `_EXP` (`[eE][+-]?digits`) at `i`: its end, if there is one.
fn scan_exp(bytes: &[u8], i: usize) -> Option<usize> {
    if !matches!(bytes.get(i), Some(b'e' | b'E')) {
        return None;
    }
    let mut j = i + 1;
    if matches!(bytes.get(j), Some(b'+' | b'-')) {
        j += 1;
    }
    let end = scan_digits(bytes, j);
    (end > j).then_some(end)
}

/// Lark's `NUMBER` (`FLOAT | INT`, tried in that order as its regex does):
/// `INT _EXP | DECIMAL _EXP?`, else `INT`; `DECIMAL` is `INT "." INT? | "." INT`.
fn scan_number(bytes: &[u8], i: usize) -> usize {
    let int_end = scan_digits(bytes, i);
    if int_end > i {
        if let Some(e) = scan_exp(bytes, int_end) {
            return e;
        }
        if bytes.get(int_end) == Some(&b'.') {
            let frac_end = scan_digits(bytes, int_end + 1);
            return scan_exp(bytes, frac_end).unwrap_or(frac_end);
        }
        return int_end;
    }
    // ".5"
    let frac_end = scan_digits(bytes, i + 1);
    scan_exp(bytes, frac_end).unwrap_or(frac_end)
}

/// `ESCAPED_STRING` at `i` (a `"`): the end (after the closing quote), or `None` if
/// the string does not close on its line. A backslash escapes the next character.
fn scan_string(bytes: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return Some(i + 1),
            b'\n' => return None,
            b'\\' => {
                if matches!(bytes.get(i + 1), None | Some(b'\n')) {
                    return None;
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
    None
}

/// Decode a string token (quotes included) as harel does (`unicode_escape`): the
/// Python escapes `\\ \' \" \a \b \f \n \r \t \v \ooo \xhh \uhhhh \Uhhhhhhhh`; any
/// other backslash is kept as is (`"\d"` is the two characters `\d`). On failure:
/// the byte offset of the bad escape within the token and what is wrong.
pub(crate) fn decode_string(raw: &str) -> Result<String, (usize, String)> {
    let inner = &raw[1..raw.len() - 1];
    if !inner.contains('\\') {
        return Ok(inner.to_string());
    }
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.char_indices().peekable();
    let mut pending_high: Option<(usize, u32)> = None;
    while let Some((at, c)) = chars.next() {
        if c != '\\' {
            if let Some((hat, _)) = pending_high.take() {
                return Err((hat + 1, "a lone surrogate in a `\\u` escape".into()));
            }
            out.push(c);
            continue;
        }
        let Some((_, e)) = chars.next() else {
            out.push('\\');
            break;
        };
        let simple = match e {
            '\\' => Some('\\'),
            '\'' => Some('\''),
            '"' => Some('"'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'f' => Some('\x0c'),
            'n' => Some('\n'),
            'r' => Some('\r'),
            't' => Some('\t'),
            'v' => Some('\x0b'),
            _ => None,
        };
        if let Some(s) = simple {
            if let Some((hat, _)) = pending_high.take() {
                return Err((hat + 1, "a lone surrogate in a `\\u` escape".into()));
            }
            out.push(s);
            continue;
        }
        let code = match e {
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek() {
                        Some(&(_, d)) if d.is_digit(8) => {
                            v = v * 8 + d.to_digit(8).unwrap_or(0);
                            chars.next();
                        }
                        _ => break,
                    }
                }
                v
            }
            'x' | 'u' | 'U' => {
                let n = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut v: u32 = 0;
                for _ in 0..n {
                    match chars.peek() {
                        Some(&(_, d)) if d.is_ascii_hexdigit() => {
                            v = v * 16 + d.to_digit(16).unwrap_or(0);
                            chars.next();
                        }
                        _ => {
                            let what = match e {
                                'x' => "truncated `\\xXX` escape",
                                'u' => "truncated `\\uXXXX` escape",
                                _ => "truncated `\\UXXXXXXXX` escape",
                            };
                            return Err((at + 1, what.into()));
                        }
                    }
                }
                v
            }
            'N' => {
                // `\N{NAME}`: the name runs to the next `}`, whatever it holds (as in
                // CPython), and resolves as Python 3.11 resolves it
                let bad = |why: String| Err((at + 1, why));
                if chars.peek().map(|&(_, c)| c) != Some('{') {
                    return bad("malformed `\\N` escape: `\\N` must be followed by `{NAME}`".into());
                }
                let name_at = at + 3;
                let Some(len) = inner[name_at..].find('}') else {
                    return bad("unterminated `\\N{...}` escape: no closing `}`".into());
                };
                let name = &inner[name_at..name_at + len];
                if name.is_empty() {
                    return bad("empty `\\N{}` escape: a character name is missing".into());
                }
                let Some(ch) = super::unicode_names::lookup(name) else {
                    let shown = match name.char_indices().nth(60) {
                        Some((cut, _)) => format!("{}...", &name[..cut]),
                        None => name.to_string(),
                    };
                    return bad(format!(
                        "unknown Unicode character name `{shown}` in `\\N{{...}}` (a name or \
                         alias of Unicode 14.0, spelled exactly)"
                    ));
                };
                while chars.next().is_some_and(|(i, _)| i < name_at + len) {}
                u32::from(ch)
            }
            other => {
                if let Some((hat, _)) = pending_high.take() {
                    return Err((hat + 1, "a lone surrogate in a `\\u` escape".into()));
                }
                out.push('\\');
                out.push(other);
                continue;
            }
        };
        // surrogate pairs (`\ud83d\ude00`) combine into one character
        if (0xD800..0xDC00).contains(&code) {
            if let Some((hat, _)) = pending_high.replace((at, code)) {
                return Err((hat + 1, "a lone surrogate in a `\\u` escape".into()));
            }
            continue;
        }
        let code = if (0xDC00..0xE000).contains(&code) {
            match pending_high.take() {
                Some((_, high)) => 0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00),
                None => return Err((at + 1, "a lone surrogate in a `\\u` escape".into())),
            }
        } else {
            if let Some((hat, _)) = pending_high.take() {
                return Err((hat + 1, "a lone surrogate in a `\\u` escape".into()));
            }
            code
        };
        match char::from_u32(code) {
            Some(ch) => out.push(ch),
            None => return Err((at + 1, "illegal Unicode character in an escape".into())),
        }
    }
    if let Some((hat, _)) = pending_high {
        return Err((hat + 1, "a lone surrogate in a `\\u` escape".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(TokKind, String)> {
        lex(src)
            .into_iter()
            .map(|t| (t.kind, t.text(src).to_string()))
            .collect()
    }

    fn k(kind: TokKind, s: &str) -> (TokKind, String) {
        (kind, s.to_string())
    }

    use TokKind::*;

    #[test]
    fn names_dotted_and_keywords() {
        assert_eq!(
            kinds("from a.b to c_1 pkg.mod.fn"),
            vec![
                k(Name, "from"),
                k(Dotted, "a.b"),
                k(Name, "to"),
                k(Name, "c_1"),
                k(Dotted, "pkg.mod.fn"),
                k(Eof, "")
            ]
        );
        // a trailing dot or a digit after the dot is not part of a DOTTED
        assert_eq!(
            kinds("a. b"),
            vec![k(Name, "a"), k(Bad, "."), k(Name, "b"), k(Eof, "")]
        );
        assert_eq!(kinds("a.5"), vec![k(Name, "a"), k(Num, ".5"), k(Eof, "")]);
        assert_eq!(kinds("1abc"), vec![k(Num, "1"), k(Name, "abc"), k(Eof, "")]);
    }

    #[test]
    fn numbers_follow_larks_number_regex() {
        for (src, want) in [
            ("12", "12"),
            ("1.5", "1.5"),
            ("1.", "1."),
            (".5", ".5"),
            ("1e3", "1e3"),
            ("1E+3", "1E+3"),
            ("2.5e-3", "2.5e-3"),
            ("1.e5", "1.e5"),
            ("007", "007"),
        ] {
            assert_eq!(kinds(src), vec![k(Num, want), k(Eof, "")], "{src}");
        }
        // `1e` is INT then a NAME; `1.2.3` is `1.2` then `.3`
        assert_eq!(kinds("1e"), vec![k(Num, "1"), k(Name, "e"), k(Eof, "")]);
        assert_eq!(kinds("1.2.3"), vec![k(Num, "1.2"), k(Num, ".3"), k(Eof, "")]);
        // signs are separate tokens (the parser glues adjacent ones)
        assert_eq!(
            kinds("-1 +2.5"),
            vec![
                k(Punct, "-"),
                k(Num, "1"),
                k(Punct, "+"),
                k(Num, "2.5"),
                k(Eof, "")
            ]
        );
    }

    #[test]
    fn punctuation_and_operators() {
        assert_eq!(
            kinds("a==b!=c<=d>=e<f>g=h|i?{}()[],:+-*/"),
            vec![
                k(Name, "a"),
                k(Punct, "=="),
                k(Name, "b"),
                k(Punct, "!="),
                k(Name, "c"),
                k(Punct, "<="),
                k(Name, "d"),
                k(Punct, ">="),
                k(Name, "e"),
                k(Punct, "<"),
                k(Name, "f"),
                k(Punct, ">"),
                k(Name, "g"),
                k(Punct, "="),
                k(Name, "h"),
                k(Punct, "|"),
                k(Name, "i"),
                k(Punct, "?"),
                k(Punct, "{"),
                k(Punct, "}"),
                k(Punct, "("),
                k(Punct, ")"),
                k(Punct, "["),
                k(Punct, "]"),
                k(Punct, ","),
                k(Punct, ":"),
                k(Punct, "+"),
                k(Punct, "-"),
                k(Punct, "*"),
                k(Punct, "/"),
                k(Eof, ""),
            ]
        );
        assert_eq!(kinds("->"), vec![k(Punct, "-"), k(Punct, ">"), k(Eof, "")]);
        assert_eq!(kinds("!"), vec![k(Bad, "!"), k(Eof, "")]);
    }

    #[test]
    fn comments_and_whitespace() {
        assert_eq!(
            kinds("a # comment \"x\n// another\nb // tail\n\tc\x0c\r\n"),
            vec![k(Name, "a"), k(Name, "b"), k(Name, "c"), k(Eof, "")]
        );
        // a `#` or `//` inside a string is not a comment
        assert_eq!(kinds("\"a#b//c\""), vec![k(Str, "\"a#b//c\""), k(Eof, "")]);
        // a single `/` is the division operator
        assert_eq!(
            kinds("a / b"),
            vec![k(Name, "a"), k(Punct, "/"), k(Name, "b"), k(Eof, "")]
        );
        // vertical tab is not whitespace in the grammar
        assert_eq!(kinds("\x0b"), vec![k(Bad, "\x0b"), k(Eof, "")]);
    }

    #[test]
    fn positions_are_1_based_character_columns() {
        let src = "machine M {\n  é x\n\t\"s\"\n}";
        let toks = lex(src);
        let pos: Vec<(usize, usize)> = toks.iter().map(|t| (t.line, t.col)).collect();
        // `é` is one (bad) character: `x` is at column 5
        assert_eq!(
            pos,
            vec![(1, 1), (1, 9), (1, 11), (2, 3), (2, 5), (3, 2), (4, 1), (4, 2)]
        );
        assert_eq!(toks[3].kind, Bad);
    }

    #[test]
    fn strings() {
        assert_eq!(
            kinds(r#""a\"b" "c\\""#),
            vec![k(Str, r#""a\"b""#), k(Str, r#""c\\""#), k(Eof, "")]
        );
        assert_eq!(
            kinds("\"abc\nd\""),
            vec![
                k(Unterminated, "\"abc"),
                k(Name, "d"),
                k(Unterminated, "\""),
                k(Eof, "")
            ]
        );
        assert_eq!(kinds(r#""a\"#), vec![k(Unterminated, r#""a\"#), k(Eof, "")]);
    }

    #[test]
    fn string_escapes_are_pythons_unicode_escape() {
        let d = |s: &str| decode_string(s);
        assert_eq!(d(r#""plain""#), Ok("plain".into()));
        assert_eq!(d(r#""a\tb\n\"q\" \\ \'""#), Ok("a\tb\n\"q\" \\ '".into()));
        assert_eq!(d(r#""\u00e9\x41\101\0""#), Ok("éAA\0".into()));
        // unknown escapes keep their backslash, `\/` included (unlike JSON)
        assert_eq!(d(r#""\q\/\d""#), Ok("\\q\\/\\d".into()));
        assert_eq!(d(r#""\ud83d\ude00""#), Ok("😀".into()));
        assert_eq!(d(r#""\U0001F600""#), Ok("😀".into()));
        assert_eq!(d("\"é\""), Ok("é".into()));
        assert!(d(r#""\x4""#).is_err());
        assert!(d(r#""\ud83d""#).is_err());
        assert_eq!(d(r#""\N{BULLET} x""#), Ok("\u{2022} x".into()));
        assert_eq!(d(r#""ab\x4""#).map_err(|e| e.0), Err(3));
    }

    #[test]
    fn named_escapes_are_pythons() {
        let d = |s: &str| decode_string(s);
        assert_eq!(
            d(r#""\N{bullet}\N{LF}\N{BYTE ORDER MARK}""#),
            Ok("\u{2022}\n\u{feff}".into())
        );
        assert_eq!(
            d(r#""a\N{HANGUL SYLLABLE GA}\N{CJK UNIFIED IDEOGRAPH-4E00}b""#),
            Ok("a\u{ac00}\u{4e00}b".into())
        );
        // the name stops at the first `}`; what follows is plain text
        assert_eq!(d(r#""\N{BULLET}}\N{NUL}{""#), Ok("\u{2022}}\0{".into()));
        // a high surrogate must still be followed by a low one
        assert!(d(r#""\ud83d\N{BULLET}""#).is_err());
        let err = |s: &str| d(s).expect_err(s);
        for (src, at, what) in [
            (r#""\N""#, 1, "malformed"),
            (r#""\Nx""#, 1, "malformed"),
            (r#""ab\N {BULLET}""#, 3, "malformed"),
            (r#""\N{}""#, 1, "empty"),
            (r#""\N{abc""#, 1, "unterminated"),
            (
                r#""\N{BULLET \N{BULLET}""#,
                1,
                "unknown Unicode character name `BULLET \\N{BULLET`",
            ),
            (r#""x\N{BULLET }""#, 2, "unknown"),
            (r#""\N{LATIN_SMALL_LETTER_A}""#, 1, "unknown"),
            (
                r#""\N{X}""#,
                1,
                "name `X` in `\\N{...}` (a name or alias of Unicode 14.0, spelled exactly)",
            ),
            (r#""\N{hangul syllable ga}""#, 1, "unknown"),
            (r#""\N{KEYCAP NUMBER SIGN}""#, 1, "unknown"),
        ] {
            let (k, why) = err(src);
            assert_eq!(k, at, "{src}: {why}");
            assert!(why.contains(what), "{src}: {why}");
        }
        let long = format!("\"\\N{{{}}}\"", "A".repeat(500));
        assert!(err(&long).1.len() < 200);
    }
}
