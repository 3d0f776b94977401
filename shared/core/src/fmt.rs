//! The `.stm` formatter (`stm fmt`): harel 0.9.0's reindenter, byte for byte.
//!
//! Each line is reindented by bracket depth (2 spaces per level; a line that starts with
//! closing brackets dedents itself), trailing whitespace is trimmed, runs of blank lines
//! become one, and leading and trailing blank lines go. Everything else is kept as it is:
//! comments, the author's line structure, the content of each line. So formatting never
//! changes the parsed program, and formatting twice changes nothing more.
//!
//! Python's rules, where they differ from Rust's: a line ends at any of `str.splitlines`'
//! boundaries (`\v`, `\f`, `\x1c`-`\x1e`, `\x85`, `\u2028`, `\u2029` besides `\n` and
//! `\r`), and whitespace is `str.isspace`'s (Unicode's, plus `\x1c`-`\x1f`).
//!
//! ```
//! let messy = "\n\nmachine M {\ninitial A   \n      state A {}\n\n\n\n}\n\n";
//! assert_eq!(stm_core::fmt::format_text(messy), "machine M {\n  initial A\n  state A {}\n\n}\n");
//! ```

const INDENT: &str = "  ";

/// Python's `str.isspace` for one character.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.splitlines()`: the lines without their endings.
fn split_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\r' => {
                if let Some(&(_, '\n')) = chars.peek() {
                    chars.next();
                    i + 2
                } else {
                    i + 1
                }
            }
            '\n' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => i + c.len_utf8(),
            _ => continue,
        };
        lines.push(&text[start..i]);
        start = end;
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// One stripped line's brackets, outside strings and before a `#` or `//` comment:
/// (opens, closes, the closes before anything else on the line).
fn scan(line: &str) -> (usize, usize, usize) {
    let (mut opens, mut closes, mut leading) = (0, 0, 0);
    let mut seen_other = false;
    let mut in_string = false;
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            match c {
                '\\' => i += 2,
                '"' => {
                    in_string = false;
                    i += 1;
                }
                _ => i += 1,
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                seen_other = true;
            }
            '#' => break,
            '/' if chars.get(i + 1) == Some(&'/') => break,
            '{' | '[' | '(' => {
                opens += 1;
                seen_other = true;
            }
            '}' | ']' | ')' => {
                closes += 1;
                if !seen_other {
                    leading += 1;
                }
            }
            c if !is_space(c) => seen_other = true,
            _ => {}
        }
        i += 1;
    }
    (opens, closes, leading)
}

/// `text` formatted as harel's `format_text` formats it.
pub fn format_text(text: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut level = 0usize;
    let mut pending_blank = false;
    for raw in split_lines(text) {
        let stripped = raw.trim_matches(is_space);
        if stripped.is_empty() {
            pending_blank = !out.is_empty();
            continue;
        }
        if pending_blank {
            out.push(String::new());
            pending_blank = false;
        }
        let (opens, closes, leading) = scan(stripped);
        let indent = level.saturating_sub(leading);
        out.push(format!("{}{stripped}", INDENT.repeat(indent)));
        level = (level + opens).saturating_sub(closes);
    }
    if out.is_empty() {
        return String::new();
    }
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// A file's text as Python's `Path.read_text` gives it: `\r\n` and a lone `\r` read as
/// `\n` (universal newlines), so a file that differs only in its line endings is
/// already formatted.
pub fn universal_newlines(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}
