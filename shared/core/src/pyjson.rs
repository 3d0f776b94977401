//! JSON as harel reads and writes it, on every path.
//!
//! harel reads JSON with Python's `json.loads` (the CLI's `-e` and `--seed`, a spawn's
//! context, a trace entry, a remote action's answer) or with pydantic's
//! `model_validate_json` (an execution's `data`, an SQS body, an outbox event). Both
//! accept what strict JSON refuses and serde_json's parser refuses with it: `NaN`,
//! `Infinity`, `-Infinity`, a float too large (`1e400` is `inf`) and ints of any size.
//! [`loads`] reads all of them, keeping an int's digits (see [`crate::pynum`] for how a
//! non-finite float is held).
//!
//! It writes JSON two ways, as harel does:
//! - [`dumps`]: Python's `json.dumps` with its defaults (spawn contexts, trace entries,
//!   the CLI's output), byte for byte: `Infinity` and `NaN` as such;
//! - [`to_pydantic_json`]: pydantic's `model_dump_json` (execution data, SQS bodies):
//!   compact, UTF-8 as is, and a non-finite float as `null`, as pydantic writes it.
//!
//! One difference is deliberate: a lone surrogate (`"\ud800"`) is refused. Python's
//! `json.loads` keeps it, but harel cannot carry one through any durable path either:
//! pydantic's parser refuses it in an SQS body or a stored item, and pydantic's writer
//! fails the commit of an execution that holds one ("surrogates not allowed"). Rust
//! strings hold Unicode scalar values only, so we refuse it where it comes in, with the
//! reason, rather than fail later.

use std::io;

use serde::Serialize;
use serde_json::ser::{Formatter, PrettyFormatter};
use serde_json::Number;

use crate::pynum::{self, is_float_text, parse_float};
use crate::pyvalue::float_repr;
use crate::{Map, Value};

/// How deep arrays and objects may nest: deeper than any statechart's data, shallow
/// enough that reading, comparing and dropping a value never exhausts a thread's stack.
pub const MAX_DEPTH: usize = 512;

/// Python refuses to read an int of more digits than this (`sys.get_int_max_str_digits`).
pub const MAX_INT_DIGITS: usize = 4300;

/// Why a text is not JSON harel would read: what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at line {line} column {column}")]
#[non_exhaustive]
pub struct JsonError {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

/// Python's `json.loads(text)` (and pydantic's reading of the same text).
///
/// ```
/// use stm_core::pyjson;
/// let v = pyjson::loads(r#"{"n": 100000000000000000001, "x": Infinity}"#).unwrap();
/// assert_eq!(pyjson::dumps(&v), r#"{"n": 100000000000000000001, "x": Infinity}"#);
/// assert_eq!(pyjson::to_pydantic_json(&v), r#"{"n":100000000000000000001,"x":null}"#);
/// assert!(pyjson::loads(r#""\ud800""#).is_err());
/// ```
pub fn loads(text: &str) -> Result<Value, JsonError> {
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        depth: 0,
    };
    p.skip_ws();
    let value = p.value()?;
    p.skip_ws();
    if p.pos < p.bytes.len() {
        return Err(p.error("extra data after the JSON value"));
    }
    Ok(value)
}

