//! `stm lsp`: a language server for `.stm` files over stdio.
//!
//! The features are pure functions of the open documents (`lsp/*.rs`: diagnostics,
//! hover, navigation, completion, the `harel/render` preview); this module is the thin
//! protocol loop around them. It reads one message at a time on the calling thread
//! (`lsp-server`'s framing, `lsp-types`' messages), answers requests in order and
//! publishes diagnostics on open, change and save.
//!
//! It never dies of its input: a message that is not JSON-RPC is answered with a parse
//! error, an unknown request with MethodNotFound, bad params with InvalidParams, and a
//! handler that panics with InternalError, and then the loop goes on.

mod completion;
mod diagnostics;
mod documents;
mod hover;
mod index;
mod lexer;
mod navigate;
mod render;
mod symbols;
mod uri;

use std::io::{self, BufRead, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;

use anyhow::Result;
use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidCloseTextDocument, DidOpenTextDocument, DidSaveTextDocument, Notification as _,
    PublishDiagnostics,
};
use lsp_types::request::{
    Completion, GotoDefinition, HoverRequest, References, Rename, Request as _, Shutdown,
};
use lsp_types::{
    CompletionOptions, HoverProviderCapability, OneOf, PublishDiagnosticsParams, SaveOptions,
    ServerCapabilities, ServerInfo, TextDocumentSyncCapability, TextDocumentSyncKind,
    TextDocumentSyncOptions, TextDocumentSyncSaveOptions, Uri,
};
use serde_json::Value;

use documents::Documents;

/// A request's params as `$type`, or an InvalidParams error out of the handler.
macro_rules! params_of {
    ($request:expr, $type:ty) => {
        serde_json::from_value::<$type>($request.params)
            .map_err(|e| (ErrorCode::InvalidParams, format!("{}: {e}", $request.method)))?
    };
}

/// harel's custom request for the VS Code preview.
const RENDER_METHOD: &str = "harel/render";

/// Serve the language server protocol on stdin/stdout until `exit` (or the end of
/// stdin). Exit 0 after a `shutdown`, 1 for an `exit` without one, as the protocol says.
pub fn serve() -> Result<ExitCode> {
    let stdin = io::stdin();
    let stdout = io::stdout();
    let mut server = Server {
        documents: Documents::default(),
        out: stdout.lock(),
        shutdown: false,
    };
    let code = server.run(&mut stdin.lock())?;
    Ok(code)
}

struct Server<W: Write> {
    documents: Documents,
    out: W,
    shutdown: bool,
}

impl<W: Write> Server<W> {
    fn run(&mut self, input: &mut impl BufRead) -> io::Result<ExitCode> {
        loop {
            let message = match Message::read(input) {
                Ok(Some(message)) => message,
                Ok(None) => return Ok(ExitCode::SUCCESS),
                // the framing was read, its payload is not a JSON-RPC message: say so
                // and read on (the next message starts right after it)
                Err(err) if err.kind() == io::ErrorKind::InvalidData => {
                    let response = Response::new_err(
                        RequestId::from(String::new()),
                        ErrorCode::ParseError as i32,
                        err.to_string(),
                    );
                    self.send_parse_error(response)?;
                    continue;
                }
                Err(_) => return Ok(ExitCode::SUCCESS),
            };
            match message {
                Message::Request(request) => {
                    let response = self.answer(request);
                    self.send(Message::Response(response))?;
                }
                Message::Notification(notification) if notification.method == "exit" => {
                    return Ok(if self.shutdown {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::from(1)
                    });
                }
                Message::Notification(notification) => {
                    let published = catch_unwind(AssertUnwindSafe(|| self.notified(notification)));
                    for message in published.unwrap_or_default() {
                        self.send(message)?;
                    }
                }
                Message::Response(_) => {} // the server sends no requests
            }
        }
    }

    fn send(&mut self, message: Message) -> io::Result<()> {
        message.write(&mut self.out)
    }

    /// A parse error's response has a null id (JSON-RPC: the id could not be read).
    fn send_parse_error(&mut self, response: Response) -> io::Result<()> {
        let mut value = serde_json::to_value(&response).map_err(io::Error::other)?;
        value["id"] = Value::Null;
        value["jsonrpc"] = Value::from("2.0");
        let text = value.to_string();
        write!(self.out, "Content-Length: {}\r\n\r\n{text}", text.len())?;
        self.out.flush()
    }

    /// The response to `request`: its result, or the error saying why there is none.
    fn answer(&mut self, request: Request) -> Response {
        let id = request.id.clone();
        let method = request.method.clone();
        match catch_unwind(AssertUnwindSafe(|| self.dispatch(request))) {
            Ok(Ok(result)) => Response::new_ok(id, result),
            Ok(Err((code, message))) => Response::new_err(id, code as i32, message),
            Err(_) => Response::new_err(id, ErrorCode::InternalError as i32, format!("{method} failed")),
        }
    }

