//! IAM in one shape, `(action, logical resource id)`, from both sides:
//!
//! - [`required`]: what a function's recorded AWS requests need. DynamoDB authorizes a
//!   `TransactWriteItems` per item (`Put` -> `dynamodb:PutItem`, `Update` ->
//!   `dynamodb:UpdateItem`, `Delete` -> `dynamodb:DeleteItem`, `ConditionCheck` ->
//!   `dynamodb:ConditionCheckItem`, each on its own table), a `TransactGetItems` per `Get`
//!   (`dynamodb:GetItem`), a `BatchGetItem`/`BatchWriteItem` on every table it names; SQS
//!   authorizes a batch call as its single form (`SendMessageBatch` -> `sqs:SendMessage`).
//! - [`role_grants`]: what a role in the template allows, statement by statement. Every
//!   resource must be a `!GetAtt X.Arn` (or `!Ref X`) of a resource in the template, or a
//!   table's ARN by its name (`!Sub arn:${AWS::Partition}:dynamodb:${AWS::Region}:
//!   ${AWS::AccountId}:table/${Prefix}_executions`, optionally `/index/NAME`), whose
//!   `table/...` part is exactly a template table's `TableName` (so it holds whether the
//!   stack creates the table or `ExistingTables` says it exists): any other ARN string, a
//!   wildcard or a condition is refused, so the comparison is exact.
//! - [`service_grants`]: what the Lambda service itself needs of a function's role, not its
//!   code: writing the function's log group, and polling the queue of an SQS event source
//!   (`sqs:ReceiveMessage`, `sqs:DeleteMessage`, `sqs:GetQueueAttributes`).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail, Result};
use serde_json::Value;

use crate::template::{referenced, Template};

/// One AWS JSON-protocol request as a client sent it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// The `X-Amz-Target` header (`<service prefix>.<operation>`), empty if absent.
    pub target: String,
    /// The JSON body (`Null` if it was not JSON).
    pub body: Value,
    /// When the request arrived.
    pub at: std::time::Instant,
}

impl Recorded {
    /// The operation name: the part of the target after the dot.
    pub fn operation(&self) -> &str {
        self.target.rsplit('.').next().unwrap_or(&self.target)
    }

    /// The service prefix: the part of the target before the dot.
    pub fn service(&self) -> &str {
        self.target.split('.').next().unwrap_or_default()
    }
}

/// `(action, logical id)`, e.g. `("dynamodb:PutItem", "ExecutionsTable")`.
pub type Grant = (String, String);

/// The physical names a function was given -> the template's logical ids.
#[derive(Debug, Clone, Default)]
pub struct Physical {
    /// Table name -> logical id.
    pub tables: BTreeMap<String, String>,
    /// Queue URL -> logical id.
    pub queues: BTreeMap<String, String>,
    /// EventBridge bus name -> logical id.
    pub buses: BTreeMap<String, String>,
    /// Names not listed above, by the template's name patterns ([`Physical::from_template`]).
    table_patterns: Vec<(NamePattern, String)>,
    queue_patterns: Vec<(NamePattern, String)>,
    bus_patterns: Vec<(NamePattern, String)>,
}

impl Physical {
    fn table(&self, name: &str) -> Result<String> {
        self.tables
            .get(name)
            .cloned()
            .or_else(|| best_match(&self.table_patterns, name))
            .ok_or_else(|| anyhow!("a request names table {name:?}, which template.yaml does not declare"))
    }

    fn queue(&self, url: &str) -> Result<String> {
        if let Some(id) = self.queues.get(url) {
            return Ok(id.clone());
        }
        // a queue URL ends with the queue's name
        let name = url.rsplit('/').next().unwrap_or_default();
        self.queue_named(name)
            .map_err(|_| anyhow!("a request names queue {url:?}, which is not the template's"))
    }

    fn queue_named(&self, name: &str) -> Result<String> {
        if let Some(id) = self
            .queues
            .iter()
            .find(|(url, _)| url.rsplit('/').next() == Some(name))
        {
            return Ok(id.1.clone());
        }
        best_match(&self.queue_patterns, name)
            .ok_or_else(|| anyhow!("a request names queue {name:?}, which template.yaml does not declare"))
    }

