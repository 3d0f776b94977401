//! Where each machine's new executions go, as the operator's views show it (`stm versions
//! in-use` and `route`, `stm monitor`, `stm ui`): its alias's route, and for a canary its
//! tally over the rollback's windows (bounded: two windows' 32 items, not a listing).

use stm_core::version::Version;
use stm_runtime::rollout::RolloutPolicy;
use stm_runtime::Definitions;
use stm_store::route::{tally_keys, Route, ALIAS};
use stm_store::{ExecutionStore, Tally};

/// Each routed machine: its route's line, and for a canary with a share, its finished and
/// FAILED executions in the current and the previous window. Empty without routes.
pub(crate) async fn lines(
    store: &dyn ExecutionStore,
    definitions: &Definitions,
) -> anyhow::Result<Vec<String>> {
    let routes = store.routes().await?;
    // the windows the deployment counts in (its STM_ROLLBACK_WINDOW_SECONDS, else the default)
    let policy = RolloutPolicy::from_lookup(
        |name| std::env::var(name).ok(),
        stm_runtime::status::StatusEvents::All,
    )
    .unwrap_or_default();
    let now = stm_runtime::Clock::now(&stm_runtime::SystemClock);
    let mut out = Vec::new();
    for (machine, route) in &routes.machines {
        let Some(current) = definitions.get(machine).and_then(|d| d.version) else {
            continue;
        };
        out.push(shown(machine, Some(route), current, definitions));
        if let Some(canary) = route.canary.as_ref().filter(|c| c.weight > 0) {
            // the deployment's windows, as its sweeper recorded them on the route; until
            // its first run, this shell's STM_ROLLBACK_WINDOW_SECONDS (else the default)
            let policy = RolloutPolicy {
                window_seconds: canary.window_seconds.unwrap_or(policy.window_seconds),
                ..policy
            };
            let keys = tally_keys(
                machine,
                canary.version,
                policy.window_seconds,
                &policy.windows(now),
            );
            let tally = store.tally(&keys).await?;
            out.push(format!(
                "  canary {}: {} finished, {} FAILED ({}) in the last {} s",
                canary.version,
                tally.finished,
                tally.failed,
                percent(&tally),
                2 * policy.window_seconds
            ));
        }
    }
    Ok(out)
}

/// `Order (alias live): 2f25f4c713d54788 90%, 337c95559abed70b 10% (v2)`, and the last
/// rollback if there was one.
pub(crate) fn shown(
    machine: &str,
    route: Option<&Route>,
    current: Version,
    definitions: &Definitions,
) -> String {
    let name = |v: Version| match definitions.label(v) {
        Some(label) => format!("{v} ({label})"),
        None => v.to_string(),
    };
    let Some(route) = route else {
        return format!(
            "{machine} (alias {ALIAS}): {} 100%, the current version (no route)",
            name(current)
        );
    };
    let mut line = match route.canary.as_ref().filter(|c| c.weight > 0) {
        Some(c) => format!(
            "{machine} (alias {ALIAS}): {} {}%, {} {}%",
            name(route.primary),
            100 - c.weight,
            name(c.version),
            c.weight
        ),
        None => format!("{machine} (alias {ALIAS}): {} 100%", name(route.primary)),
    };
    if let Some(rb) = &route.rolled_back {
        line.push_str(&format!(
            "\n  rolled back by itself: {} from {}% to 0% ({} of {} finished executions FAILED)",
            name(rb.version),
            rb.weight,
            rb.failed,
            rb.finished
        ));
    }
    line
}

/// FAILED among finished, as the views show it: `12.5%`.
pub(crate) fn percent(tally: &Tally) -> String {
    format!("{:.1}%", 100.0 * tally.failure_rate())
}
