//! The layer's HTTP plumbing: the names it reads off a request (the function header, the
//! services' `X-Amz-Target` prefixes), its own JSON requests to moto, and the surgery on
//! moto's responses (status and body, a new body).

use serde_json::Value;

use super::index_lag::{self, IndexLag};
use crate::http::{forward, Request};

/// The header in which the code under test names its function (`stm_aws::FUNCTION_HEADER`;
/// the test kit does not depend on the crates under test).
pub const FUNCTION_HEADER: &str = "x-stm-function";

pub(super) const DYNAMODB_TARGET: &str = "DynamoDB_20120810";
pub(super) const SQS_TARGET: &str = "AmazonSQS";
pub(super) const EVENTS_TARGET: &str = "AWSEvents";

/// A JSON request of ours to moto (the schema and attribute look-ups).
pub(super) async fn ask_upstream(upstream: &str, target: &str, body: &Value) -> Option<Value> {
    let service = if target.starts_with(SQS_TARGET) {
        "sqs"
    } else {
        "dynamodb"
    };
    let request = Request {
        method: "POST".into(),
        path: "/".into(),
        headers: vec![
            ("Host".into(), upstream.to_string()),
            ("Content-Type".into(), "application/x-amz-json-1.0".into()),
            ("X-Amz-Target".into(), target.to_string()),
            (
                "Authorization".into(),
                format!("AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"),
            ),
        ],
        body: body.to_string().into_bytes(),
    };
    let answer = forward(&request, upstream).await.ok()?;
    let (status, body) = split_response(&answer)?;
    (status == 200)
        .then(|| serde_json::from_slice(body).ok())
        .flatten()
}

/// The item a lagged write names, as moto holds it now (a consistent `GetItem`); `None`
/// when there is none (or moto did not answer: the index then shows no item).
pub(super) async fn read_item(upstream: &str, write: &index_lag::LaggedWrite) -> Option<Value> {
    let answer = ask_upstream(
        upstream,
        &format!("{DYNAMODB_TARGET}.GetItem"),
        &IndexLag::get_item_request(write),
    )
    .await?;
    answer.get("Item").filter(|i| i.is_object()).cloned()
}

/// `(status, body)` of a whole HTTP response.
pub(super) fn split_response(bytes: &[u8]) -> Option<(u16, &[u8])> {
    let head_end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&bytes[..head_end]).ok()?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, &bytes[head_end + 4..]))
}

/// A response with a new JSON body (the layer's merge of a partial batch).
pub(super) fn replace_body(bytes: &[u8], body: &Value) -> Vec<u8> {
    let text = body.to_string();
    let head_end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(bytes.len());
    let head = String::from_utf8_lossy(&bytes[..head_end]);
    let mut out = String::new();
    for (i, line) in head.split("\r\n").enumerate() {
        if i > 0
            && line.split_once(':').is_some_and(|(k, _)| {
                let k = k.trim();
                k.eq_ignore_ascii_case("content-length") || k.eq_ignore_ascii_case("transfer-encoding")
            })
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n", text.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(text.as_bytes());
    bytes
}