    /// An EventBridge bus by name or ARN, by the template's name patterns.
    fn bus(&self, name_or_arn: &str) -> Result<String> {
        let name = name_or_arn.rsplit('/').next().unwrap_or(name_or_arn);
        if let Some(id) = self.buses.get(name) {
            return Ok(id.clone());
        }
        best_match(&self.bus_patterns, name).ok_or_else(|| {
            anyhow!("a request names event bus {name:?}, which template.yaml does not declare")
        })
    }

    /// Exactly these names, nothing by pattern (the policies test names every resource).
    pub fn exact(tables: BTreeMap<String, String>, queues: BTreeMap<String, String>) -> Physical {
        Physical {
            tables,
            queues,
            ..Physical::default()
        }
    }

    /// And the bus named `name` is the template's `logical`.
    pub fn with_bus(mut self, name: impl Into<String>, logical: impl Into<String>) -> Physical {
        self.buses.insert(name.into(), logical.into());
        self
    }

    /// Names mapped by the template's name patterns: every `TableName` and `QueueName` of
    /// the form `!Sub ${Param}_executions` matches any name with that literal part, e.g.
    /// `t7_e2e_executions` -> `ExecutionsTable`, `t7_e2e-events.fifo` -> `EventQueue`. So
    /// the tables and queues a test created under its own prefix resolve to the resources
    /// whose roles are checked, as the stack's own names would.
    pub fn from_template(template: &Template) -> Physical {
        let mut physical = Physical::default();
        for (kind, property, into) in [
            ("AWS::DynamoDB::Table", "TableName", &mut physical.table_patterns),
            ("AWS::SQS::Queue", "QueueName", &mut physical.queue_patterns),
            ("AWS::Events::EventBus", "Name", &mut physical.bus_patterns),
        ] {
            for id in template.of_type(kind) {
                let Ok(props) = template.properties(&id) else {
                    continue;
                };
                let pattern = match &props[property] {
                    Value::String(literal) => literal.clone(),
                    other => match crate::template::single(other) {
                        Some(("Fn::Sub", Value::String(text))) => text.clone(),
                        // `!Sub [text, {variables}]`: each variable is a placeholder too
                        Some(("Fn::Sub", Value::Array(parts))) => match parts.first() {
                            Some(Value::String(text)) => text.clone(),
                            _ => continue,
                        },
                        _ => continue,
                    },
                };
                into.push((NamePattern::parse(&pattern), id));
            }
        }
        physical
    }
}

/// A `!Sub` name with each `${...}` taken as "one or more characters".
#[derive(Debug, Clone, PartialEq)]
struct NamePattern {
    /// The literal runs between the placeholders; `anchored_start`/`anchored_end` say
    /// whether the first/last run must touch the name's ends.
    literals: Vec<String>,
    anchored_start: bool,
    anchored_end: bool,
}

impl NamePattern {
    fn parse(text: &str) -> NamePattern {
        let mut literals = Vec::new();
        let mut rest = text;
        let anchored_start = !text.starts_with("${");
        let mut anchored_end = true;
        while let Some(start) = rest.find("${") {
            literals.push(rest[..start].to_string());
            match rest[start..].find('}') {
                Some(end) => rest = &rest[start + end + 1..],
                None => {
                    rest = "";
                    break;
                }
            }
        }
        if rest.is_empty() {
            anchored_end = false;
        }
        literals.push(rest.to_string());
        literals.retain(|l| !l.is_empty());
        NamePattern {
            literals,
            anchored_start,
            anchored_end,
        }
    }

    fn literal_len(&self) -> usize {
        self.literals.iter().map(String::len).sum()
    }