    fn dispatch(&mut self, request: Request) -> Result<Value, (ErrorCode, String)> {
        let documents = &self.documents;
        let to_json = |value: Result<Value, serde_json::Error>| {
            value.map_err(|e| (ErrorCode::InternalError, e.to_string()))
        };
        match request.method.as_str() {
            "initialize" => to_json(serde_json::to_value(initialize_result())),
            Shutdown::METHOD => {
                self.shutdown = true;
                Ok(Value::Null)
            }
            HoverRequest::METHOD => {
                let params = params_of!(request, lsp_types::HoverParams);
                let at = params.text_document_position_params;
                to_json(serde_json::to_value(hover::hover(
                    documents,
                    &at.text_document.uri,
                    at.position,
                )))
            }
            GotoDefinition::METHOD => {
                let params = params_of!(request, lsp_types::GotoDefinitionParams);
                let at = params.text_document_position_params;
                let found = navigate::definition(documents, &at.text_document.uri, at.position);
                to_json(serde_json::to_value(found))
            }
            Completion::METHOD => {
                let params = params_of!(request, lsp_types::CompletionParams);
                let at = params.text_document_position;
                let items = completion::completion(documents, &at.text_document.uri, at.position);
                to_json(serde_json::to_value(lsp_types::CompletionList {
                    is_incomplete: false,
                    items,
                }))
            }
            References::METHOD => {
                let params = params_of!(request, lsp_types::ReferenceParams);
                let at = params.text_document_position;
                let found = navigate::references(
                    documents,
                    &at.text_document.uri,
                    at.position,
                    params.context.include_declaration,
                );
                to_json(serde_json::to_value(found))
            }
            Rename::METHOD => {
                let params = params_of!(request, lsp_types::RenameParams);
                let at = params.text_document_position;
                let edit = navigate::rename(documents, &at.text_document.uri, at.position, &params.new_name)
                    .map_err(|why| (ErrorCode::InvalidParams, why))?;
                to_json(serde_json::to_value(edit))
            }
            RENDER_METHOD => Ok(render::render_request(documents, &request.params)),
            other => Err((ErrorCode::MethodNotFound, format!("unknown method {other}"))),
        }
    }

    /// Applies a notification; returns the messages it has the server publish.
    fn notified(&mut self, notification: Notification) -> Vec<Message> {
        let method = notification.method.clone();
        let changed: Option<Uri> = match method.as_str() {
            DidOpenTextDocument::METHOD => notification
                .extract::<lsp_types::DidOpenTextDocumentParams>(DidOpenTextDocument::METHOD)
                .ok()
                .map(|p| {
                    let uri = p.text_document.uri;
                    self.documents.open(uri.clone(), p.text_document.text);
                    uri
                }),
            DidChangeTextDocument::METHOD => notification
                .extract::<lsp_types::DidChangeTextDocumentParams>(DidChangeTextDocument::METHOD)
                .ok()
                .map(|p| {
                    let uri = p.text_document.uri;
                    let mut text = self.documents.text(&uri).unwrap_or_default();
                    for change in p.content_changes {
                        text = apply_change(&text, change);
                    }
                    self.documents.open(uri.clone(), text);
                    uri
                }),
            DidSaveTextDocument::METHOD => notification
                .extract::<lsp_types::DidSaveTextDocumentParams>(DidSaveTextDocument::METHOD)
                .ok()
                .map(|p| {
                    if let Some(text) = p.text {
                        self.documents.open(p.text_document.uri.clone(), text);
                    }
                    p.text_document.uri
                }),
            DidCloseTextDocument::METHOD => {
                if let Ok(p) = notification
                    .extract::<lsp_types::DidCloseTextDocumentParams>(DidCloseTextDocument::METHOD)
                {
                    self.documents.close(&p.text_document.uri);
                    return vec![publish(p.text_document.uri, Vec::new())];
                }
                None
            }
            _ => None, // `initialized`, `$/cancelRequest`, settings...: nothing to do
        };
        let Some(uri) = changed else {
            return Vec::new();
        };
        // imports are loaded from disk: a save can change what the other open documents
        // (any of which may import this one) report
        let mut affected = vec![uri.clone()];
        if method == DidSaveTextDocument::METHOD {
            affected.extend(self.documents.uris().filter(|u| **u != uri).cloned());
        }
        affected
            .into_iter()
            .map(|uri| {
                let text = self.documents.text(&uri).unwrap_or_default();
                let found = diagnostics::diagnostics(&uri, &text);
                publish(uri, found)
            })
            .collect()
    }
}

fn publish(uri: Uri, diagnostics: Vec<lsp_types::Diagnostic>) -> Message {
    let params = PublishDiagnosticsParams::new(uri, diagnostics, None);
    Message::Notification(Notification::new(PublishDiagnostics::METHOD.to_string(), params))
}

