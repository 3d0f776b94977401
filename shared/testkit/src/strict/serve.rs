//! The layer's answer to one connection: the principal, the IAM and service checks, the
//! request forwarded to moto (held, reworked for a moved queue clock), and moto's answer
//! charged to the meter and reworked (lagging indexes, retention, a partial batch).

use std::collections::BTreeMap;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use super::dynamodb::{self, Metering, TableSchema};
use super::entry_faults;
use super::events;
use super::principal::Principal;
use super::refusal::{Refusal, Service};
use super::shared::Shared;
use super::sqs;
use super::wire::{
    read_item, replace_body, split_response, DYNAMODB_TARGET, EVENTS_TARGET, FUNCTION_HEADER, SQS_TARGET,
};
use crate::http::{forward, Conn};

pub(super) async fn serve(
    stream: tokio::net::TcpStream,
    principal: Principal,
    shared: &Shared,
) -> std::io::Result<()> {
    let mut conn = Conn::new(stream);
    let Some(mut request) = conn.read_request().await? else {
        return Ok(());
    };
    // a function's own port names it; on the harness port, the code says which function it
    // runs (stm_aws::as_function, under an emulator)
    let principal = match (principal, request.header(FUNCTION_HEADER)) {
        (Principal::Admin, Some(function)) => Principal::of_function(function).unwrap_or(Principal::Admin),
        _ => principal,
    };
    let target = request.header("x-amz-target").unwrap_or_default().to_string();
    let (service, operation) = target.split_once('.').unwrap_or(("", ""));
    let checked = service == DYNAMODB_TARGET || service == SQS_TARGET || service == EVENTS_TARGET;
    let body: Value = if checked {
        serde_json::from_slice(&request.body).unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let mut partial_failures = None;
    // a PutEvents some of whose entries fail alone: the kept entries' indexes and the rest
    let mut partial_events = None;
    // the key schemas of the tables a DynamoDB request names: for the check, then the meter
    let mut schemas = BTreeMap::new();
    if checked {
        let refusal = 'verdict: {
            if let Ok(policies) = &shared.policies {
                if let Some((action, resource)) = policies.denied(principal, service, operation, &body) {
                    let s = match service {
                        SQS_TARGET => Service::Sqs,
                        EVENTS_TARGET => Service::Events,
                        _ => Service::DynamoDb,
                    };
                    break 'verdict Some(Refusal::access_denied(s, principal, &action, &resource));
                }
            }
            if service == SQS_TARGET {
                let queue = match body["QueueUrl"].as_str() {
                    Some(url) => shared.queue_info(url).await,
                    None => None,
                };
                match sqs::check(operation, &body, queue.as_ref()) {
                    sqs::Verdict::Forward => None,
                    sqs::Verdict::Refuse(r) => Some(r),
                    sqs::Verdict::Partial { keep, failed, rules } => {
                        for rule in rules {
                            shared.count(rule);
                        }
                        if keep.is_empty() {
                            let answer = json!({"Successful": [], "Failed": failed});
                            let text = answer.to_string();
                            let head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: stm-strict-layer\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                text.len()
                            );
                            conn.stream().write_all(head.as_bytes()).await?;
                            conn.stream().write_all(text.as_bytes()).await?;
                            return conn.stream().shutdown().await;
                        }
                        request.body = sqs::keep_entries(&body, &keep).to_string().into_bytes();
                        partial_failures = Some(failed);
                        None
                    }
                }
            } else if service == EVENTS_TARGET {
                match events::check(operation, &body) {
                    events::Verdict::Forward => None,
                    events::Verdict::Refuse(r) => Some(r),
                    events::Verdict::Partial { keep, failed, rules } => {
                        for rule in rules {
                            shared.count(rule);
                        }
                        if keep.is_empty() {
                            let text = events::merge(None, &keep, failed).to_string();
                            let head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\nx-amzn-RequestId: stm-strict-layer\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                text.len()
                            );
                            conn.stream().write_all(head.as_bytes()).await?;
                            conn.stream().write_all(text.as_bytes()).await?;
                            return conn.stream().shutdown().await;
                        }
                        request.body = sqs::keep_entries(&body, &keep).to_string().into_bytes();
                        partial_events = Some((keep, failed));
                        None
                    }
                }
            } else {
                schemas = shared
                    .schemas_for(&dynamodb::tables_named(operation, &body))
                    .await;
                dynamodb::check(operation, &body, &schemas).err()
            }
        };
        if let Some(refusal) = refusal {
            shared.count(refusal.rule);
            conn.stream().write_all(&refusal.to_http()).await?;
            return conn.stream().shutdown().await;
        }
        shared.invalidate(operation, &body);
    }
    // the fault mode per entry (opt-in per prefix), drawn on what would go to moto
    let key_of = |table: &str, item: &Value| key_of(&schemas, table, item);
    let mut entry_plan = entry_faults::Plan::default();
    let mut forwarded = Value::Null;
    if checked {
        forwarded = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        entry_plan = shared.entry_faults.plan(operation, &forwarded, &key_of);
        if let Some(cancelled) = &entry_plan.refuse {
            return answer_json(&mut conn, 400, "TransactionCanceledException", cancelled).await;
        }
        if let Some(cut) = entry_plan.body.take() {
            forwarded = cut;
            request.body = forwarded.to_string().into_bytes();
        }
        if !entry_plan.sqs_failed.is_empty() {
            partial_failures
                .get_or_insert_with(Vec::new)
                .append(&mut entry_plan.sqs_failed);
            if forwarded["Entries"].as_array().is_none_or(Vec::is_empty) {
                let failed = partial_failures.take().unwrap_or_default();
                let answer = json!({"Successful": [], "Failed": failed});
                return answer_json(&mut conn, 200, "", &answer).await;
            }
        }
        if !entry_plan.events_failed.is_empty() {
            // the plan's indexes are into the entries forwarded so far
            let (keep, mut failed) = partial_events.take().unwrap_or_else(|| {
                let n = body["Entries"].as_array().map_or(0, Vec::len);
                ((0..n).collect(), Vec::new())
            });
            let refused: BTreeMap<usize, Value> = entry_plan.events_failed.drain(..).collect();
            let mut still = Vec::new();
            for (j, at) in keep.into_iter().enumerate() {
                match refused.get(&j) {
                    Some(result) => failed.push((at, result.clone())),
                    None => still.push(at),
                }
            }
            if still.is_empty() {
                let answer = events::merge(None, &still, failed);
                return answer_json(&mut conn, 200, "", &answer).await;
            }
            partial_events = Some((still, failed));
        }
    }
    // DynamoDB: what is charged and indexed is what moto is asked to do
    let body = if service == DYNAMODB_TARGET && entry_plan.unprocessed.is_some() {
        forwarded.clone()
    } else {
        body
    };
    // the items a write changes on tables whose indexes lag: their state before the first
    // write the layer sees, so the index can go on showing it
    let lagged_writes = if service == DYNAMODB_TARGET {
        shared.index_lag.writes_of(operation, &body, &schemas)
    } else {
        Vec::new()
    };
    for write in lagged_writes.iter().filter(|w| shared.index_lag.unknown(w)) {
        let before = read_item(&shared.upstream, write).await;
        let now = shared.metering.now();
        shared.index_lag.record(write, f64::NEG_INFINITY, before, now);
    }
    // a receive on a queue whose clock a test moved: SQS's retention on that clock
    let mut moved_receive = None;
    if service == SQS_TARGET && operation == "ReceiveMessage" {
        let mut asked = body.clone();
        if let Some(moved) = shared.queue_clocks.before_receive(&mut asked) {
            request.body = asked.to_string().into_bytes();
            moved_receive = Some(moved);
        }
    }
    if let Some(hold) = shared.hold_for(service, operation, &body) {
        tokio::time::sleep(hold).await;
    }
    let mut answer = forward(&request, &shared.upstream).await?;
    if service == SQS_TARGET {
        if let Some((200, bytes)) = split_response(&answer) {
            let moto: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
            shared.queue_clocks.record_sends(operation, &body, &moto);
            if let (Some(moved), Some(url)) = (moved_receive, body["QueueUrl"].as_str()) {
                let retention = shared
                    .queue_info(url)
                    .await
                    .map_or(sqs::DEFAULT_RETENTION_SECONDS, |q| q.retention_seconds);
                let (kept, expired) = shared.queue_clocks.after_receive(&moto, moved, retention);
                shared.delete_expired(url, &expired).await;
                answer = replace_body(&answer, &kept);
            }
        }
    }
    if service == DYNAMODB_TARGET {
        let mut lagged_answer = None;
        // charged before the client has the answer, so a test that reads the meter after
        // its request sees the request's units
        if let Some((200, bytes)) = split_response(&answer) {
            let moto_answer = if Metering::reads_answer(operation, &body) {
                serde_json::from_slice(bytes).unwrap_or(Value::Null)
            } else {
                Value::Null
            };
            let at = shared.metering.now();
            shared
                .metering
                .observe(operation, &body, &moto_answer, &schemas, at);
            for write in &lagged_writes {
                let after = read_item(&shared.upstream, write).await;
                shared.index_lag.record(write, at, after, shared.metering.now());
            }
            if operation == "Query" || operation == "Scan" {
                // (a `Query` is one of the requests whose answer the meter reads; a `Scan`
                // of a table, not an index, is answered live)
                lagged_answer =
                    shared
                        .index_lag
                        .answer_query(&body, &moto_answer, &schemas, shared.metering.now());
            }
        }
        if let Some((400, bytes)) = split_response(&answer) {
            // AWS bills a conditional write whose condition failed; moto's 400 is all the
            // layer sees of it
            let failure: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
            let at = shared.metering.now();
            shared
                .metering
                .observe_failed_condition(operation, &body, &failure, &schemas, at);
        }
        if let Some(lagged) = lagged_answer {
            answer = replace_body(&answer, &lagged);
        }
        if operation == "BatchGetItem" {
            // moto answers in part past 16 MB of items, as DynamoDB does
            if let Some((200, bytes)) = split_response(&answer) {
                let moto: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
                if moto["UnprocessedKeys"].as_object().is_some_and(|m| !m.is_empty()) {
                    shared
                        .partial_batch_gets
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
    }
    if let (Some(prefix), Some((200, bytes))) = (&entry_plan.prefix, split_response(&answer)) {
        let moto: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
        shared
            .entry_faults
            .went_through(prefix, operation, &forwarded, &moto, &key_of);
        if let Some((field, unprocessed)) = &entry_plan.unprocessed {
            answer = replace_body(&answer, &entry_faults::add_unprocessed(&moto, field, unprocessed));
        }
    }
    if let Some((keep, failed)) = partial_events {
        if let Some((200, bytes)) = split_response(&answer) {
            let moto: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
            answer = replace_body(&answer, &events::merge(Some(&moto), &keep, failed));
        }
    }
    let answer = match partial_failures {
        Some(failed) => match split_response(&answer) {
            Some((200, bytes)) => {
                let moto: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
                replace_body(&answer, &sqs::merge_failed(&moto, failed))
            }
            _ => answer,
        },
        None => answer,
    };
    conn.stream().write_all(&answer).await?;
    conn.stream().shutdown().await
}

/// An item cut down to its table's key (the whole item when the schema is unknown).
fn key_of(schemas: &BTreeMap<String, TableSchema>, table: &str, item: &Value) -> Value {
    let Some(schema) = schemas.get(table) else {
        return item.clone();
    };
    let mut key = serde_json::Map::new();
    for name in std::iter::once(&schema.partition_key).chain(schema.sort_key.as_ref()) {
        if let Some(v) = item.get(name) {
            key.insert(name.clone(), v.clone());
        }
    }
    Value::Object(key)
}

/// Answer the request with `body` ourselves (`error_type` set for an error answer).
async fn answer_json(
    conn: &mut Conn<tokio::net::TcpStream>,
    status: u16,
    error_type: &str,
    body: &Value,
) -> std::io::Result<()> {
    let text = body.to_string();
    let reason = if status == 200 { "OK" } else { "Bad Request" };
    let error_header = if error_type.is_empty() {
        String::new()
    } else {
        format!("x-amzn-ErrorType: {error_type}\r\n")
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/x-amz-json-1.0\r\n{error_header}x-amzn-RequestId: stm-strict-layer\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    conn.stream().write_all(head.as_bytes()).await?;
    conn.stream().write_all(text.as_bytes()).await?;
    conn.stream().shutdown().await
}
