//! Why an event does what it does: [`engine::explain`] on the executions the driver would
//! step with it, before it steps them. Read-only: nothing is written and no action runs.

use stm_core::engine::{self, Explanation};
use stm_core::{Event, Execution};

use super::plan::{route, Arrival, Plan};
use super::{Driver, DriverError};

impl Driver {
    /// The explanation of `event` for each execution [`process`](Driver::process) would
    /// step with it, as `exe` (the stored execution, before the step) stands: `exe` itself,
    /// or, for a domain event broadcast to live regions, each region (its id first).
    /// Empty when `exe`'s version is not deployed (the event would be parked, not stepped).
    pub async fn explain(
        &self,
        exe: &Execution,
        event: &Event,
    ) -> Result<Vec<(String, Explanation)>, DriverError> {
        if self.definition_if_deployed(exe)?.is_none() {
            return Ok(Vec::new());
        }
        let targets = match route(Arrival::Caller, exe, event) {
            Plan::Broadcast { .. } => self.live_regions(exe).await?,
            _ => vec![exe.clone()],
        };
        let mut out = Vec::with_capacity(targets.len());
        for target in targets {
            let defn = self.definition_for(&target)?;
            out.push((target.id.clone(), engine::explain(&defn, &target, event)));
        }
        Ok(out)
    }
}
