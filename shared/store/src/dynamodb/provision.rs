//! Creating, joining and checking the seven tables (and the `timers` due index).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::describe_table::{DescribeTableError, DescribeTableOutput};
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, IndexStatus, KeySchemaElement,
    KeyType as DdbKeyType, Projection as DdbProjection, ProjectionType, ScalarAttributeType, TableStatus,
};
use aws_sdk_dynamodb::Client;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;

use super::schema::{table_specs, KeyAttr, KeyType, Projection, TableSpec, TIMER_DUE_INDEX};
use super::{build_err, sdk_error, CreateOptions, DynamoDbStore};
use crate::StoreError;
use stm_aws::sdk_config_with_profile;

impl DynamoDbStore {
    /// Build a client for `endpoint_url` (an emulator, with dummy credentials) or real AWS
    /// (`None`, the default credential chain) in `region`, and make sure the tables exist,
    /// retrying until the endpoint answers.
    pub async fn create(endpoint_url: Option<&str>, region: &str) -> Result<Self, StoreError> {
        Self::create_with(endpoint_url, region, CreateOptions::default()).await
    }

    /// [`create`](Self::create) with options.
    pub async fn create_with(
        endpoint_url: Option<&str>,
        region: &str,
        options: CreateOptions,
    ) -> Result<Self, StoreError> {
        let config = sdk_config_with_profile(endpoint_url, region, options.profile.as_deref()).await;
        let mut builder = aws_sdk_dynamodb::config::Builder::from(&config);
        if let Some(tag) = stm_aws::function_tag() {
            builder.push_interceptor(tag);
        }
        if let Some(retry) = options.sdk_retry {
            builder = builder.retry_config(retry);
        }
        let mut store = DynamoDbStore::new(Client::from_conf(builder.build()))
            .with_prefix(&options.prefix)?
            .with_trace_max(options.trace_max)
            .with_retry_policy(options.retry)
            .with_timer_full_scan_interval(options.timer_full_scan_interval)
            .with_dedupe_marks(options.dedupe_marks)
            .with_state_index(options.state_index);
        if let Some(counter) = options.call_counter {
            store = store.with_call_counter(counter);
        }
        let attempts = options.connect_attempts.max(1);
        let mut last = None;
        for attempt in 1..=attempts {
            let result = if options.create_schema {
                store.ensure_tables().await
            } else {
                store.check_tables().await
            };
            match result {
                Ok(()) => return Ok(store),
                // unreachable (connection refused, timeout) or busy: wait and try again
                Err(StoreError::Retryable { message: why, .. }) => {
                    tracing::debug!(attempt, %why, "DynamoDB not reachable yet");
                    last = Some(why);
                    if attempt < attempts {
                        tokio::time::sleep(options.connect_delay).await;
                    }
                }
                Err(other) => return Err(other),
            }
        }
        Err(StoreError::backend(format!(
            "DynamoDB at {} not reachable after {attempts} attempts: {}",
            endpoint_url.unwrap_or("the default AWS endpoint"),
            last.unwrap_or_default()
        )))
    }

