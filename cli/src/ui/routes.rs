//! The console's routes: the pages (GET), the controls (POST, then a redirect back to the
//! execution with the outcome), the built-in assets. Every route sits behind the token
//! ([`super::auth`]) and runs as the `operator` function (the role its calls need).

use std::sync::Arc;

use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use stm_core::Status;
use stm_store::{ExecutionStore, ListQuery};

use super::html::{self, Flash, ListFilter};
use super::markup;
use super::{auth, Console};
use crate::ops::ControlCommand;

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

/// Executions per list page.
const PAGE_SIZE: usize = 50;

/// Only our own assets, no inline script, forms post only here, never framed.
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; \
                   img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub(crate) fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(list))
        .route("/executions/{id}", get(execution))
        .route("/executions/{id}/control", post(control))
        .route("/machines/{name}", get(machine))
        .route("/machines/{name}/in/{path}", get(machine_in_state))
        .route(
            "/assets/console.css",
            get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS) }),
        )
        .route(
            "/assets/console.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], JS) }),
        )
        .fallback(|| async {
            failure(
                StatusCode::NOT_FOUND,
                "Not found",
                "The console has no such page.",
            )
        })
        .layer(middleware::from_fn(as_operator))
        .layer(middleware::from_fn_with_state(
            console.clone(),
            auth::require_token,
        ))
        .with_state(console)
}

/// Every request's store and queue calls carry the operator's role (what the strict AWS
/// layer of the tests checks; nothing is added against AWS), and every response the
/// headers that keep it to this origin.
async fn as_operator(request: Request, next: Next) -> Response {
    let mut response = stm_aws::as_function("operator", next.run(request)).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        header::HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        header::HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

/// A failure page: its status, one sentence.
fn failure(status: StatusCode, title: &str, message: &str) -> Response {
    (status, Html(markup::error_page(title, message))).into_response()
}

/// The error of a store call, as a 502 page (the console works; the store did not answer).
fn store_failure(err: &anyhow::Error) -> Response {
    failure(StatusCode::BAD_GATEWAY, "The store failed", &format!("{err:#}"))
}

#[derive(Debug, Deserialize)]
struct ListParams {
    status: Option<String>,
    definition: Option<String>,
    roots: Option<String>,
    cursor: Option<String>,
}

async fn list(State(console): State<Arc<Console>>, Query(params): Query<ListParams>) -> Response {
    let status = match params.status.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(name) => match name.parse::<Status>() {
            Ok(status) => Some(status),
            Err(_) => {
                let all: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
                return failure(
                    StatusCode::BAD_REQUEST,
                    "Not a status",
                    &format!("{name:?} is not a status: use one of {}.", all.join(", ")),
                );
            }
        },
    };
    let filter = ListFilter {
        status,
        definition: params
            .definition
            .filter(|d| !d.trim().is_empty())
            .map(|d| d.trim().to_string()),
        roots: params.roots.is_some_and(|r| !r.is_empty()),
        cursor: params.cursor.filter(|c| !c.is_empty()),
    };
    let query = ListQuery {
        status: filter.status.map(|s| vec![s]),
        definition_id: filter.definition.clone(),
        roots_only: filter.roots,
        limit: PAGE_SIZE,
        cursor: filter.cursor.clone(),
    };
    let store = console.connected.store.as_ref();
    let definitions = &console.connected.control.driver.definitions;
    let routing = match crate::routing::lines(store, definitions).await {
        Ok(lines) => lines,
        Err(err) => return store_failure(&err),
    };
    match store.list_executions(&query).await {
        Ok(page) => Html(html::list_page(&filter, &page, &routing)).into_response(),
        Err(err) => store_failure(&err.into()),
    }
}

#[derive(Debug, Deserialize)]
struct ExecutionParams {
    /// The outcome of the control that redirected here.
    done: Option<String>,
    /// Why the control that redirected here was refused.
    refused: Option<String>,
}

async fn execution(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    Query(params): Query<ExecutionParams>,
) -> Response {
    match crate::inspect::gather(&console.connected, &id).await {
        Ok(Some(view)) => {
            let flash = match (params.done, params.refused) {
                (_, Some(why)) => Some(Flash::Refused(why)),
                (Some(done), None) => Some(Flash::Done(done)),
                (None, None) => None,
            };
            Html(html::execution_page(&view, flash.as_ref())).into_response()
        }
        Ok(None) => failure(
            StatusCode::NOT_FOUND,
            "No such execution",
            &format!("There is no execution {id:?} in this deployment."),
        ),
        Err(err) => store_failure(&err),
    }
}

/// The page for a machine that is not among the console's definitions.
fn no_machine(name: &str) -> Response {
    failure(
        StatusCode::NOT_FOUND,
        "No such machine",
        &format!(
            "There is no machine {name:?} among this console's definitions (pass --definitions DIR, \
             the folder of .stm files the deployment runs)."
        ),
    )
}

