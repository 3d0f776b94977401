//! The recorded executions a replay reads: from a purge archive (the JSONL `stm purge
//! --archive` writes, one purged tree a line) or from a deployment's tables.

use std::io::BufRead as _;
use std::path::Path;

use anyhow::Result;
use stm_core::{pyjson, Execution, Map, Value};

use crate::errors::usage;

/// One execution as it was recorded: the execution as stored (its last state) and its
/// trace steps, oldest first (empty: it was not traced).
#[derive(Debug)]
pub struct Recorded {
    pub execution: Execution,
    pub steps: Vec<Map>,
}

/// Which executions to read: those of a machine `wanted` accepts, at most `limit`.
pub struct Selection<'a> {
    pub wanted: &'a dyn Fn(&str) -> bool,
    pub limit: Option<usize>,
}

impl Selection<'_> {
    fn full(&self, read: usize) -> bool {
        self.limit.is_some_and(|limit| read >= limit)
    }
}

/// The archive's executions (every member of every purged tree) that `selection` wants,
/// with their traces, in the file's order.
pub fn from_archive(file: &Path, selection: &Selection<'_>) -> Result<Vec<Recorded>> {
    let name = file.display();
    let opened = std::fs::File::open(file).map_err(|e| usage(format!("cannot read {name}: {e}")))?;
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(opened).lines().enumerate() {
        let line = line.map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => usage(format!(
                "{name}:{}: not a purge archive: not UTF-8 text ({ARCHIVE_SHAPE})",
                n + 1
            )),
            _ => usage(format!("cannot read {name}: {e}")),
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let bundle = Bundle::parse(&line).map_err(|why| {
            usage(format!(
                "{name}:{}: not a purge archive: {why} ({ARCHIVE_SHAPE})",
                n + 1
            ))
        })?;
        for execution in bundle.executions {
            if !(selection.wanted)(&execution.definition_id) {
                continue;
            }
            let steps = bundle.traces.get(&execution.id).cloned().unwrap_or_default();
            out.push(Recorded { execution, steps });
            if selection.full(out.len()) {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

/// What a line of a purge archive is, said in each error about one.
const ARCHIVE_SHAPE: &str = "`stm purge --archive FILE` writes one JSON object a line, with root_id, \
                             executions and traces";

/// One archive line: a purged tree (`stm_runtime::purge::Bundle`'s line).
struct Bundle {
    executions: Vec<Execution>,
    traces: std::collections::HashMap<String, Vec<Map>>,
}

impl Bundle {
    fn parse(line: &str) -> Result<Bundle, String> {
        let Value::Object(mut line) = pyjson::loads(line).map_err(|e| format!("not JSON: {e}"))? else {
            return Err("not a JSON object".into());
        };
        if !line.get("root_id").is_some_and(Value::is_string) {
            return Err("no root_id".into());
        }
        let Some(Value::Array(members)) = line.remove("executions") else {
            return Err("no executions list".into());
        };
        let Some(Value::Object(traces)) = line.remove("traces") else {
            return Err("no traces object".into());
        };
        let mut executions = Vec::with_capacity(members.len());
        for (i, member) in members.into_iter().enumerate() {
            let exe: Execution = serde_json::from_value(member)
                .map_err(|e| format!("executions[{i}] is not an execution: {e}"))?;
            executions.push(exe);
        }
        let mut by_id = std::collections::HashMap::new();
        for (id, steps) in traces {
            let Value::Array(steps) = steps else {
                return Err(format!("the trace of {id} is not a list"));
            };
            let steps = steps
                .into_iter()
                .map(|s| match s {
                    Value::Object(step) => Ok(step),
                    _ => Err(format!("a step of the trace of {id} is not an object")),
                })
                .collect::<Result<Vec<Map>, String>>()?;
            by_id.insert(id, steps);
        }
        Ok(Bundle {
            executions,
            traces: by_id,
        })
    }
}

/// The deployment's executions that `selection` wants (of `machine` only, if given),
/// each loaded with its trace, in the listing's order.
#[cfg(feature = "aws")]
pub async fn from_store(
    tables: &crate::ops::Tables,
    machine: Option<&str>,
    selection: &Selection<'_>,
) -> Result<Vec<Recorded>> {
    use stm_store::{ExecutionStore, ListQuery};
    let store = tables.store(false).await?;
    let mut query = ListQuery {
        definition_id: machine.map(str::to_string),
        limit: 100,
        ..ListQuery::default()
    };
    let mut out = Vec::new();
    loop {
        let page = store.list_executions(&query).await?;
        for summary in page.items.iter().filter(|s| (selection.wanted)(&s.definition_id)) {
            // listed, then gone (a purge, a ttl): nothing to replay
            let Some(execution) = store.load(&summary.id).await? else {
                continue;
            };
            let steps = store.read_trace(&summary.id).await?;
            out.push(Recorded { execution, steps });
            if selection.full(out.len()) {
                return Ok(out);
            }
        }
        match page.next_cursor {
            Some(cursor) => query.cursor = Some(cursor),
            None => return Ok(out),
        }
    }
}
