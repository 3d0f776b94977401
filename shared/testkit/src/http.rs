//! Just enough HTTP/1.1 for a loopback proxy and a loopback Runtime API: read one request
//! (a `Content-Length` or chunked body), write one response.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// One request as read off the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header lines as sent (name, value), in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The request again, for an upstream: same method, path, headers (a signed request
    /// stays valid) except `Connection`, which becomes `close`, and a plain
    /// `Content-Length` body.
    pub fn to_upstream_bytes(&self) -> Vec<u8> {
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, self.path);
        for (k, v) in &self.headers {
            if k.eq_ignore_ascii_case("connection")
                || k.eq_ignore_ascii_case("transfer-encoding")
                || k.eq_ignore_ascii_case("content-length")
            {
                continue;
            }
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            self.body.len()
        ));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

/// A buffered reader over a connection that keeps what it read past one request.
#[derive(Debug)]
pub struct Conn<S> {
    stream: S,
    buf: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    pub fn new(stream: S) -> Self {
        Conn {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn stream(&mut self) -> &mut S {
        &mut self.stream
    }

    async fn fill(&mut self) -> std::io::Result<bool> {
        let mut chunk = [0u8; 16 * 1024];
        let n = self.stream.read(&mut chunk).await?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    async fn line(&mut self) -> std::io::Result<Option<String>> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..pos]).into_owned();
                self.buf.drain(..pos + 2);
                return Ok(Some(line));
            }
            if !self.fill().await? {
                return Ok(None);
            }
        }
    }

    async fn exact(&mut self, n: usize) -> std::io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if !self.fill().await? {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "body cut short",
                ));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// The next request, or `None` when the peer closed the connection between requests.
    pub async fn read_request(&mut self) -> std::io::Result<Option<Request>> {
        let Some(first) = self.line().await? else {
            return Ok(None);
        };
        let mut parts = first.split_whitespace();
        let method = parts.next().unwrap_or_default().to_string();
        let path = parts.next().unwrap_or_default().to_string();
        let mut headers = Vec::new();
        loop {
            let Some(line) = self.line().await? else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "headers cut short",
                ));
            };
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let mut request = Request {
            method,
            path,
            headers,
            body: Vec::new(),
        };
        let chunked = request
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        if chunked {
            loop {
                let size_line = self.line().await?.unwrap_or_default();
                let size =
                    usize::from_str_radix(size_line.split(';').next().unwrap_or("0").trim(), 16).unwrap_or(0);
                if size == 0 {
                    // trailers, up to the empty line
                    while let Some(line) = self.line().await? {
                        if line.is_empty() {
                            break;
                        }
                    }
                    break;
                }
                let data = self.exact(size).await?;
                request.body.extend_from_slice(&data);
                self.exact(2).await?; // CRLF after the chunk
            }
        } else {
            let len: usize = request
                .header("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            request.body = self.exact(len).await?;
        }
        Ok(Some(request))
    }

    /// Write a response with a `Content-Length` body.
    pub async fn respond(
        &mut self,
        status: u16,
        headers: &[(&str, String)],
        body: &[u8],
        close: bool,
    ) -> std::io::Result<()> {
        let reason = match status {
            200 => "OK",
            202 => "Accepted",
            404 => "Not Found",
            _ => "Status",
        };
        let mut head = format!("HTTP/1.1 {status} {reason}\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        if close {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        self.stream.write_all(head.as_bytes()).await?;
        self.stream.write_all(body).await?;
        self.stream.flush().await
    }
}

/// Send `request` to `upstream` (`host:port`) and return the whole response with its
/// `Connection` header forced to `close`.
pub async fn forward(request: &Request, upstream: &str) -> std::io::Result<Vec<u8>> {
    exchange(&request.to_upstream_bytes(), upstream).await
}

/// Send raw request bytes to `upstream` and read the whole response (the upstream closes
/// the connection after it), its `Connection` header forced to `close`: every proxy of the
/// test kit answers one request per client connection.
pub(crate) async fn exchange(request: &[u8], upstream: &str) -> std::io::Result<Vec<u8>> {
    let mut up = tokio::net::TcpStream::connect(upstream).await?;
    up.write_all(request).await?;
    let mut response = Vec::new();
    up.read_to_end(&mut response).await?;
    let Some(head_end) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(response);
    };
    let head = String::from_utf8_lossy(&response[..head_end]).into_owned();
    let mut out = String::new();
    for (i, line) in head.split("\r\n").enumerate() {
        if i > 0
            && line
                .split_once(':')
                .is_some_and(|(k, _)| k.trim().eq_ignore_ascii_case("connection"))
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&response[head_end + 4..]);
    Ok(bytes)
}

/// What a plain AWS JSON call answered: the status, the response head and the JSON body
/// (`Null` when it is not JSON).
#[derive(Debug, Clone)]
pub struct JsonAnswer {
    pub status: u16,
    pub head: String,
    pub body: serde_json::Value,
}

/// One AWS JSON-protocol call (`X-Amz-Target: target`) to `endpoint`, over a plain
/// blocking connection with a dummy signature: what an SDK sends, for the tests of the
/// strict layer itself. Panics when the endpoint cannot be reached (a test harness).
pub fn json_call(endpoint: &str, target: &str, body: &serde_json::Value) -> JsonAnswer {
    use std::io::{Read, Write};
    let address = endpoint.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).expect("connect to the strict layer");
    let text = body.to_string();
    let service = if target.starts_with("AmazonSQS") {
        "sqs"
    } else {
        "dynamodb"
    };
    let request = format!(
        "POST / HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/x-amz-json-1.0\r\nX-Amz-Target: {target}\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP answer");
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = serde_json::from_slice(&raw[head_end + 4..]).unwrap_or(serde_json::Value::Null);
    JsonAnswer { status, head, body }
}