/// A machine's statechart with each state's count, and its transitions.
async fn machine(State(console): State<Arc<Console>>, Path(name): Path<String>) -> Response {
    let Some(defn) = console.connected.control.driver.definitions.get(&name).cloned() else {
        return no_machine(&name);
    };
    let paths: Vec<String> = defn.state_paths().map(str::to_string).collect();
    match console.connected.store.in_states(&defn.id, &paths, None).await {
        Ok(found) => Html(super::machine::machine_page(
            &defn,
            &found,
            &stm_core::render::arrows(&defn),
        ))
        .into_response(),
        Err(err) => store_failure(&err.into()),
    }
}

/// The executions of a machine in one state (or under it), each re-read (the index lags).
async fn machine_in_state(
    State(console): State<Arc<Console>>,
    Path((name, path)): Path<(String, String)>,
) -> Response {
    let Some(defn) = console.connected.control.driver.definitions.get(&name).cloned() else {
        return no_machine(&name);
    };
    let paths = match defn.paths_under(&path) {
        Ok(paths) => paths,
        Err(err) => return failure(StatusCode::NOT_FOUND, "No such state", &format!("{err}.")),
    };
    let store = &console.connected.store;
    let found = match store.in_states(&defn.id, &paths, None).await {
        Ok(found) => found,
        Err(err) => return store_failure(&err.into()),
    };
    let rows = match crate::ops::reread_still_in(store.as_ref(), found, None, false).await {
        Ok(rows) => rows,
        Err(err) => return store_failure(&err),
    };
    let now = crate::ops::now();
    Html(super::machine::in_state_page(&defn.id, &path, &rows, now)).into_response()
}

#[derive(Debug, Deserialize)]
struct ControlForm {
    command: String,
    /// Cancel's data, a JSON object (optional).
    reason: Option<String>,
    /// Redrive's leaf.
    at: Option<String>,
}

/// Run a control command, then back to the execution's page with what happened.
async fn control(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    Form(form): Form<ControlForm>,
) -> Response {
    let command = match parse_command(&form) {
        Ok(command) => command,
        Err(why) => return back(&id, "refused", &why),
    };
    match crate::ops::apply_control(&console.connected, &id, command).await {
        Ok(outcome) => back(&id, "done", &format!("{id}: {outcome}")),
        Err(err) => back(&id, "refused", &format!("{err:#}")),
    }
}

/// The command a control form asks for, or why it is not one.
fn parse_command(form: &ControlForm) -> Result<ControlCommand, String> {
    match form.command.as_str() {
        "suspend" => Ok(ControlCommand::Suspend),
        "resume" => Ok(ControlCommand::Resume),
        "terminate" => Ok(ControlCommand::Terminate),
        "cancel" => match form.reason.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
            None => Ok(ControlCommand::Cancel(None)),
            Some(raw) => crate::machine::json_object(raw, "the cancel reason")
                .map(|reason| ControlCommand::Cancel(Some(reason)))
                .map_err(|err| format!("{err:#}")),
        },
        "redrive" => match form.at.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
            Some(at) => Ok(ControlCommand::Redrive(at.to_string())),
            None => Err("redrive needs the leaf state to resume at".to_string()),
        },
        other => Err(format!(
            "{other:?} is not a control command: use suspend, resume, cancel, terminate or redrive"
        )),
    }
}

/// 303 to the execution's page with `key=message` for its flash.
fn back(id: &str, key: &str, message: &str) -> Response {
    Redirect::to(&format!(
        "{}?{key}={}",
        markup::execution_href(id),
        markup::url_part(message)
    ))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(command: &str, reason: Option<&str>, at: Option<&str>) -> ControlForm {
        ControlForm {
            command: command.into(),
            reason: reason.map(str::to_string),
            at: at.map(str::to_string),
        }
    }

    #[test]
    fn control_forms_become_the_cli_commands() {
        assert!(matches!(
            parse_command(&form("suspend", None, None)),
            Ok(ControlCommand::Suspend)
        ));
        assert!(matches!(
            parse_command(&form("cancel", Some(" "), None)),
            Ok(ControlCommand::Cancel(None))
        ));
        assert!(matches!(
            parse_command(&form("cancel", Some(r#"{"why": "x"}"#), None)),
            Ok(ControlCommand::Cancel(Some(_)))
        ));
        assert!(matches!(
            parse_command(&form("redrive", None, Some("A.B"))),
            Ok(ControlCommand::Redrive(at)) if at == "A.B"
        ));
    }

    #[test]
    fn bad_control_forms_say_why() {
        let err = |f: ControlForm| parse_command(&f).err().unwrap_or_default();
        assert!(err(form("cancel", Some("[1]"), None)).contains("must be a JSON object"));
        assert!(err(form("cancel", Some("{"), None)).contains("is not valid JSON"));
        assert!(err(form("redrive", None, None)).contains("needs the leaf"));
        assert!(err(form("explode", None, None)).contains("is not a control command"));
    }
}
