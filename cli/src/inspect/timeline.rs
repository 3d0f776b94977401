//! An execution's timeline as `stm trace` prints it: its own trace and its regions'
//! (read from the store), merged in time order, one line per step.

use anyhow::Result;
use serde_json::Value;
use stm_core::{Execution, Map};
use stm_store::ExecutionStore;

use super::gather::MAX_TREE_NODES;

/// The most region executions `stm trace` reads into one timeline (an orthogonal state
/// re-entered in a loop leaves a new set of regions each time).
pub(crate) const MAX_TRACE_REGIONS: usize = MAX_TREE_NODES;

/// One step of an execution's timeline as `stm trace` prints it: a trace record, and the
/// region execution that recorded it (`None`: the execution asked for).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TimelineStep {
    pub region: Option<String>,
    pub record: Map,
}

/// The traces of `exe`'s regions, and of their regions in turn, read from the store.
#[derive(Debug, Default)]
pub(crate) struct RegionTraces {
    /// `(region id, its trace)`, depth first, in the order the parents list them.
    pub traces: Vec<(String, Vec<Map>)>,
    /// The region executions read (what explaining their steps needs).
    pub regions: Vec<Execution>,
    /// Regions not read: [`MAX_TRACE_REGIONS`] were read already.
    pub left_out: usize,
}

/// Read the traces of the regions under `exe` (regions only: an invoked machine is
/// another statechart with a timeline of its own, as in [`region_paths`](super::children::region_paths)).
pub(crate) async fn region_traces(store: &dyn ExecutionStore, exe: &Execution) -> Result<RegionTraces> {
    let mut out = RegionTraces::default();
    let mut budget = MAX_TRACE_REGIONS;
    collect_region_traces(store, exe, &mut budget, &mut out).await?;
    Ok(out)
}

async fn collect_region_traces(
    store: &dyn ExecutionStore,
    exe: &Execution,
    budget: &mut usize,
    out: &mut RegionTraces,
) -> Result<()> {
    for (cid, _) in exe.children.iter().filter(|(_, cs)| !cs.submachine) {
        if *budget == 0 {
            out.left_out += 1;
            continue;
        }
        *budget -= 1;
        // a region whose spawn is still on its way, or that was purged, has no steps
        let Some(region) = store.load(cid).await? else {
            continue;
        };
        out.traces.push((cid.clone(), store.read_trace(cid).await?));
        // a boxed future: regions nest
        Box::pin(collect_region_traces(store, &region, budget, out)).await?;
        out.regions.push(region);
    }
    Ok(())
}

/// An execution's own trace and its regions' merged into one timeline, in time order.
///
/// Why merge here rather than record more: a domain event for an execution with live
/// regions is broadcast to them, and harel's broadcast commit writes no trace step on the
/// parent (its `_broadcast_step` goes to the step log, `trace=None`); each region records
/// its own step on its own trace. The trace table stays harel's, row for row (the
/// conformance suite compares it with harel's), so `stm trace` reads the regions' rows
/// too: the user then sees every step the worker's log shows, the broadcasts included.
///
/// Each trace keeps its own order (its index order, whatever the clocks say); between
/// traces, the earlier timestamp goes first, the execution's own step first on a tie. A
/// step without a timestamp counts as at its predecessor's.
pub(crate) fn timeline(own: Vec<Map>, regions: Vec<(String, Vec<Map>)>) -> Vec<TimelineStep> {
    let mut sources: Vec<(Option<String>, std::iter::Peekable<std::vec::IntoIter<Map>>, f64)> =
        std::iter::once((None, own))
            .chain(regions.into_iter().map(|(id, steps)| (Some(id), steps)))
            .map(|(region, steps)| (region, steps.into_iter().peekable(), f64::NEG_INFINITY))
            .collect();
    let mut merged = Vec::new();
    loop {
        let mut next: Option<(usize, f64)> = None;
        for (at, (_, steps, last)) in sources.iter_mut().enumerate() {
            let Some(step) = steps.peek() else {
                continue;
            };
            let when = step.get("timestamp").and_then(Value::as_f64).unwrap_or(*last);
            if next.is_none_or(|(_, best)| when.total_cmp(&best).is_lt()) {
                next = Some((at, when));
            }
        }
        let Some((at, when)) = next else {
            return merged;
        };
        let (region, steps, last) = &mut sources[at];
        *last = when;
        if let Some(record) = steps.next() {
            merged.push(TimelineStep {
                region: region.clone(),
                record,
            });
        }
    }
}

