//! IAM per request: the roles' grants from `template.yaml`, and the first action a
//! principal's request needs that its policy does not grant, on which resource.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::principal::Principal;
use super::wire::{EVENTS_TARGET, SQS_TARGET};
use crate::iam::{self, Grant, Physical};
use crate::template::Template;

/// The roles' grants, read once from the repository's `template.yaml`.
pub(super) struct Policies {
    grants: BTreeMap<Principal, BTreeSet<Grant>>,
    physical: Physical,
}

impl Policies {
    pub(super) fn load() -> Result<Policies, String> {
        let path = crate::repo_root().join("template.yaml");
        let template = Template::load(&path).map_err(|e| format!("{}: {e:#}", path.display()))?;
        let mut grants = BTreeMap::new();
        for principal in Principal::ALL {
            if let Some(id) = principal.policy() {
                let g = iam::role_grants(&template, id).map_err(|e| format!("template.yaml {id}: {e:#}"))?;
                grants.insert(principal, g);
            }
        }
        Ok(Policies {
            grants,
            physical: Physical::from_template(&template),
        })
    }

    /// `None` when allowed; else the first action the principal lacks, on what.
    pub(super) fn denied(
        &self,
        principal: Principal,
        service: &str,
        operation: &str,
        body: &Value,
    ) -> Option<(String, String)> {
        let granted = self.grants.get(&principal)?;
        match iam::required_by(service, operation, body, &self.physical) {
            Ok(needed) => needed
                .into_iter()
                .find(|g| !granted.contains(g))
                .map(|(action, resource)| (action, arn_of(&resource, service, body))),
            // a table or queue outside the template: no policy can name it
            Err(why) => Some((
                format!("{}:{operation}", service_prefix(service)),
                format!("({why:#})"),
            )),
        }
    }
}

fn service_prefix(service: &str) -> &'static str {
    match service {
        SQS_TARGET => "sqs",
        EVENTS_TARGET => "events",
        _ => "dynamodb",
    }
}

/// A readable ARN for a denied resource (the logical id with the physical name the
/// request used, when there is one).
fn arn_of(logical: &str, service: &str, body: &Value) -> String {
    if service == EVENTS_TARGET {
        let bus = body["Entries"][0]["EventBusName"].as_str().unwrap_or("default");
        let name = bus.rsplit('/').next().unwrap_or(bus);
        return format!("arn:aws:events:us-east-1:123456789012:event-bus/{name} ({logical})");
    }
    if service == SQS_TARGET {
        let name = body["QueueUrl"]
            .as_str()
            .and_then(|u| u.rsplit('/').next())
            .or(body["QueueName"].as_str())
            .unwrap_or(logical);
        return format!("arn:aws:sqs:us-east-1:123456789012:{name} ({logical})");
    }
    let (table, index) = logical
        .split_once("/index/")
        .map_or((logical, None), |(t, i)| (t, Some(i)));
    let name = body["TableName"].as_str().unwrap_or(table);
    match index {
        Some(i) => format!("arn:aws:dynamodb:us-east-1:123456789012:table/{name}/index/{i} ({table})"),
        None => format!("arn:aws:dynamodb:us-east-1:123456789012:table/{name} ({table})"),
    }
}
