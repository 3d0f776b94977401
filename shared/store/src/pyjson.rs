//! Python's `json.dumps(value)` with its defaults, byte for byte: `", "` and `": "`
//! separators, `ensure_ascii=True` (non-ASCII as lowercase `\uXXXX`, surrogate pairs above
//! the BMP), floats as `float.__repr__`.
//!
//! harel writes a spawn's `context`, a trace step's `entry` and the list cursor's key with
//! `json.dumps`; writing them the same way keeps the items byte-identical to harel's.

use stm_core::pyvalue::float_repr;
use stm_core::Value;

/// `json.dumps(value)`.
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
            if n.is_i64() || n.is_u64() {
                out.push_str(&n.to_string());
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if f.is_nan() {
                    out.push_str("NaN");
                } else if f.is_infinite() {
                    out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" });
                } else {
                    out.push_str(&float_repr(f));
                }
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

#[cfg(test)]
mod tests {
    use super::dumps;
    use serde_json::json;

    #[test]
    fn matches_python_defaults() {
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
    }
}
