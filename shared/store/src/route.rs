//! Aliases and routing: which deployed version a new execution of a machine starts on.
//!
//! Each machine has one alias, [`ALIAS`]. Without a route, a new execution starts on the
//! current version (the `.stm` files deployed); with one, on the route's `primary`, or on
//! its `canary` for `weight` percent of new executions, picked by a stable hash of the
//! execution's id ([`bucket`]): the same id always lands on the same side, whoever
//! creates it. An execution keeps the version it started on; a child follows its parent's.
//!
//! Every machine's route lives in one item ([`Routes`], key [`ROUTES_KEY`] of the
//! `counters` table), written only by an operator's `stm versions route` and by a
//! rollback, each guarded by its `generation`; creators read it through a cache of a
//! second (see the runtime's `rollout` module), so its reads per second are bounded by the
//! processes that create executions, not by the executions.
//!
//! **Tallies** count the canary's finished executions, and how many of them FAILED, for
//! the rollback: in tumbling windows of a configured length, each window in
//! [`TALLY_SHARDS`] items (an execution's [`shard_of`]), so no single key takes every
//! finish (DynamoDB serves 1,000 write units a second per key). They are added with `ADD`
//! when a finished execution's status event is delivered: at least once, so a delivery
//! repeated after a crash counts that execution twice, which can only make a rollback
//! come sooner.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use stm_core::version::Version;

/// The alias every machine has.
pub const ALIAS: &str = "live";
/// The key of the item that holds every machine's route (in the `counters` table).
pub const ROUTES_KEY: &str = "routes";
/// The items one window's tally is spread over.
pub const TALLY_SHARDS: u32 = 16;

/// Every machine's route, and the generation the next write must find.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Routes {
    /// machine id -> its alias's route
    #[serde(default)]
    pub machines: BTreeMap<String, Route>,
    /// Bumped by every write: a write names the generation it read, and loses to any
    /// write since.
    #[serde(default)]
    pub generation: u64,
}

impl Routes {
    /// The route of `machine`, if it has one.
    pub fn get(&self, machine: &str) -> Option<&Route> {
        self.machines.get(machine)
    }

    /// The version a new execution `execution_id` of `machine` starts on: `None` without
    /// a route (the current version, as without aliases).
    pub fn version_for(&self, machine: &str, execution_id: &str) -> Option<Version> {
        self.get(machine).map(|route| route.pick(execution_id))
    }

    /// Whether `version` of `machine` is its route's canary with a share of new
    /// executions (what the tallies count).
    pub fn is_canary(&self, machine: &str, version: Version) -> bool {
        self.get(machine)
            .and_then(|r| r.canary.as_ref())
            .is_some_and(|c| c.version == version && c.weight > 0)
    }
}

/// One machine's alias: the primary version, and at most one canary with its share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// What the alias serves, less the canary's share.
    pub primary: Version,
    /// The second version and its share of new executions.
    #[serde(default)]
    pub canary: Option<Canary>,
    /// The last rollback, kept to be shown and announced.
    #[serde(default)]
    pub rolled_back: Option<RollBack>,
}

impl Route {
    /// A route serving `primary` alone.
    pub fn to(primary: Version) -> Self {
        Route {
            primary,
            canary: None,
            rolled_back: None,
        }
    }

    /// The version of a new execution `execution_id`: the canary's when its [`bucket`] is
    /// under the canary's weight, else the primary.
    pub fn pick(&self, execution_id: &str) -> Version {
        match &self.canary {
            Some(canary) if bucket(execution_id) < canary.weight => canary.version,
            _ => self.primary,
        }
    }
}

/// The second version of a route.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Canary {
    pub version: Version,
    /// Percent of new executions, 0 to 99 (0: none, as a rollback leaves it).
    pub weight: u8,
    /// When the weight was set (seconds since the epoch): tallies before it are not its.
    pub since: f64,
    /// The length of the windows its tally is counted in, as the deployment's sweeper
    /// last recorded it (`None` until then): what a reader of the tally needs, and the
    /// operator's shell does not have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<u64>,
}

