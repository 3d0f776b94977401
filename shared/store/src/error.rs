//! The store's errors: [`StoreError`], and the typed causes it carries: why an input
//! cannot be stored ([`Unstorable`]) and why a stored record cannot be read
//! ([`Corruption`]). Each keeps the data of its cause (and the error beneath it, where
//! there is one, as its `source`); the messages are what they were as formatted text.

use stm_core::pyvalue::float_repr;

/// The error beneath a store failure (the SDK's, say), kept as its `source`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The store's errors. A lost CAS is a [`StoreError::Conflict`], kept apart from real
/// failures so callers can redeliver instead of failing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The stored execution moved past the version this writer loaded.
    #[error("stale write to {id}: expected version {expected}, found {}", found_version(*.found))]
    Conflict {
        id: String,
        expected: i64,
        found: Option<i64>,
    },
    /// A transient fault (throttling, a transaction conflict) that outlived the retries.
    #[error("retryable store failure: {message}")]
    Retryable {
        message: String,
        /// The client's error, where there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// The input cannot be stored as it is, whatever the retry: over an item or
    /// transaction limit, a number the backend cannot hold (DynamoDB: a timer's `fire_at`
    /// of 1E+126 or more, or not finite), or a request the backend refuses as invalid
    /// (DynamoDB's `ValidationException`, or a `ValidationError` cancellation reason).
    /// The message says what and what to do; callers fail the step instead of retrying it.
    #[error(transparent)]
    TooLarge(Unstorable),
    /// A stored record that cannot be read back.
    #[error("corrupt record {what}: {reason}")]
    Corrupt {
        what: String,
        #[source]
        reason: Corruption,
    },
    /// Any other backend failure, with the backend's message.
    #[error("store backend error: {message}")]
    Backend {
        message: String,
        /// The client's error, where there is one.
        #[source]
        source: Option<BoxError>,
    },
}

impl StoreError {
    /// A transient failure with no client error beneath it.
    pub fn retryable(message: impl Into<String>) -> Self {
        StoreError::Retryable {
            message: message.into(),
            source: None,
        }
    }

    /// A backend failure with no client error beneath it.
    pub fn backend(message: impl Into<String>) -> Self {
        StoreError::Backend {
            message: message.into(),
            source: None,
        }
    }

    /// The same failure, with `source` as the error beneath it.
    #[cfg(feature = "aws")]
    pub(crate) fn with_source(self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        match self {
            StoreError::Retryable { message, .. } => StoreError::Retryable {
                message,
                source: Some(Box::new(source)),
            },
            StoreError::Backend { message, .. } => StoreError::Backend {
                message,
                source: Some(Box::new(source)),
            },
            other => other,
        }
    }

    pub fn is_conflict(&self) -> bool {
        matches!(self, StoreError::Conflict { .. })
    }

    /// The Python exception harel's store raises for the same failure: `StoreConflict` for
    /// a lost CAS, `StoreError` for the rest (what a Lambda function's `errorType` names).
    pub fn python_type(&self) -> &'static str {
        if self.is_conflict() {
            "StoreConflict"
        } else {
            "StoreError"
        }
    }
}

impl From<Unstorable> for StoreError {
    fn from(why: Unstorable) -> Self {
        StoreError::TooLarge(why)
    }
}

/// Why an input cannot be stored as it is ([`StoreError::TooLarge`]): the same input is
/// refused on every try. The messages name the limits of DynamoDB, whose limits the
/// stores that enforce any enforce.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unstorable {
    /// An item over the item size limit (400 KB): `what` names it (`execution x item`,
    /// `the trace step item`, ...).
    #[error(
        "{what} is {bytes} bytes, over DynamoDB's limit of {limit} bytes (shrink the context or the \
         event data)"
    )]
    Item {
        what: String,
        bytes: usize,
        limit: usize,
    },
    /// A commit whose items together are over a transaction's size limit (4 MB).
    #[error(
        "the commit of {execution_id} is {bytes} bytes, over DynamoDB's limit of {limit} bytes \
         (shrink the context or the event data)"
    )]
    TransactionBytes {
        execution_id: String,
        bytes: usize,
        limit: usize,
    },
    /// A commit needing more items than one transaction holds (100).
    #[error(
        "the commit of {execution_id} needs {items} transaction items, over DynamoDB's limit of \
         {limit} (too many emits, spawns or timers in one step)"
    )]
    Transaction {
        execution_id: String,
        items: usize,
        limit: usize,
    },
    /// A commit holding more trace steps than the trace ring keeps: the ring's delete of
    /// one step would hit another's put in the same transaction.
    #[error("the commit of {execution_id} holds {steps} trace steps, more than the trace ring's {ring}")]
    TraceSteps {
        execution_id: String,
        steps: usize,
        ring: usize,
    },
    /// A number the backend cannot hold, `what` naming it (`fire_at`, ...).
    #[error("{what} is {}, which DynamoDB cannot store as a number ({why})", float_repr(*.value))]
    Number {
        what: String,
        value: f64,
        why: NumberRefusal,
    },
    /// A timer's `fire_at` the backend cannot hold: the state's timeout (read from the
    /// context) is too long.
    #[error(
        "the timer of {execution_id} at {path} would fire at {} (epoch seconds), which DynamoDB \
         cannot store as a number ({why}): give the state a timeout of at most {} seconds",
        float_repr(*.fire_at),
        stm_core::validate::MAX_TIMEOUT_SECONDS
    )]
    Timer {
        execution_id: String,
        path: String,
        fire_at: f64,
        why: NumberRefusal,
    },
    /// A request the backend refuses as invalid (DynamoDB: a `ValidationException`, or a
    /// transaction cancelled with a `ValidationError` reason), in the backend's words.
    #[error(
        "DynamoDB refused the commit as invalid, so no retry can succeed (fix the cause, then \
         redrive the execution): {refusal}"
    )]
    Invalid {
        refusal: Refusal,
        /// The client's error, where there is one.
        #[source]
        source: Option<BoxError>,
    },
}

