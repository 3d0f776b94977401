//! IAM in one shape, `(action, logical resource id)`, from both sides:
//!
//! - [`required`]: what a function's recorded AWS requests need. DynamoDB authorizes a
//!   `TransactWriteItems` per item (`Put` -> `dynamodb:PutItem`, `Update` ->
//!   `dynamodb:UpdateItem`, `Delete` -> `dynamodb:DeleteItem`, `ConditionCheck` ->
//!   `dynamodb:ConditionCheckItem`, each on its own table), a `TransactGetItems` per `Get`
//!   (`dynamodb:GetItem`), a `BatchGetItem`/`BatchWriteItem` on every table it names; SQS
//!   authorizes a batch call as its single form (`SendMessageBatch` -> `sqs:SendMessage`).
//! - [`role_grants`]: what a role in the template allows, statement by statement. Every
//!   resource must be a `!GetAtt X.Arn` (or `!Ref X`) of a resource in the template: an ARN
//!   string, a wildcard or a condition is refused, so the comparison is exact.
//! - [`service_grants`]: what the Lambda service itself needs of a function's role, not its
//!   code: writing the function's log group, and polling the queue of an SQS event source
//!   (`sqs:ReceiveMessage`, `sqs:DeleteMessage`, `sqs:GetQueueAttributes`).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail, Result};
use serde_json::Value;

use crate::recorder::Recorded;
use crate::template::{referenced, Template};

/// `(action, logical id)`, e.g. `("dynamodb:PutItem", "ExecutionsTable")`.
pub type Grant = (String, String);

/// The physical names a function was given -> the template's logical ids.
#[derive(Debug, Clone, Default)]
pub struct Physical {
    /// Table name -> logical id.
    pub tables: BTreeMap<String, String>,
    /// Queue URL -> logical id.
    pub queues: BTreeMap<String, String>,
}

impl Physical {
    fn table(&self, name: &str) -> Result<String> {
        self.tables
            .get(name)
            .cloned()
            .ok_or_else(|| anyhow!("a request names table {name:?}, which template.yaml does not declare"))
    }

    fn queue(&self, url: &str) -> Result<String> {
        self.queues
            .get(url)
            .cloned()
            .ok_or_else(|| anyhow!("a request names queue {url:?}, which is not the template's"))
    }
}

const DYNAMODB: &str = "DynamoDB_20120810";
const SQS: &str = "AmazonSQS";

/// The IAM grants the recorded requests need.
pub fn required(records: &[Recorded], physical: &Physical) -> Result<BTreeSet<Grant>> {
    let mut out = BTreeSet::new();
    for r in records {
        let op = r.operation();
        match r.service() {
            DYNAMODB => match op {
                "TransactWriteItems" | "TransactGetItems" => {
                    let items = r.body["TransactItems"]
                        .as_array()
                        .ok_or_else(|| anyhow!("{op} without TransactItems: {}", r.body))?;
                    for item in items {
                        let (kind, body) = item
                            .as_object()
                            .and_then(|m| m.iter().next())
                            .ok_or_else(|| anyhow!("an empty {op} item"))?;
                        let action = match kind.as_str() {
                            "Put" => "PutItem",
                            "Update" => "UpdateItem",
                            "Delete" => "DeleteItem",
                            "ConditionCheck" => "ConditionCheckItem",
                            "Get" => "GetItem",
                            other => bail!("unknown {op} item {other}"),
                        };
                        let table = body["TableName"].as_str().unwrap_or_default();
                        out.insert((format!("dynamodb:{action}"), physical.table(table)?));
                    }
                }
                "BatchGetItem" | "BatchWriteItem" => {
                    let tables = r.body["RequestItems"]
                        .as_object()
                        .ok_or_else(|| anyhow!("{op} without RequestItems"))?;
                    for table in tables.keys() {
                        out.insert((format!("dynamodb:{op}"), physical.table(table)?));
                    }
                }
                "ExecuteStatement" | "BatchExecuteStatement" | "ExecuteTransaction" => {
                    bail!("PartiQL ({op}) is not mapped; extend stm_deploytest::iam")
                }
                _ => {
                    let table = r.body["TableName"]
                        .as_str()
                        .ok_or_else(|| anyhow!("DynamoDB {op} without a TableName"))?;
                    let mut resource = physical.table(table)?;
                    // a Query or Scan of an index is authorized on the index's ARN
                    if let Some(index) = r.body["IndexName"].as_str() {
                        resource = format!("{resource}/index/{index}");
                    }
                    out.insert((format!("dynamodb:{op}"), resource));
                }
            },
            SQS => {
                let url = r.body["QueueUrl"]
                    .as_str()
                    .ok_or_else(|| anyhow!("SQS {op} without a QueueUrl"))?;
                let action = op.strip_suffix("Batch").unwrap_or(op);
                out.insert((format!("sqs:{action}"), physical.queue(url)?));
            }
            other => bail!("a request to an unexpected service {other:?} ({})", r.target),
        }
    }
    Ok(out)
}