/// A canary whose weight went back to 0 on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RollBack {
    pub version: Version,
    /// The weight it had.
    pub weight: u8,
    pub at: f64,
    /// What decided it: finished executions in the window, and how many FAILED.
    pub finished: u64,
    pub failed: u64,
    /// Whether its status event is on the bus (a crash between the rollback and the
    /// event leaves it `false`, and the next evaluation sends it).
    #[serde(default)]
    pub announced: bool,
}

/// 64-bit FNV-1a of `text`, then MurmurHash3's finalizer: stable across processes,
/// versions and platforms (the standard library's hashers are seeded per process). The
/// finalizer spreads every input bit over the high bits too: FNV-1a's own high bits barely
/// move between ids that differ in their last characters, and [`shard_of`] reads them.
fn stable_hash(text: &str) -> u64 {
    let mut x = text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash: u64, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The execution's place in 0..100, which a canary of weight `w` takes when under `w`.
///
/// ```
/// use stm_store::route::bucket;
/// assert_eq!(bucket("order-1"), bucket("order-1"));
/// assert!(bucket("order-2") < 100);
/// ```
pub fn bucket(execution_id: &str) -> u8 {
    (stable_hash(execution_id) % 100) as u8
}

/// The tally shard of an execution: other bits of its hash than [`bucket`]'s, so the
/// canary's executions spread over every shard.
pub fn shard_of(execution_id: &str) -> u32 {
    ((stable_hash(execution_id) >> 32) % u64::from(TALLY_SHARDS)) as u32
}

/// The window that holds `now`, of windows `seconds` long.
pub fn window_of(now: f64, seconds: u64) -> i64 {
    (now / seconds.max(1) as f64).floor() as i64
}

/// The key of one shard of one window's tally of `version` of `machine`. The window's
/// length is in the key: a changed length never adds to another's windows.
pub fn tally_key(machine: &str, version: Version, seconds: u64, window: i64, shard: u32) -> String {
    format!("tally#{machine}#{version}#{seconds}s{window}#{shard}")
}

/// Every shard key of the windows `windows`.
pub fn tally_keys(machine: &str, version: Version, seconds: u64, windows: &[i64]) -> Vec<String> {
    windows
        .iter()
        .flat_map(|w| (0..TALLY_SHARDS).map(move |s| tally_key(machine, version, seconds, *w, s)))
        .collect()
}

/// Finished executions and how many of them FAILED.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub finished: u64,
    pub failed: u64,
}

impl Tally {
    /// FAILED among finished, 0 to 1 (0 with none finished).
    pub fn failure_rate(&self) -> f64 {
        if self.finished == 0 {
            0.0
        } else {
            self.failed as f64 / self.finished as f64
        }
    }

    pub fn add(&mut self, other: Tally) {
        self.finished += other.finished;
        self.failed += other.failed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: u64) -> Version {
        format!("{n:016x}").parse().expect("a version")
    }

    #[test]
    fn a_canary_takes_about_its_weight_and_the_same_ids_every_time() {
        let mut route = Route::to(v(1));
        route.canary = Some(Canary {
            version: v(2),
            weight: 10,
            since: 0.0,
            window_seconds: None,
        });
        let ids: Vec<String> = (0..10_000).map(|i| format!("order-{i}")).collect();
        let canary = ids.iter().filter(|id| route.pick(id) == v(2)).count();
        assert!((800..1200).contains(&canary), "{canary} of 10,000 at weight 10");
        assert!(ids.iter().all(|id| route.pick(id) == route.pick(id)));
        route.canary.as_mut().expect("canary").weight = 0;
        assert!(ids.iter().all(|id| route.pick(id) == v(1)));
    }

    #[test]
    fn tallies_spread_over_every_shard() {
        let mut seen = [0u32; TALLY_SHARDS as usize];
        for i in 0..2_000 {
            seen[shard_of(&format!("e-{i}")) as usize] += 1;
        }
        assert!(seen.iter().all(|n| *n > 60), "{seen:?}");
    }

    #[test]
    fn routes_read_back_as_written() {
        let mut routes = Routes::default();
        routes.machines.insert("Order".into(), Route::to(v(7)));
        routes.generation = 3;
        let text = serde_json::to_string(&routes).expect("json");
        assert_eq!(serde_json::from_str::<Routes>(&text).expect("back"), routes);
        assert_eq!(routes.version_for("Order", "x"), Some(v(7)));
        assert_eq!(routes.version_for("Other", "x"), None);
    }
}
