//! IAM per request: a function's role may do what `template.yaml` grants it, and nothing
//! else.

use serde_json::json;
use stm_testkit::strict::Principal;

use crate::support::{ddb, fifo_message, fixture, ok, sqs};

#[test]
fn a_role_may_do_what_the_template_grants_it() {
    let f = fixture("strict_iam");
    let moto = stm_testkit::moto_blocking();
    let worker = moto.endpoint_as(Principal::Worker);
    ok(
        &ddb(
            worker,
            "GetItem",
            json!({"TableName": f.executions, "Key": {"id": {"S": "x"}}}),
        ),
        "the worker reads executions",
    );
    ok(
        &sqs(
            worker,
            "SendMessage",
            fifo_message(&f.fifo_url, "g", "iam-1", "{}"),
        ),
        "the worker sends events",
    );
    let denied = ddb(worker, "Scan", json!({"TableName": f.executions}));
    assert_eq!(denied.code, "AccessDeniedException", "{}", denied.body);
    let message = denied.body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("WorkerRole")
            && message.contains("dynamodb:Scan")
            && message.contains(&f.executions),
        "{message}"
    );
    // a table outside the template can be granted by no role
    let stray = ddb(
        worker,
        "GetItem",
        json!({"TableName": "unrelated", "Key": {"id": {"S": "x"}}}),
    );
    assert_eq!(stray.code, "AccessDeniedException", "{}", stray.body);
}