/// Why DynamoDB refuses a number (at most 38 significant digits, and zero or a magnitude
/// from 1E-130 to below 1E+126).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NumberRefusal {
    /// NaN or an infinity.
    NotFinite,
    /// A magnitude of 1E+126 or more.
    TooLarge,
    /// A magnitude below 1E-130 (zero excepted).
    TooSmall,
    /// More than 38 significant digits.
    TooPrecise,
}

impl std::fmt::Display for NumberRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NumberRefusal::NotFinite => "not a finite number",
            NumberRefusal::TooLarge => "its magnitude is 1E+126 or more",
            NumberRefusal::TooSmall => "its magnitude is below 1E-130",
            NumberRefusal::TooPrecise => "it has more than 38 significant digits",
        })
    }
}

/// What the backend said when it refused a request as invalid ([`Unstorable::Invalid`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The call was refused (DynamoDB: a `ValidationException`): `op` is the call
    /// (`PutItem`, `TransactWriteItems`), `message` its error's code and message.
    Call { op: &'static str, message: String },
    /// A transaction was cancelled with a reason that says an action is invalid
    /// (DynamoDB: `ValidationError`; moto: `ValidationException`): every reason, in the
    /// order of the transaction's actions.
    Cancelled { reasons: Vec<CancelReason> },
}

impl std::fmt::Display for Refusal {
    /// `PutItem: ValidationException: ...`, or `TransactWriteItems cancelled [None,
    /// ValidationError]: action 2 (Put on t_timers): ValidationError: Number overflow. ...`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Call { op, message } => write!(f, "{op}: {message}"),
            Refusal::Cancelled { reasons } => {
                let listed: Vec<&str> = reasons.iter().map(CancelReason::code_or_none).collect();
                write!(f, "TransactWriteItems cancelled [{}]: ", listed.join(", "))?;
                let refused = reasons.iter().enumerate().filter(|(_, r)| r.refused());
                for (n, (i, reason)) in refused.enumerate() {
                    if n > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "action {}", i + 1)?;
                    if let Some(action) = &reason.action {
                        write!(f, " ({} on {})", action.kind, action.table)?;
                    }
                    write!(f, ": {}", reason.code_or_none())?;
                    if let Some(message) = &reason.message {
                        write!(f, ": {message}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// One cancellation reason of a cancelled transaction, as the backend gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CancelReason {
    /// The reason's code (`None` when it gives none; DynamoDB's own `None` says the action
    /// was not at fault).
    pub code: Option<String>,
    pub message: Option<String>,
    /// The transaction's action at the reason's position; `None` when it has none there
    /// (an emulator may give more reasons than actions).
    pub action: Option<CancelledAction>,
}

impl CancelReason {
    #[cfg(feature = "aws")]
    pub(crate) fn new(
        code: Option<String>,
        message: Option<String>,
        action: Option<CancelledAction>,
    ) -> Self {
        CancelReason {
            code,
            message,
            action,
        }
    }

    /// Whether this action was at fault (a code other than `None`).
    pub fn refused(&self) -> bool {
        self.code.as_deref().is_some_and(|c| c != "None")
    }

    fn code_or_none(&self) -> &str {
        self.code.as_deref().unwrap_or("None")
    }
}

/// An action of a cancelled transaction: its kind and table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CancelledAction {
    /// `Put`, `Delete`, `Update`, `ConditionCheck`, or `an action` for one of another kind.
    pub kind: &'static str,
    /// Its table (empty for an action of another kind).
    pub table: String,
}

impl CancelledAction {
    #[cfg(feature = "aws")]
    pub(crate) fn new(kind: &'static str, table: impl Into<String>) -> Self {
        CancelledAction {
            kind,
            table: table.into(),
        }
    }
}

/// Why a stored record cannot be read back ([`StoreError::Corrupt`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Corruption {
    /// A required attribute is absent, or not of the type it must be.
    #[error("no {expected} `{attribute}`")]
    Missing {
        attribute: &'static str,
        expected: AttributeType,
    },
    /// An attribute the store writes itself that does not hold what it must.
    #[error("{}", malformed(.attribute, .problem))]
    Malformed {
        attribute: &'static str,
        problem: Malformation,
    },
    /// A stored execution's or event's JSON that does not read as one.
    #[error("{0}")]
    Record(#[source] stm_core::execution::RecordJsonError),
    /// JSON text that does not parse (a trace step, a spawn's context), `attribute`
    /// naming the attribute when the record has several.
    #[error("{}{source}", attribute_prefix(*.attribute))]
    Json {
        attribute: Option<&'static str>,
        source: stm_core::pyjson::JsonError,
    },
}

/// The type a required attribute must have ([`Corruption::Missing`]), as its message
/// names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttributeType {
    /// `S`: "no string attribute `data`".
    String,
    /// An integral `N`: "no integer attribute `seq`".
    Integer,
    /// `N`: "no number `fire_at`".
    Number,
}

impl std::fmt::Display for AttributeType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AttributeType::String => "string attribute",
            AttributeType::Integer => "integer attribute",
            AttributeType::Number => "number",
        })
    }
}

