//! Percent-encoding (RFC 3986), both ways: a link's part in the console, a document's
//! `file:` URI in the language server.

use std::fmt::Write;

/// `text` percent-encoded for a path segment or a query value: everything but the
/// unreserved characters (an execution id may hold `/`, `?`, `#` or `&`).
pub(crate) fn url_part(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// `text` with its `%XX` escapes decoded; `None` for a broken escape or bytes that are not
/// UTF-8.
pub(crate) fn decode(text: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(text.len());
    let mut raw = text.bytes();
    while let Some(b) = raw.next() {
        if b == b'%' {
            let hex = [raw.next()?, raw.next()?];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    String::from_utf8(bytes).ok()
}