    fn matches(&self, name: &str) -> bool {
        let mut rest = name;
        let last = self.literals.len().saturating_sub(1);
        for (i, literal) in self.literals.iter().enumerate() {
            if i == 0 && self.anchored_start {
                match rest.strip_prefix(literal.as_str()) {
                    Some(r) => rest = r,
                    None => return false,
                }
                continue;
            }
            if i == last && self.anchored_end {
                // a placeholder before it takes at least one character
                return rest.len() > literal.len() && rest.ends_with(literal.as_str());
            }
            match rest.get(1..).and_then(|r| r.find(literal.as_str())) {
                Some(at) => rest = &rest[1 + at + literal.len()..],
                None => return false,
            }
        }
        self.anchored_end || !rest.is_empty()
    }
}

/// The logical id whose pattern matches `name` with the most literal characters (so
/// `*-events-dlq.fifo` wins over a looser pattern).
fn best_match(patterns: &[(NamePattern, String)], name: &str) -> Option<String> {
    patterns
        .iter()
        .filter(|(p, _)| p.matches(name))
        .max_by_key(|(p, _)| p.literal_len())
        .map(|(_, id)| id.clone())
}

const DYNAMODB: &str = "DynamoDB_20120810";
const SQS: &str = "AmazonSQS";
const EVENTS: &str = "AWSEvents";

/// The IAM grants the recorded requests need.
pub fn required(records: &[Recorded], physical: &Physical) -> Result<BTreeSet<Grant>> {
    let mut out = BTreeSet::new();
    for r in records {
        out.extend(required_by(r.service(), r.operation(), &r.body, physical)?);
    }
    Ok(out)
}

