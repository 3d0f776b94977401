//! The layer's refusals: an answer in AWS's shape (status, error code, message, the
//! cancellation reasons of a transaction) as each service's JSON protocol writes it.

use serde_json::{json, Value};

use super::principal::Principal;

/// An answer in AWS's shape instead of moto's.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub status: u16,
    /// The error code (`ValidationException`, `InvalidParameterValue`, ...).
    pub code: String,
    pub message: String,
    /// The layer's name for the rule (`sqs.group_id.format`, ...), for counts.
    pub rule: &'static str,
    service: Service,
    /// For a cancelled transaction: its reasons.
    reasons: Option<Vec<Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Service {
    DynamoDb,
    Sqs,
    Events,
}

impl Refusal {
    pub(crate) fn sqs(code: &str, rule: &'static str, message: String) -> Refusal {
        Refusal {
            status: 400,
            code: code.to_string(),
            message,
            rule,
            service: Service::Sqs,
            reasons: None,
        }
    }

    pub(crate) fn events_validation(rule: &'static str, message: String) -> Refusal {
        Refusal {
            status: 400,
            code: "ValidationException".into(),
            message,
            rule,
            service: Service::Events,
            reasons: None,
        }
    }

    pub(crate) fn dynamodb_validation(rule: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            status: 400,
            code: "ValidationException".into(),
            message: message.into(),
            rule,
            service: Service::DynamoDb,
            reasons: None,
        }
    }

    pub(crate) fn transaction_cancelled(
        rule: &'static str,
        items: usize,
        index: usize,
        code: &str,
        message: &str,
    ) -> Refusal {
        let reasons: Vec<Value> = (0..items)
            .map(|i| {
                if i == index {
                    json!({"Code": code, "Message": message})
                } else {
                    json!({"Code": "None"})
                }
            })
            .collect();
        let codes: Vec<&str> = (0..items)
            .map(|i| if i == index { code } else { "None" })
            .collect();
        Refusal {
            status: 400,
            code: "TransactionCanceledException".into(),
            message: format!(
                "Transaction cancelled, please refer cancellation reasons for specific reasons [{}]",
                codes.join(", ")
            ),
            rule,
            service: Service::DynamoDb,
            reasons: Some(reasons),
        }
    }

    pub(super) fn access_denied(
        service: Service,
        principal: Principal,
        action: &str,
        resource: &str,
    ) -> Refusal {
        // SQS names the action in lower case (`sqs:sendmessage`), DynamoDB as written
        let action = if service == Service::Sqs {
            action.to_ascii_lowercase()
        } else {
            action.to_string()
        };
        let message = format!(
            "User: {} is not authorized to perform: {action} on resource: {resource} because no identity-based policy allows the {action} action",
            principal.arn()
        );
        Refusal {
            status: if service == Service::Sqs { 403 } else { 400 },
            code: if service == Service::Sqs {
                "AccessDenied".into()
            } else {
                "AccessDeniedException".into()
            },
            message,
            rule: "iam",
            service,
            reasons: None,
        }
    }

    /// The HTTP answer, as the service's JSON protocol shapes it: DynamoDB's validation
    /// and IAM errors carry coral's `__type`s; SQS's JSON protocol adds the query-protocol
    /// code in `x-amzn-query-error`, which is where the SDKs read the code from.
    pub(super) fn to_http(&self) -> Vec<u8> {
        let code = self.code.as_str();
        let (type_name, query_error) = match self.service {
            Service::DynamoDb => (
                match code {
                    "ValidationException" => "com.amazon.coral.validate#ValidationException".to_string(),
                    "AccessDeniedException" => "com.amazon.coral.service#AccessDeniedException".to_string(),
                    other => format!("com.amazonaws.dynamodb.v20120810#{other}"),
                },
                None,
            ),
            Service::Sqs => match code {
                "InvalidParameterValue" | "MissingParameter" | "AccessDenied" => (
                    format!("com.amazon.coral.service#{code}Exception"),
                    Some(format!("{code};Sender")),
                ),
                // the batch errors keep the query protocol's service prefix in their code
                "TooManyEntriesInBatchRequest"
                | "EmptyBatchRequest"
                | "BatchEntryIdsNotDistinct"
                | "InvalidBatchEntryId"
                | "BatchRequestTooLong" => (
                    format!("com.amazonaws.sqs#{code}"),
                    Some(format!("AWS.SimpleQueueService.{code};Sender")),
                ),
                other => (
                    format!("com.amazonaws.sqs#{other}"),
                    Some(format!("{other};Sender")),
                ),
            },
            // EventBridge's JSON 1.1 protocol: the bare code
            Service::Events => (code.to_string(), None),
        };
        let mut body = json!({"__type": type_name, "message": self.message});
        if let Some(reasons) = &self.reasons {
            body["CancellationReasons"] = Value::Array(reasons.clone());
            body["Message"] = Value::String(self.message.clone());
        }
        let text = body.to_string();
        let mut head = format!(
            "HTTP/1.1 {} Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-RequestId: stm-strict-layer\r\nx-amzn-ErrorType: {}\r\n",
            self.status, self.code
        );
        if let Some(q) = query_error {
            head.push_str(&format!("x-amzn-query-error: {q}\r\n"));
        }
        head.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            text.len()
        ));
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(text.as_bytes());
        bytes
    }
}