    /// Create the seven tables (and the `timers` due index) if absent and wait until the
    /// new ones are `ACTIVE`. An existing table (harel creates the same seven with its own
    /// `CreateTable` calls) is joined as it is when it has harel's key schema, and
    /// refused with a message naming it and both schemas when it has not. An existing
    /// `timers` table without the index is left as it is (logged, and
    /// [`has_due_index`](Self::has_due_index) says so): sweeps then fall back to the
    /// harel's full scan.
    pub async fn ensure_tables(&self) -> Result<(), StoreError> {
        let mut created = Vec::new();
        let mut existing = Vec::new();
        for spec in table_specs() {
            let name = spec.table_name(&self.prefix);
            let mut req = self
                .client
                .create_table()
                .table_name(&name)
                .billing_mode(BillingMode::PayPerRequest);
            for (i, key) in spec.keys().into_iter().enumerate() {
                let role = if i == 0 {
                    DdbKeyType::Hash
                } else {
                    DdbKeyType::Range
                };
                req = req.key_schema(key_element(key, role)?);
            }
            for attr in spec.attribute_definitions() {
                let ty = match attr.ty {
                    KeyType::String => ScalarAttributeType::S,
                    KeyType::Number => ScalarAttributeType::N,
                };
                req = req.attribute_definitions(
                    AttributeDefinition::builder()
                        .attribute_name(attr.name)
                        .attribute_type(ty)
                        .build()
                        .map_err(build_err)?,
                );
            }
            for index in spec.indexes {
                let mut gsi = GlobalSecondaryIndex::builder().index_name(index.name).projection(
                    DdbProjection::builder()
                        .projection_type(match index.projection {
                            Projection::KeysOnly => ProjectionType::KeysOnly,
                        })
                        .build(),
                );
                for (i, key) in index.keys().into_iter().enumerate() {
                    let role = if i == 0 {
                        DdbKeyType::Hash
                    } else {
                        DdbKeyType::Range
                    };
                    gsi = gsi.key_schema(key_element(key, role)?);
                }
                req = req.global_secondary_indexes(gsi.build().map_err(build_err)?);
            }
            match req.send().await {
                Ok(_) => created.push(name),
                // there already (harel's CreateTable, the template, an earlier run): joined
                // below if it is keyed as ours
                Err(err) if err.code() == Some("ResourceInUseException") => existing.push(spec),
                Err(err) => return Err(sdk_error("CreateTable", err)),
            }
        }
        for name in created {
            self.wait_active(&name).await?;
        }
        // An existing table is used as it is, never altered: harel's have harel's keys
        // and none of our additions (the due index), which are optional. Keys are not: both
        // stores address every item by them, so a table keyed otherwise is refused by name.
        let timers_existed = existing.iter().any(|spec| spec.name == "timers");
        for (spec, name, out) in self.describe_tables(existing).await? {
            let out = out.map_err(|e| sdk_error("DescribeTable", e))?;
            check_key_schema(&spec, &name, &out)?;
            if name == self.tables.timers {
                self.note_due_index(&out);
            }
        }
        if timers_existed {
            Ok(())
        } else {
            self.detect_due_index().await
        }
    }

    /// `DescribeTable` of each of `specs`' tables, all at once (one round trip, not one per
    /// table), answered in `specs`' order whatever order they come back in.
    async fn describe_tables(
        &self,
        specs: Vec<TableSpec>,
    ) -> Result<
        Vec<(
            TableSpec,
            String,
            Result<DescribeTableOutput, SdkError<DescribeTableError, HttpResponse>>,
        )>,
        StoreError,
    > {
        let mut calls = tokio::task::JoinSet::new();
        for (index, spec) in specs.into_iter().enumerate() {
            let name = spec.table_name(&self.prefix);
            let client = self.client.clone();
            calls.spawn(async move {
                let out = client.describe_table().table_name(&name).send().await;
                (index, spec, name, out)
            });
        }
        let mut answers = Vec::with_capacity(calls.len());
        while let Some(joined) = calls.join_next().await {
            let answer =
                joined.map_err(|e| StoreError::backend(format!("a DescribeTable task failed: {e}")))?;
            answers.push(answer);
        }
        answers.sort_by_key(|(index, ..)| *index);
        Ok(answers
            .into_iter()
            .map(|(_, spec, name, out)| (spec, name, out))
            .collect())
    }

    /// Whether the `timers` table has an `ACTIVE` due index: remembered, so that sweeps of
    /// a table without it go straight to the full scan (logged once here).
    async fn detect_due_index(&self) -> Result<(), StoreError> {
        let out = self
            .client
            .describe_table()
            .table_name(&self.tables.timers)
            .send()
            .await
            .map_err(|e| sdk_error("DescribeTable", e))?;
        self.note_due_index(&out);
        Ok(())
    }

    /// Record, from a `DescribeTable` of `timers`, whether the due index is usable.
    fn note_due_index(&self, out: &DescribeTableOutput) {
        let present = out.table().is_some_and(|t| {
            t.global_secondary_indexes().iter().any(|g| {
                g.index_name() == Some(TIMER_DUE_INDEX)
                    && g.index_status().is_none_or(|s| *s == IndexStatus::Active)
            })
        });
        if !present {
            tracing::warn!(
                table = %self.tables.timers,
                index = TIMER_DUE_INDEX,
                "the timers table has no ACTIVE due index: every timer sweep is a full scan \
                 (deploy template.yaml with the index)"
            );
        }
        self.set_due_index_present(present);
    }