/// What is wrong with an attribute the store writes itself ([`Corruption::Malformed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Malformation {
    /// The processed window (`recent`) is not a binary.
    NotBinary,
    /// The processed window is not a flags byte followed by 8-byte hashes.
    NotWindow,
    /// The rows block (`rows`) is not a list of three whole numbers.
    NotBlock,
    /// The packed spawn intents (`more_spawns`) are not a list.
    NotList,
    /// A packed spawn intent is not a list.
    IntentNotList,
    /// A packed spawn intent is not `[child_id, root_path, context]`.
    NotIntent,
    /// The routes item's `r` is not the routes' JSON ([`crate::route::Routes`]).
    NotRoutes,
}

/// The message of [`Corruption::Malformed`].
/// A conflict's found version as harel words it: the number, or `None` when no execution
/// is stored under the id any more.
fn found_version(found: Option<i64>) -> String {
    found.map_or_else(|| "None".to_string(), |v| v.to_string())
}

fn malformed(attribute: &str, problem: &Malformation) -> String {
    match problem {
        Malformation::NotBinary => format!("attribute `{attribute}`: not a binary"),
        Malformation::NotWindow => format!("attribute `{attribute}`: not a flags byte and 8-byte hashes"),
        Malformation::NotBlock => format!("`{attribute}` is not a list of three whole numbers"),
        Malformation::NotList => format!("`{attribute}` is not a list"),
        Malformation::IntentNotList => format!("`{attribute}` holds an intent that is not a list"),
        Malformation::NotIntent => {
            format!("`{attribute}` holds an intent that is not [child_id, root_path, context]")
        }
        Malformation::NotRoutes => format!("`{attribute}` is not the routes' JSON"),
    }
}