/// `text` with one content change applied: a whole new text, or a range replaced.
fn apply_change(text: &str, change: lsp_types::TextDocumentContentChangeEvent) -> String {
    match change.range {
        None => change.text,
        Some(range) => {
            let start = lexer::offset_of(text, range.start);
            let end = lexer::offset_of(text, range.end).max(start);
            format!("{}{}{}", &text[..start], change.text, &text[end..])
        }
    }
}

fn initialize_result() -> lsp_types::InitializeResult {
    lsp_types::InitializeResult {
        capabilities: ServerCapabilities {
            text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
                open_close: Some(true),
                change: Some(TextDocumentSyncKind::FULL),
                save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                    include_text: Some(false),
                })),
                ..TextDocumentSyncOptions::default()
            })),
            hover_provider: Some(HoverProviderCapability::Simple(true)),
            definition_provider: Some(OneOf::Left(true)),
            references_provider: Some(OneOf::Left(true)),
            rename_provider: Some(OneOf::Left(true)),
            completion_provider: Some(CompletionOptions {
                trigger_characters: Some(vec![" ".into(), "|".into(), ".".into()]),
                ..CompletionOptions::default()
            }),
            ..ServerCapabilities::default()
        },
        server_info: Some(ServerInfo {
            name: "stm".to_string(),
            version: Some(env!("CARGO_PKG_VERSION").to_string()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    /// The server's answers to `input`, as JSON values, and its exit code.
    fn session(input: &str) -> (Vec<Value>, ExitCode) {
        let mut out = Vec::new();
        let mut server = Server {
            documents: Documents::default(),
            out: &mut out,
            shutdown: false,
        };
        let code = server.run(&mut input.as_bytes()).expect("the session runs");
        let text = String::from_utf8(out).expect("utf-8 output");
        let messages = text
            .split("Content-Length: ")
            .filter_map(|chunk| chunk.split_once("\r\n\r\n"))
            .filter_map(|(_, body)| serde_json::from_str(body).ok())
            .collect();
        (messages, code)
    }

    #[test]
    fn survives_garbage_and_unknown_methods() {
        let input = [
            frame("{not json"),
            frame(r#"{"jsonrpc":"2.0","id":1,"method":"no/such","params":{}}"#),
            frame(r#"{"jsonrpc":"2.0","id":2,"method":"textDocument/hover","params":{"x":1}}"#),
            frame(r#"{"jsonrpc":"2.0","id":3,"method":"shutdown"}"#),
            frame(r#"{"jsonrpc":"2.0","method":"exit"}"#),
        ]
        .concat();
        let (messages, code) = session(&input);
        assert_eq!(code, ExitCode::SUCCESS);
        assert_eq!(messages[0]["error"]["code"], ErrorCode::ParseError as i32);
        assert_eq!(messages[0]["id"], Value::Null);
        assert_eq!(messages[1]["error"]["code"], ErrorCode::MethodNotFound as i32);
        assert_eq!(messages[2]["error"]["code"], ErrorCode::InvalidParams as i32);
        assert_eq!(messages[3]["result"], Value::Null);
    }

    /// Every feature on every cut of the examples (documents in mid-edit, unclosed
    /// strings and braces) answers without panicking.
    #[test]
    fn no_cut_of_a_document_makes_a_feature_panic() {
        let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
        let uri = uri::from_file_path(&examples.join("cut.stm")).expect("a file url");
        for name in ["order.stm", "signup.stm", "checkout.stm"] {
            let full = std::fs::read_to_string(examples.join(name)).expect("an example");
            let cuts: Vec<usize> = full.char_indices().map(|(i, _)| i).step_by(7).collect();
            for cut in cuts {
                let text = &full[..cut];
                let mut documents = Documents::default();
                documents.open(uri.clone(), text.to_string());
                let _ = diagnostics::diagnostics(&uri, text);
                let _ = render::render_text(text, &uri, None);
                let end = lexer::line_end(text, text.matches('\n').count() as u32);
                for position in [
                    end,
                    lsp_types::Position::new(end.line, 0),
                    lsp_types::Position::new(0, 3),
                ] {
                    let _ = hover::hover(&documents, &uri, position);
                    let _ = navigate::definition(&documents, &uri, position);
                    let _ = navigate::references(&documents, &uri, position, true);
                    let _ = navigate::rename(&documents, &uri, position, "Renamed");
                    let _ = completion::completion(&documents, &uri, position);
                }
            }
        }
    }

    #[test]
    fn exit_without_shutdown_is_an_error() {
        let (_, code) = session(&frame(r#"{"jsonrpc":"2.0","method":"exit"}"#));
        assert_eq!(code, ExitCode::from(1));
    }

    #[test]
    fn incremental_changes_apply() {
        let change = lsp_types::TextDocumentContentChangeEvent {
            range: Some(lsp_types::Range::new(
                lsp_types::Position::new(1, 2),
                lsp_types::Position::new(1, 3),
            )),
            range_length: None,
            text: "XY".into(),
        };
        assert_eq!(apply_change("ab\ncde\n", change), "ab\ncdXY\n");
    }
}