/// One line of `stm trace`: the step's index, its time since `first` (seconds since the
/// epoch), the event and its data, the transition and the actions it ran. A region's step
/// names the region in place of the index column (with the region's own index), as the
/// log names the execution of each step:
///
/// ```text
/// #1    +    0.217s  Checkout  Cart -> Fulfil
///       +    0.301s  co-1:Fulfil.Payment:0 #1  Charged  Fulfil.Payment.Charging -> Fulfil.Payment.Paid
/// ```
pub(crate) fn trace_line(step: &TimelineStep, first: f64) -> String {
    let record = &step.record;
    let get = |k: &str| record.get(k).cloned().unwrap_or(Value::Null);
    let text = |k: &str| match get(k) {
        Value::String(s) => s,
        Value::Null => "-".to_string(),
        other => other.to_string(),
    };
    let at = get("timestamp").as_f64().unwrap_or(first) - first;
    let data = match get("event_data") {
        Value::Object(m) if !m.is_empty() => format!(" {}", Value::Object(m)),
        _ => String::new(),
    };
    let actions = match get("actions") {
        Value::Array(a) if !a.is_empty() => {
            format!(
                "  actions: {}",
                a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")
            )
        }
        _ => String::new(),
    };
    let (index, region) = match &step.region {
        None => (format!("#{:<4}", text("index")), String::new()),
        Some(id) => (" ".repeat(5), format!("{id} #{}  ", text("index"))),
    };
    format!(
        "{index} +{at:>9.3}s  {region}{}{data}  {} -> {}{actions}",
        text("event_kind"),
        text("from_path"),
        text("to_path"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::map;
    use serde_json::json;

    fn step(index: i64, kind: &str, from: &str, to: &str, at: Option<f64>) -> Map {
        let mut record = map(json!({"index": index, "event_kind": kind, "event_data": {},
            "from_path": from, "to_path": to, "actions": [], "context_out": {}}));
        if let Some(at) = at {
            record.insert("timestamp".into(), json!(at));
        }
        record
    }

    fn who_did_what(merged: &[TimelineStep]) -> Vec<(Option<&str>, &str)> {
        merged
            .iter()
            .map(|s| {
                (
                    s.region.as_deref(),
                    s.record.get("event_kind").and_then(Value::as_str).unwrap_or("?"),
                )
            })
            .collect()
    }

    #[test]
    fn the_timeline_puts_the_regions_steps_between_the_parents_in_time_order() {
        let parent = vec![
            step(0, "Start", "-", "Cart", Some(10.0)),
            step(1, "Checkout", "Cart", "Fulfil", Some(11.0)),
            step(2, "Finished", "Fulfil", "Fulfil", Some(13.0)),
            step(3, "Finished", "Fulfil", "Confirmed", Some(15.0)),
        ];
        let payment = vec![
            step(0, "Start", "-", "Fulfil.Payment.Charging", Some(11.1)),
            step(
                1,
                "Charged",
                "Fulfil.Payment.Charging",
                "Fulfil.Payment.Paid",
                Some(12.0),
            ),
        ];
        let stock = vec![
            step(0, "Start", "-", "Fulfil.Stock.Reserving", Some(11.2)),
            step(
                1,
                "Charged",
                "Fulfil.Stock.Reserving",
                "Fulfil.Stock.Reserving",
                Some(12.1),
            ),
            step(
                2,
                "Reserved",
                "Fulfil.Stock.Reserving",
                "Fulfil.Stock.Held",
                Some(14.0),
            ),
        ];
        let merged = timeline(
            parent,
            vec![("co-1:P".to_string(), payment), ("co-1:S".to_string(), stock)],
        );
        assert_eq!(
            who_did_what(&merged),
            [
                (None, "Start"),
                (None, "Checkout"),
                (Some("co-1:P"), "Start"),
                (Some("co-1:S"), "Start"),
                (Some("co-1:P"), "Charged"),
                (Some("co-1:S"), "Charged"),
                (None, "Finished"),
                (Some("co-1:S"), "Reserved"),
                (None, "Finished"),
            ]
        );
    }

    #[test]
    fn the_timeline_keeps_each_traces_own_order_whatever_its_clock_says() {
        // a region's clock behind (another Lambda's): its steps still keep their order,
        // a step without a timestamp stays after its predecessor, and a tie goes to the parent
        let parent = vec![
            step(0, "Start", "-", "A", Some(5.0)),
            step(1, "Go", "A", "B", Some(7.0)),
        ];
        let region = vec![
            step(0, "Start", "-", "B.R.X", Some(7.0)),
            step(1, "Late", "B.R.X", "B.R.Y", Some(6.0)),
            step(2, "Untimed", "B.R.Y", "B.R.Z", None),
        ];
        let merged = timeline(parent, vec![("r".to_string(), region)]);
        assert_eq!(
            who_did_what(&merged),
            [
                (None, "Start"),
                (None, "Go"),
                (Some("r"), "Start"),
                (Some("r"), "Late"),
                (Some("r"), "Untimed"),
            ]
        );
        assert!(timeline(Vec::new(), Vec::new()).is_empty());
    }

    #[test]
    fn a_trace_line_names_the_region_of_a_regions_step() {
        let mut own = step(1, "Checkout", "Cart", "Fulfil", Some(10.25));
        own.insert("actions".into(), json!(["charge", "reserve"]));
        let line = trace_line(
            &TimelineStep {
                region: None,
                record: own,
            },
            10.0,
        );
        assert_eq!(
            line,
            "#1    +    0.250s  Checkout  Cart -> Fulfil  actions: charge, reserve"
        );
        let mut charged = step(
            1,
            "Charged",
            "Fulfil.Payment.Charging",
            "Fulfil.Payment.Paid",
            Some(11.5),
        );
        charged.insert("event_data".into(), json!({"receipt": "r-1"}));
        let region = TimelineStep {
            region: Some("co-1:Fulfil.Payment:0".into()),
            record: charged,
        };
        assert_eq!(
            trace_line(&region, 10.0),
            "      +    1.500s  co-1:Fulfil.Payment:0 #1  Charged {\"receipt\":\"r-1\"}  \
             Fulfil.Payment.Charging -> Fulfil.Payment.Paid"
        );
        // a record missing its fields still prints (a harel row, a foreign writer)
        let bare = TimelineStep {
            region: None,
            record: Map::new(),
        };
        assert_eq!(trace_line(&bare, 3.0), "#-    +    0.000s  -  - -> -");
    }
}