/// [`loads`], then the object it must be (`what` names it in the error).
pub fn loads_object(text: &str, what: &str) -> Result<Map, JsonError> {
    match loads(text)? {
        Value::Object(map) => Ok(map),
        other => Err(JsonError {
            message: format!(
                "{what} must be a JSON object, not {}",
                crate::pyvalue::type_name(&other)
            ),
            line: 1,
            column: 1,
        }),
    }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> JsonError {
        let before = &self.bytes[..self.pos.min(self.bytes.len())];
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let column = 1 + String::from_utf8_lossy(&before[line_start..]).chars().count();
        JsonError {
            message: message.into(),
            line,
            column,
        }
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, literal: &str) -> bool {
        if self.bytes[self.pos..].starts_with(literal.as_bytes()) {
            self.pos += literal.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Result<Value, JsonError> {
        match self.bytes.get(self.pos) {
            None => Err(self.error("expecting a value, found the end of the text")),
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => {
                if self.eat("-Infinity") {
                    return Ok(pynum::float_value(f64::NEG_INFINITY));
                }
                self.number()
            }
            Some(_) => {
                for (literal, value) in [
                    ("null", Value::Null),
                    ("true", Value::Bool(true)),
                    ("false", Value::Bool(false)),
                    ("NaN", pynum::float_value(f64::NAN)),
                    ("Infinity", pynum::float_value(f64::INFINITY)),
                ] {
                    if self.eat(literal) {
                        return Ok(value);
                    }
                }
                Err(self.error("expecting a value"))
            }
        }
    }

    fn nested(&mut self, parse: fn(&mut Self) -> Result<Value, JsonError>) -> Result<Value, JsonError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(format!("arrays and objects nest deeper than {MAX_DEPTH} levels")));
        }
        self.depth += 1;
        let value = parse(self);
        self.depth -= 1;
        value
    }

    fn array(&mut self) -> Result<Value, JsonError> {
        self.pos += 1; // [
        let mut items = Vec::new();
        self.skip_ws();
        if self.eat("]") {
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value()?);
            self.skip_ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("]") {
                return Ok(Value::Array(items));
            }
            return Err(self.error("expecting ',' or ']' in an array"));
        }
    }

    fn object(&mut self) -> Result<Value, JsonError> {
        self.pos += 1; // {
        let mut map = Map::new();
        self.skip_ws();
        if self.eat("}") {
            return Ok(Value::Object(map));
        }
        loop {
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return Err(self.error("expecting a property name in double quotes"));
            }
            let key = self.string()?;
            self.skip_ws();
            if !self.eat(":") {
                return Err(self.error("expecting ':' after a property name"));
            }
            self.skip_ws();
            let value = self.value()?;
            // a repeated key keeps its first place and takes the last value, as a dict does
            map.insert(key, value);
            self.skip_ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("}") {
                return Ok(Value::Object(map));
            }
            return Err(self.error("expecting ',' or '}' in an object"));
        }
    }

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while p.bytes.get(p.pos).is_some_and(u8::is_ascii_digit) {
                p.pos += 1;
            }
            p.pos - from
        };
        if self.bytes[self.pos] == b'-' {
            self.pos += 1;
        }
        match self.bytes.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.error("expecting a value")),
        }
        let int_end = self.pos;
        // a fraction or an exponent only counts when digits follow, as in Python's scanner
        if self.bytes.get(self.pos) == Some(&b'.')
            && self.bytes.get(self.pos + 1).is_some_and(u8::is_ascii_digit)
        {
            self.pos += 1;
            digits(self);
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.pos) {
            let mark = self.pos;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.pos) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                self.pos = mark;
            }
        }
        let text = &self.text[start..self.pos];
        if self.pos == int_end {
            let magnitude = text.trim_start_matches('-');
            if magnitude.len() > MAX_INT_DIGITS {
                self.pos = start;
                return Err(self.error(format!(
                    "an int of {} digits: Python reads at most {MAX_INT_DIGITS}",
                    magnitude.len()
                )));
            }
            if magnitude == "0" {
                return Ok(Value::from(0));
            }
            return Ok(Value::Number(Number::from_string_unchecked(text.to_string())));
        }
        Ok(pynum::float_value(parse_float(text)))
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1; // "
        let mut out = String::new();
        loop {
            let run = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run..self.pos]);
            match self.bytes.get(self.pos) {
                None => return Err(self.error("a string is not closed")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                }
                Some(_) => return Err(self.error("a control character inside a string (escape it)")),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), JsonError> {
        let Some(&b) = self.bytes.get(self.pos) else {
            return Err(self.error("a string is not closed"));
        };
        self.pos += 1;
        let c = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{08}',
            b'f' => '\u{0c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(out),
            _ => {
                self.pos -= 2;
                return Err(self.error("an invalid escape in a string"));
            }
        };
        out.push(c);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let hex = self
            .text
            .get(self.pos..self.pos + 4)
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u32::from_str_radix(h, 16).ok());
        match hex {
            Some(unit) => {
                self.pos += 4;
                Ok(unit)
            }
            None => Err(self.error("a `\\u` escape needs four hex digits")),
        }
    }

    fn unicode_escape(&mut self, out: &mut String) -> Result<(), JsonError> {
        let escape_at = self.pos - 2;
        let unit = self.hex4()?;
        let code = match unit {
            0xD800..=0xDBFF if self.eat("\\u") => {
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(self.lone_surrogate(escape_at));
                }
                0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
            }
            0xD800..=0xDFFF => return Err(self.lone_surrogate(escape_at)),
            _ => unit,
        };
        out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
        Ok(())
    }

    fn lone_surrogate(&mut self, at: usize) -> JsonError {
        self.pos = at;
        self.error(
            "a lone surrogate `\\u` escape (half of a UTF-16 pair): it is not text, and harel cannot \
             store it either; send the whole pair or the character itself",
        )
    }
}