    async fn wait_active(&self, table: &str) -> Result<(), StoreError> {
        for _ in 0..240 {
            let out = self
                .client
                .describe_table()
                .table_name(table)
                .send()
                .await
                .map_err(|e| sdk_error("DescribeTable", e))?;
            let status = out.table().and_then(|t| t.table_status().cloned());
            let indexes_active = out_indexes_active(&out);
            if status == Some(TableStatus::Active) && indexes_active {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(StoreError::backend(format!(
            "table {table} did not become ACTIVE within 120 s"
        )))
    }

    /// Check that the seven tables exist with harel's keys (for `create_schema = false`).
    /// A `timers` table without the due index passes (harel's tables have none): sweeps
    /// then fall back to the full scan (logged).
    pub async fn check_tables(&self) -> Result<(), StoreError> {
        // the seven DescribeTable calls at once: they are most of a function's cold start
        // (one round trip instead of eight in a row), and the `timers` answer doubles as
        // the due-index check; problems are reported in the tables' declared order
        for (spec, name, out) in self.describe_tables(table_specs()).await? {
            let out = match out {
                Ok(out) => out,
                Err(err) if err.code() == Some("ResourceNotFoundException") => {
                    return Err(StoreError::backend(format!(
                        "table {name} does not exist (the schema is not created with create_schema = false: \
                         deploy template.yaml)"
                    )))
                }
                Err(err) => return Err(sdk_error("DescribeTable", err)),
            };
            check_key_schema(&spec, &name, &out)?;
            if name == self.tables.timers {
                self.note_due_index(&out);
            }
        }
        Ok(())
    }
}

/// Refuse an existing table whose keys are not `spec`'s: the same attribute names in the
/// same roles (partition, sort), of the same types. Both stores (ours and harel's) address
/// every item by these keys, so a table keyed otherwise cannot be shared; the message
/// names the table, what it has and what is needed. Other attributes and indexes are not
/// looked at (harel's tables have none of our optional additions).
fn check_key_schema(spec: &TableSpec, name: &str, out: &DescribeTableOutput) -> Result<(), StoreError> {
    let table = out.table();
    let types: HashMap<&str, &str> = table
        .map(|t| t.attribute_definitions())
        .unwrap_or_default()
        .iter()
        .map(|d| (d.attribute_name(), d.attribute_type().as_str()))
        .collect();
    let mut found: Vec<(String, &str, String)> = table
        .map(|t| t.key_schema())
        .unwrap_or_default()
        .iter()
        .map(|k| {
            let role = if k.key_type() == &DdbKeyType::Hash {
                "HASH"
            } else {
                "RANGE"
            };
            let ty = types.get(k.attribute_name()).copied().unwrap_or("?");
            (k.attribute_name().to_string(), role, ty.to_string())
        })
        .collect();
    found.sort_by_key(|(_, role, _)| *role != "HASH");
    let want: Vec<(String, &str, String)> = spec
        .keys()
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let role = if i == 0 { "HASH" } else { "RANGE" };
            (k.name.to_string(), role, k.ty.as_str().to_string())
        })
        .collect();
    if found == want {
        return Ok(());
    }
    let show = |keys: &[(String, &str, String)]| {
        if keys.is_empty() {
            return "no keys".to_string();
        }
        keys.iter()
            .map(|(n, role, ty)| format!("{n} ({role}, {ty})"))
            .collect::<Vec<_>>()
            .join(" + ")
    };
    Err(StoreError::backend(format!(
        "table {name} exists with the key schema {} but stm and harel 0.9.0 key it by {}: \
         delete it or use another table prefix (--prefix, STM_TABLE_PREFIX)",
        show(&found),
        show(&want)
    )))
}

fn key_element(key: KeyAttr, role: DdbKeyType) -> Result<KeySchemaElement, StoreError> {
    KeySchemaElement::builder()
        .attribute_name(key.name)
        .key_type(role)
        .build()
        .map_err(build_err)
}

/// Whether every global secondary index in a `DescribeTable` answer is `ACTIVE`.
fn out_indexes_active(out: &aws_sdk_dynamodb::operation::describe_table::DescribeTableOutput) -> bool {
    out.table().is_none_or(|t| {
        t.global_secondary_indexes()
            .iter()
            .all(|g| g.index_status().is_none_or(|s| *s == IndexStatus::Active))
    })
}