/// The IAM grants one request needs: `service` is the `X-Amz-Target` prefix
/// (`DynamoDB_20120810`, `AmazonSQS`, `AWSEvents`), `operation` the part after the dot.
pub fn required_by(service: &str, op: &str, body: &Value, physical: &Physical) -> Result<BTreeSet<Grant>> {
    let mut out = BTreeSet::new();
    match service {
        DYNAMODB => match op {
            "TransactWriteItems" | "TransactGetItems" => {
                let items = body["TransactItems"]
                    .as_array()
                    .ok_or_else(|| anyhow!("{op} without TransactItems: {body}"))?;
                for item in items {
                    let (kind, item_body) = item
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
                    let table = item_body["TableName"].as_str().unwrap_or_default();
                    out.insert((format!("dynamodb:{action}"), physical.table(table)?));
                }
            }
            "BatchGetItem" | "BatchWriteItem" => {
                let tables = body["RequestItems"]
                    .as_object()
                    .ok_or_else(|| anyhow!("{op} without RequestItems"))?;
                for table in tables.keys() {
                    out.insert((format!("dynamodb:{op}"), physical.table(table)?));
                }
            }
            "ExecuteStatement" | "BatchExecuteStatement" | "ExecuteTransaction" => {
                bail!("PartiQL ({op}) is not mapped; extend stm_testkit::iam")
            }
            _ => {
                let table = body["TableName"]
                    .as_str()
                    .ok_or_else(|| anyhow!("DynamoDB {op} without a TableName"))?;
                let mut resource = physical.table(table)?;
                // a Query or Scan of an index is authorized on the index's ARN
                if let Some(index) = body["IndexName"].as_str() {
                    resource = format!("{resource}/index/{index}");
                }
                out.insert((format!("dynamodb:{op}"), resource));
            }
        },
        SQS => {
            let resource = match body["QueueUrl"].as_str() {
                Some(url) => physical.queue(url)?,
                // GetQueueUrl names the queue, not its URL
                None => match body["QueueName"].as_str() {
                    Some(name) => physical.queue_named(name)?,
                    None => bail!("SQS {op} without a QueueUrl"),
                },
            };
            let action = op.strip_suffix("Batch").unwrap_or(op);
            out.insert((format!("sqs:{action}"), resource));
        }
        EVENTS => {
            // EventBridge authorizes each entry on the bus it names (the default bus when
            // it names none)
            let entries = body["Entries"].as_array().map_or(&[][..], Vec::as_slice);
            for entry in entries {
                let bus = entry["EventBusName"].as_str().unwrap_or("default");
                out.insert((format!("events:{op}"), physical.bus(bus)?));
            }
        }
        other => bail!("a request to an unexpected service {other:?} ({op})"),
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

/// Every `(action, resource)` a role's inline policies (or a managed policy) allow.
pub fn role_grants(template: &Template, role: &str) -> Result<BTreeSet<Grant>> {
    let resource = template.resource(role)?;
    let props = &resource["Properties"];
    // a role's inline policies, or a managed policy's one document (the operator's)
    let documents: Vec<&Value> = if resource["Type"] == "AWS::IAM::Role" {
        for forbidden in ["ManagedPolicyArns", "PermissionsBoundary"] {
            if !props[forbidden].is_null() {
                bail!("{role} has {forbidden}: list its grants inline");
            }
        }
        strings(&props["Policies"])
            .into_iter()
            .map(|p| &p["PolicyDocument"])
            .collect()
    } else if resource["Type"] == "AWS::IAM::ManagedPolicy" {
        vec![&props["PolicyDocument"]]
    } else {
        bail!("{role} is neither an AWS::IAM::Role nor an AWS::IAM::ManagedPolicy");
    };
    let mut out = BTreeSet::new();
    for document in documents {
        for statement in strings(&document["Statement"]) {
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
                    let id = resource_id(template, r).ok_or_else(|| {
                        anyhow!(
                            "{role}/{sid}: resource {r} is not a !GetAtt/!Ref of a template resource \
                             (or !Sub ${{Table.Arn}}/index/NAME, or !Sub {TABLE_ARN}<a template \
                             table's TableName>[/index/NAME])"
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
    // X-Ray's write actions take no resource-level permissions: "*" is their only
    // resource, and allowed for them alone
    let actions: BTreeSet<&str> = strings(&statement["Action"])
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    if resources == [&Value::from("*")] {
        if actions.iter().all(|a| XRAY_WRITES.contains(a)) {
            return Ok(());
        }
        bail!("{role}/{sid}: Resource \"*\" is allowed only for {XRAY_WRITES:?}");
    }
    for r in resources {
        let parameter = r["Ref"].as_str().unwrap_or_default();
        if template.doc["Parameters"][parameter].is_null() {
            bail!("{role}/{sid}: resource {r} is not a !Ref of a template parameter");
        }
    }
    Ok(())
}

/// What Lambda's X-Ray daemon sends with a traced function's role (the writes of the
/// managed `AWSXRayDaemonWriteAccess`).
pub const XRAY_WRITES: [&str; 2] = ["xray:PutTraceSegments", "xray:PutTelemetryRecords"];

/// The start of a table's ARN by name, in the account and Region the stack is deployed to.
pub const TABLE_ARN: &str = "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/";

/// A policy resource as `Logical` (`!GetAtt X.Arn`, `!Ref X`, or `!Sub {TABLE_ARN}NAME`
/// where NAME is exactly the `TableName` text of table X) or `Logical/index/NAME`
/// (`!Sub ${X.Arn}/index/NAME` or `!Sub {TABLE_ARN}NAME/index/NAME`, a DynamoDB index);
/// anything else (another ARN string, a wildcard) is `None`.
fn resource_id(template: &Template, v: &Value) -> Option<String> {
    if let Some(id) = referenced(v) {
        return Some(id);
    }
    let text = match crate::template::single(v)? {
        ("Fn::Sub", Value::String(text)) => text,
        _ => return None,
    };
    let valid = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if let Some(name) = text.strip_prefix(TABLE_ARN) {
        let (name, index) = match name.split_once("/index/") {
            Some((name, index)) => (name, Some(index)),
            None => (name, None),
        };
        let table = template.of_type("AWS::DynamoDB::Table").into_iter().find(|id| {
            template
                .properties(id)
                .is_ok_and(|p| p["TableName"] == serde_json::json!({ "Fn::Sub": name }))
        })?;
        return match index {
            None => Some(table),
            Some(index) => valid(index).then(|| format!("{table}/index/{index}")),
        };
    }
    let rest = text.strip_prefix("${")?;
    let (table, index) = rest.split_once(".Arn}/index/")?;
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