/// Python's `json.dumps(value)`, byte for byte: `", "` and `": "` separators,
/// `ensure_ascii=True` (non-ASCII as lowercase `\uXXXX`, surrogate pairs above the BMP),
/// floats as `float.__repr__`, `Infinity` and `NaN` as such.
///
/// harel writes a spawn's `context`, a trace step's `entry` and the list cursor's key
/// this way.
pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => {
            let text = n.as_str();
            match python_non_finite(text) {
                Some(spelling) => out.push_str(spelling),
                None if is_float_text(text) => out.push_str(&float_repr(parse_float(text))),
                None => out.push_str(text),
            }
        }
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(k, out);
                out.push_str(": ");
                write(v, out);
            }
            out.push('}');
        }
    }
}

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Serialize like pydantic's `model_dump_json`: compact and UTF-8 as is, floats with the
/// shortest round-trip digits pydantic-core writes (`1e+16`, `1e-7`, `0.00001`: the
/// same as serde_json's), and a non-finite float as `null`. Records we write are
/// byte-identical to harel's (the golden tests in `tests/json_golden.rs` hold us to it).
pub fn to_pydantic_json<T: Serialize + ?Sized>(value: &T) -> String {
    // room for a typical execution item (about 800 bytes) without growing more than once
    let mut out = Vec::with_capacity(512);
    // Our records hold only string-keyed maps and JSON values: serializing cannot fail,
    // and serde_json writes UTF-8.
    if write_pydantic_json(&mut out, value).is_err() {
        return "{}".to_string();
    }
    String::from_utf8(out).unwrap_or_else(|_| "{}".to_string())
}

/// [`to_pydantic_json`] into a writer (to count a message's bytes without building it).
pub fn write_pydantic_json<W: io::Write, T: Serialize + ?Sized>(
    writer: W,
    value: &T,
) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(writer, Pydantic))
}

/// Python's `json.dumps(value, indent=2)` for a human (the CLI's `--json` output): what
/// serde_json's pretty printer writes, with `Infinity`, `-Infinity` and `NaN` as Python
/// writes them.
pub fn to_string_pretty<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonPretty(PrettyFormatter::new()));
    if value.serialize(&mut ser).is_err() {
        return "{}".to_string();
    }
    String::from_utf8(out).unwrap_or_else(|_| "{}".to_string())
}

/// A non-finite float's Python spelling, or `None` for a finite number's text.
fn python_non_finite(text: &str) -> Option<&'static str> {
    if !is_float_text(text) {
        return None;
    }
    let f = parse_float(text);
    if f.is_nan() {
        Some(pynum::NAN)
    } else if f.is_infinite() {
        Some(if f > 0.0 {
            pynum::INFINITY
        } else {
            pynum::NEG_INFINITY
        })
    } else {
        None
    }
}

