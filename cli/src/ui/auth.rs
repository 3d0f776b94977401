//! The console's one guard: a per-run random token. The printed URL carries it once
//! (`/?token=...`); the console answers with a cookie and a redirect to the same page
//! without it, so it stays out of the history and the links. A request with neither the
//! token nor the cookie gets a 403.

use std::sync::Arc;

use anyhow::Result;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Console;

/// The cookie that carries the token after the first visit.
const COOKIE: &str = "stm_ui_token";

/// 128 random bits, as hex.
pub(crate) fn new_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes)
        .map_err(|err| anyhow::anyhow!("no random source for the console's token: {err}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Let a request through only with the token: from the URL (then set the cookie and
/// redirect to the URL without it) or from the cookie.
pub(crate) async fn require_token(
    State(console): State<Arc<Console>>,
    request: Request,
    next: Next,
) -> Response {
    let query = request.uri().query().unwrap_or_default();
    if let Some(given) = query_token(query) {
        if !same(given.as_bytes(), console.token.as_bytes()) {
            return forbidden();
        }
        if request.method() == Method::GET {
            return with_cookie(&console.token, request.uri().path(), &without_token(query));
        }
        return next.run(request).await;
    }
    if cookie_token(request.headers()).is_some_and(|given| same(given.as_bytes(), console.token.as_bytes())) {
        return next.run(request).await;
    }
    forbidden()
}

fn forbidden() -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "403: this console needs the token in the URL `stm ui` printed when it started\n",
    )
        .into_response()
}

/// Redirect to `path?rest` with the token's cookie set. `SameSite=Strict`: another site
/// can neither read the console nor post its forms with the operator's cookie.
fn with_cookie(token: &str, path: &str, rest: &str) -> Response {
    let location = if rest.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{rest}")
    };
    let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    // both are ASCII built from our own token and an already valid request path
    if let (Ok(location), Ok(cookie)) = (HeaderValue::from_str(&location), HeaderValue::from_str(&cookie)) {
        headers.insert(header::LOCATION, location);
        headers.insert(header::SET_COOKIE, cookie);
    }
    response
}

/// The `token` parameter of a raw query string (a hex token needs no decoding).
fn query_token(query: &str) -> Option<&str> {
    query.split('&').find_map(|pair| pair.strip_prefix("token="))
}

/// The raw query without its `token` parameter.
fn without_token(query: &str) -> String {
    query
        .split('&')
        .filter(|pair| !pair.is_empty() && !pair.starts_with("token="))
        .collect::<Vec<_>>()
        .join("&")
}

fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// Equal, in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_taken_out_of_the_query() {
        assert_eq!(query_token("status=RUNNING&token=abc"), Some("abc"));
        assert_eq!(query_token("status=RUNNING"), None);
        assert_eq!(
            without_token("status=RUNNING&token=abc&roots=on"),
            "status=RUNNING&roots=on"
        );
        assert_eq!(without_token("token=abc"), "");
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; stm_ui_token=t0k; b=2"),
        );
        assert_eq!(cookie_token(&headers), Some("t0k"));
        headers.insert(header::COOKIE, HeaderValue::from_static("stm_ui_tokenx=t0k"));
        assert_eq!(cookie_token(&headers), None);
    }

    #[test]
    fn tokens_are_random_hex_and_compared_whole() {
        let (a, b) = (new_token().expect("random"), new_token().expect("random"));
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(same(a.as_bytes(), a.as_bytes()));
        assert!(!same(a.as_bytes(), &a.as_bytes()[..31]));
        assert!(!same(a.as_bytes(), b.as_bytes()));
    }
}