/// ``"`more_spawns` "`` before the JSON error of a named attribute.
fn attribute_prefix(attribute: Option<&'static str>) -> String {
    attribute.map_or_else(String::new, |name| format!("`{name}` "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages are the ones the store wrote as formatted text before its errors
    /// carried data: tests and operators read them.
    #[test]
    fn the_messages_are_the_formatted_texts_they_replace() {
        let cases: Vec<(Unstorable, String)> = vec![
            (
                Unstorable::Item {
                    what: "execution x item".into(),
                    bytes: 500_000,
                    limit: 409_600,
                },
                "execution x item is 500000 bytes, over DynamoDB's limit of 409600 bytes (shrink the \
                 context or the event data)"
                    .into(),
            ),
            (
                Unstorable::TransactionBytes {
                    execution_id: "x".into(),
                    bytes: 5_000_000,
                    limit: 4_194_304,
                },
                "the commit of x is 5000000 bytes, over DynamoDB's limit of 4194304 bytes (shrink the \
                 context or the event data)"
                    .into(),
            ),
            (
                Unstorable::Transaction {
                    execution_id: "x".into(),
                    items: 121,
                    limit: 100,
                },
                "the commit of x needs 121 transaction items, over DynamoDB's limit of 100 (too many \
                 emits, spawns or timers in one step)"
                    .into(),
            ),
            (
                Unstorable::TraceSteps {
                    execution_id: "x".into(),
                    steps: 3,
                    ring: 2,
                },
                "the commit of x holds 3 trace steps, more than the trace ring's 2".into(),
            ),
            (
                Unstorable::Number {
                    what: "fire_at".into(),
                    value: 1e200,
                    why: NumberRefusal::TooLarge,
                },
                "fire_at is 1e+200, which DynamoDB cannot store as a number (its magnitude is 1E+126 \
                 or more)"
                    .into(),
            ),
            (
                Unstorable::Timer {
                    execution_id: "x".into(),
                    path: "Wait".into(),
                    fire_at: f64::NAN,
                    why: NumberRefusal::NotFinite,
                },
                "the timer of x at Wait would fire at nan (epoch seconds), which DynamoDB cannot store \
                 as a number (not a finite number): give the state a timeout of at most \
                 9007199254740991 seconds"
                    .into(),
            ),
            (
                Unstorable::Invalid {
                    refusal: Refusal::Call {
                        op: "PutItem",
                        message: "ValidationException: bad".into(),
                    },
                    source: None,
                },
                "DynamoDB refused the commit as invalid, so no retry can succeed (fix the cause, then \
                 redrive the execution): PutItem: ValidationException: bad"
                    .into(),
            ),
        ];
        for (why, text) in cases {
            assert_eq!(why.to_string(), text);
            assert_eq!(StoreError::TooLarge(why).to_string(), text);
        }
        for (why, text) in [
            (NumberRefusal::TooSmall, "its magnitude is below 1E-130"),
            (
                NumberRefusal::TooPrecise,
                "it has more than 38 significant digits",
            ),
        ] {
            assert_eq!(why.to_string(), text);
        }
    }

    #[test]
    fn a_corrupt_record_keeps_the_error_beneath_it() {
        use std::error::Error as _;
        let json = stm_core::pyjson::loads("[1,").expect_err("not JSON");
        let err = StoreError::Corrupt {
            what: "spawn item 7".into(),
            reason: Corruption::Json {
                attribute: Some("more_spawns"),
                source: json.clone(),
            },
        };
        assert_eq!(
            err.to_string(),
            format!("corrupt record spawn item 7: `more_spawns` {json}")
        );
        let reason = err.source().expect("the reason");
        assert_eq!(reason.source().map(ToString::to_string), Some(json.to_string()));

        let record = stm_core::Execution::from_json("{}").expect_err("not an execution");
        let text = record.to_string();
        let err = StoreError::Corrupt {
            what: "execution x".into(),
            reason: Corruption::Record(record),
        };
        assert_eq!(err.to_string(), format!("corrupt record execution x: {text}"));

        let err = StoreError::Corrupt {
            what: "execution x".into(),
            reason: Corruption::Missing {
                attribute: "data",
                expected: AttributeType::String,
            },
        };
        assert_eq!(
            err.to_string(),
            "corrupt record execution x: no string attribute `data`"
        );
        assert!(err.source().and_then(|r| r.source()).is_none());
        let reasons = [
            (
                Corruption::Missing {
                    attribute: "seq",
                    expected: AttributeType::Integer,
                },
                "no integer attribute `seq`",
            ),
            (
                Corruption::Missing {
                    attribute: "fire_at",
                    expected: AttributeType::Number,
                },
                "no number `fire_at`",
            ),
            (
                Corruption::Malformed {
                    attribute: "recent",
                    problem: Malformation::NotBinary,
                },
                "attribute `recent`: not a binary",
            ),
            (
                Corruption::Malformed {
                    attribute: "recent",
                    problem: Malformation::NotWindow,
                },
                "attribute `recent`: not a flags byte and 8-byte hashes",
            ),
            (
                Corruption::Malformed {
                    attribute: "rows",
                    problem: Malformation::NotBlock,
                },
                "`rows` is not a list of three whole numbers",
            ),
            (
                Corruption::Malformed {
                    attribute: "more_spawns",
                    problem: Malformation::NotList,
                },
                "`more_spawns` is not a list",
            ),
            (
                Corruption::Malformed {
                    attribute: "more_spawns",
                    problem: Malformation::IntentNotList,
                },
                "`more_spawns` holds an intent that is not a list",
            ),
            (
                Corruption::Malformed {
                    attribute: "more_spawns",
                    problem: Malformation::NotIntent,
                },
                "`more_spawns` holds an intent that is not [child_id, root_path, context]",
            ),
        ];
        for (reason, text) in reasons {
            assert_eq!(reason.to_string(), text);
        }
    }
}