struct PythonPretty(PrettyFormatter<'static>);

impl Formatter for PythonPretty {
    fn write_number_str<W: ?Sized + io::Write>(&mut self, w: &mut W, value: &str) -> io::Result<()> {
        w.write_all(python_non_finite(value).unwrap_or(value).as_bytes())
    }
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// serde_json's compact output with pydantic's numbers.
struct Pydantic;

impl Formatter for Pydantic {
    fn write_number_str<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: &str) -> io::Result<()> {
        if !is_float_text(value) {
            return writer.write_all(value.as_bytes());
        }
        match Number::from_f64(parse_float(value)) {
            Some(n) => writer.write_all(n.as_str().as_bytes()),
            None => writer.write_all(b"null"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dumps_matches_python_defaults() {
        assert_eq!(dumps(&json!({})), "{}");
        assert_eq!(dumps(&json!([])), "[]");
        assert_eq!(
            dumps(&json!({"a": 1, "b": [1.0, 2.5, null, true]})),
            r#"{"a": 1, "b": [1.0, 2.5, null, true]}"#
        );
        assert_eq!(
            dumps(&json!("é\u{1F600}\n\"\\\u{7f}")),
            r#""\u00e9\ud83d\ude00\n\"\\\u007f""#
        );
        assert_eq!(dumps(&json!(1e16)), "1e+16");
        assert_eq!(dumps(&json!(-0.0001)), "-0.0001");
        assert_eq!(dumps(&json!(1e-5)), "1e-05");
    }

    #[test]
    fn loads_reads_what_python_reads() {
        let v = loads(
            " [NaN, Infinity, -Infinity, 1e400, -1e400, 1E5, -0, -0.0, 123456789012345678901234567890] ",
        )
        .unwrap_or_default();
        assert_eq!(
            dumps(&v),
            "[NaN, Infinity, -Infinity, Infinity, -Infinity, 100000.0, 0, -0.0, 123456789012345678901234567890]"
        );
        assert_eq!(
            to_pydantic_json(&v),
            "[null,null,null,null,null,100000.0,0,-0.0,123456789012345678901234567890]"
        );
        assert_eq!(loads(r#""\ud83d\ude00 \u00e9""#), Ok(json!("😀 é")));
        let dup = loads(r#"{"a": 1, "b": 2, "a": 3}"#).unwrap_or_default();
        assert_eq!(dumps(&dup), r#"{"a": 3, "b": 2}"#);
    }

    #[test]
    fn loads_refuses_what_python_refuses() {
        for bad in [
            "",
            "[1,]",
            "{'a': 1}",
            "01",
            "1.",
            ".5",
            "-",
            "nan",
            "inf",
            "[1] x",
            "\"a\nb\"",
            r#""\x41""#,
            "+1",
            "tru",
            "{\"a\" 1}",
            "[1 2]",
        ] {
            assert!(loads(bad).is_err(), "{bad:?} must be refused");
        }
        let err = loads(r#"{"v": "\ud800"}"#).err().map(|e| (e.line, e.column));
        assert_eq!(err, Some((1, 8)));
        assert!(loads(&"9".repeat(4301)).is_err());
        assert!(loads(&"9".repeat(4300)).is_ok());
        assert!(loads(&"[".repeat(MAX_DEPTH + 1)).is_err());
    }

    #[test]
    fn pretty_output_spells_non_finite_floats_as_python() {
        let v = loads(r#"{"a": [NaN, -Infinity, 1.5, 7]}"#).unwrap_or_default();
        assert_eq!(
            to_string_pretty(&v),
            "{\n  \"a\": [\n    NaN,\n    -Infinity,\n    1.5,\n    7\n  ]\n}"
        );
    }

    #[test]
    fn pydantic_floats_tie_to_even() {
        // 900719925474099.25 exactly: .2 and .3 both round-trip; pydantic-core writes .2
        let v = crate::pyvalue::float(9007199254740992.0 * 0.1);
        assert_eq!(to_pydantic_json(&v), "900719925474099.2");
    }

    #[test]
    fn errors_say_where() {
        let err = loads("{\n  \"a\": tru\n}").err();
        assert_eq!(err.map(|e| (e.line, e.column)), Some((2, 8)));
    }
}