fn strings(v: &Value) -> Vec<&Value> {
    match v {
        Value::Array(items) => items.iter().collect(),
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

/// The role a function runs as: its `Role: !GetAtt X.Arn`. A function without its own
/// role (SAM would generate one, with managed policies) is refused.
pub fn function_role(template: &Template, function: &str) -> Result<String> {
    let props = template.properties(function)?;
    for forbidden in ["Policies", "ManagedPolicyArns"] {
        if !props[forbidden].is_null() {
            bail!("{function} has {forbidden}: give it its own AWS::IAM::Role instead");
        }
    }
    referenced(&props["Role"]).ok_or_else(|| anyhow!("{function} has no `Role: !GetAtt <Role>.Arn`"))
}

/// Every `(action, resource)` a role's inline policies allow.
pub fn role_grants(template: &Template, role: &str) -> Result<BTreeSet<Grant>> {
    let resource = template.resource(role)?;
    if resource["Type"] != "AWS::IAM::Role" {
        bail!("{role} is not an AWS::IAM::Role");
    }
    let props = &resource["Properties"];
    for forbidden in ["ManagedPolicyArns", "PermissionsBoundary"] {
        if !props[forbidden].is_null() {
            bail!("{role} has {forbidden}: list its grants inline");
        }
    }
    let mut out = BTreeSet::new();
    for policy in strings(&props["Policies"]) {
        for statement in strings(&policy["PolicyDocument"]["Statement"]) {
            if let Some(args) = statement.get("Fn::If") {
                check_conditional_grant(template, role, args)?;
                continue;
            }
            let sid = statement["Sid"].as_str().unwrap_or("?");
            if statement["Effect"] != "Allow" {
                bail!("{role}/{sid}: only Allow statements are expected");
            }
            for forbidden in ["Condition", "NotAction", "NotResource", "Principal"] {
                if !statement[forbidden].is_null() {
                    bail!("{role}/{sid}: {forbidden} is not expected");
                }
            }
            let resources = strings(&statement["Resource"]);
            if resources.is_empty() {
                bail!("{role}/{sid}: no Resource");
            }
            for action in strings(&statement["Action"]) {
                let action = action
                    .as_str()
                    .ok_or_else(|| anyhow!("{role}/{sid}: a non-string action"))?;
                if action.contains('*') {
                    bail!("{role}/{sid}: wildcard action {action}");
                }
                for r in &resources {
                    let id = resource_id(r).ok_or_else(|| {
                        anyhow!(
                            "{role}/{sid}: resource {r} is not a !GetAtt/!Ref of a template resource \
                             (or !Sub ${{Table.Arn}}/index/NAME)"
                        )
                    })?;
                    template.resource(id.split('/').next().unwrap_or_default())?;
                    out.insert((action.to_string(), id));
                }
            }
        }
    }
    Ok(out)
}

/// A statement present only when a template condition holds (`!If [Cond, statement,
/// !Ref AWS::NoValue]`: the worker's remote-action grant, off by default). It is outside
/// what the recorded code needs, so it is not a grant here; its shape is checked instead:
/// absent otherwise, Allow only, no wildcard action, and resources that are only
/// `!Ref`s of template parameters (the ARNs an operator lists).
fn check_conditional_grant(template: &Template, role: &str, args: &Value) -> Result<()> {
    let (Some(condition), Some(statement), Some(otherwise)) =
        (args.get(0).and_then(Value::as_str), args.get(1), args.get(2))
    else {
        bail!("{role}: a malformed Fn::If statement");
    };
    let sid = statement["Sid"].as_str().unwrap_or("?");
    if template.doc["Conditions"][condition].is_null() {
        bail!("{role}/{sid}: unknown condition {condition}");
    }
    if otherwise != &serde_json::json!({"Ref": "AWS::NoValue"}) {
        bail!("{role}/{sid}: a conditional statement must be absent when {condition} is false");
    }
    if statement["Effect"] != "Allow" {
        bail!("{role}/{sid}: only Allow statements are expected");
    }
    for forbidden in ["Condition", "NotAction", "NotResource", "Principal"] {
        if !statement[forbidden].is_null() {
            bail!("{role}/{sid}: {forbidden} is not expected");
        }
    }
    for action in strings(&statement["Action"]) {
        if action.as_str().is_none_or(|a| a.contains('*')) {
            bail!("{role}/{sid}: a wildcard or non-string action {action}");
        }
    }
    let resources = strings(&statement["Resource"]);
    if resources.is_empty() {
        bail!("{role}/{sid}: no Resource");
    }
    for r in resources {
        let parameter = r["Ref"].as_str().unwrap_or_default();
        if template.doc["Parameters"][parameter].is_null() {
            bail!("{role}/{sid}: resource {r} is not a !Ref of a template parameter");
        }
    }
    Ok(())
}

/// A policy resource as `Logical` (`!GetAtt X.Arn`, `!Ref X`) or `Logical/index/NAME`
/// (`!Sub ${X.Arn}/index/NAME`, a DynamoDB index); anything else (an ARN string, a
/// wildcard) is `None`.
fn resource_id(v: &Value) -> Option<String> {
    if let Some(id) = referenced(v) {
        return Some(id);
    }
    let text = match crate::template::single(v)? {
        ("Fn::Sub", Value::String(text)) => text,
        _ => return None,
    };
    let rest = text.strip_prefix("${")?;
    let (table, index) = rest.split_once(".Arn}/index/")?;
    let valid = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    (valid(table) && valid(index)).then(|| format!("{table}/index/{index}"))
}

/// What the Lambda service needs of `function`'s role: its log group (when the template
/// gives it one) and the queue of each SQS event source.
pub fn service_grants(template: &Template, function: &str) -> Result<BTreeSet<Grant>> {
    let props = template.properties(function)?;
    let mut out = BTreeSet::new();
    let group = referenced(&props["LoggingConfig"]["LogGroup"])
        .ok_or_else(|| anyhow!("{function} has no LoggingConfig.LogGroup: !Ref <its log group>"))?;
    for action in ["logs:CreateLogStream", "logs:PutLogEvents"] {
        out.insert((action.to_string(), group.clone()));
    }
    if let Some(events) = props["Events"].as_object() {
        for (name, event) in events {
            if event["Type"] == "SQS" {
                let queue = referenced(&event["Properties"]["Queue"]).ok_or_else(|| {
                    anyhow!("{function}/{name}: Queue is not a !GetAtt of a template queue")
                })?;
                for action in [
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                ] {
                    out.insert((action.to_string(), queue.clone()));
                }
            }
        }
    }
    Ok(out)
}

/// A readable table of grants, one per line, for assertion messages.
pub fn show(grants: &BTreeSet<Grant>) -> String {
    grants
        .iter()
        .map(|(a, r)| format!("  {a:<32} {r}"))
        .collect::<Vec<_>>()
        .join("\n")
}
