//! Migration: move an execution, with its region children, to another deployed version
//! of its machine, in one CAS commit per execution.
//!
//! Every state path the executions hold (the active state, the history, the regions'
//! roots, the armed timers') must exist in the target version, directly or through a
//! [`PathMap`]; otherwise nothing is written and the refusal names each path. An
//! invoked child runs another machine and keeps its own pin.

use stm_core::version::Version;
use stm_core::{Execution, Map, Value};
use stm_store::{Commit, TimerOp};

use super::{control_step, Control, ControlError, RETRIES};

/// `OLD.PATH=NEW.PATH` renames between two versions. A composite's entry covers the
/// states below it (`Payment=Billing` maps `Payment.Card` to `Billing.Card`); the
/// longest matching entry wins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathMap(Vec<(String, String)>);

impl PathMap {
    pub fn new() -> Self {
        PathMap::default()
    }

    /// The map with `old` renamed to `new`.
    pub fn with(mut self, old: impl Into<String>, new: impl Into<String>) -> Self {
        self.0.push((old.into(), new.into()));
        self
    }

    /// One `OLD.PATH=NEW.PATH` argument.
    pub fn parse_entry(spec: &str) -> Result<(String, String), String> {
        match spec.split_once('=') {
            Some((old, new)) if !old.trim().is_empty() && !new.trim().is_empty() => {
                Ok((old.trim().to_string(), new.trim().to_string()))
            }
            _ => Err(format!(
                "--map {spec:?}: write it OLD.PATH=NEW.PATH (a state path on each side)"
            )),
        }
    }

    /// `path` in the target version's terms.
    pub fn apply(&self, path: &str) -> String {
        let best = self
            .0
            .iter()
            .filter(|(old, _)| path == old || path.starts_with(&format!("{old}.")))
            .max_by_key(|(old, _)| old.len());
        match best {
            Some((old, new)) => format!("{new}{}", &path[old.len()..]),
            None => path.to_string(),
        }
    }

    fn to_json(&self) -> Value {
        Value::Object(
            self.0
                .iter()
                .map(|(o, n)| (o.clone(), Value::from(n.as_str())))
                .collect(),
        )
    }
}

/// What a migration did (or, in a dry run, would do) to one execution.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Migration {
    pub execution_id: String,
    pub from_version: Option<Version>,
    pub to_version: Version,
    /// Every path that changed, old to new (the active state, history, regions, timers).
    pub moved: Vec<(String, String)>,
}

/// Why a migration cannot be done as asked: nothing was written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MigrationRefusal {
    /// The target version is neither this deploy's current one nor a retained one.
    #[error(
        "version {version} of {definition_id} is not deployed here: freeze it into versions/ \
         (`stm versions freeze`) or pick one `stm versions in-use` lists"
    )]
    NotDeployed { definition_id: String, version: Version },
    /// State paths the executions hold that the target version lacks, even through the map.
    #[error(
        "cannot migrate {execution_id} to {version}: {}; map each with --map OLD.PATH=NEW.PATH",
        unmapped.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    Unmapped {
        execution_id: String,
        version: Version,
        unmapped: Vec<UnmappedPath>,
    },
}

/// A state path of an execution that is not a state of the target version.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnmappedPath {
    /// The execution (the root or one of its regions) that holds it.
    pub execution_id: String,
    /// Where it holds it: the active state, a history entry, a region.
    pub what: &'static str,
    pub path: String,
    /// The path the map made of it, when the map covers it.
    pub mapped: Option<String>,
}

impl std::fmt::Display for UnmappedPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} {}", self.execution_id, self.what, self.path)?;
        if let Some(new) = &self.mapped {
            write!(f, " (mapped to {new})")?;
        }
        f.write_str(" is not a state of it")
    }
}

/// One execution's planned move: it as it will be written, and its timer changes.
struct Planned {
    exe: Execution,
    migration: Migration,
    timers: Vec<TimerOp>,
}

impl Control {
    /// Move execution `id` and its region children to version `to_version` of their
    /// machine, which this deploy must have (current or retained), rewriting their paths
    /// through `map`. A dry run checks and reports without writing. Each execution is
    /// one CAS commit that also records a `Migrate` step in its trace.
    pub async fn migrate(
        &self,
        id: &str,
        to_version: Version,
        map: &PathMap,
        dry_run: bool,
    ) -> Result<Vec<Migration>, ControlError> {
        stm_aws::as_function("operator", async {
            for _ in 0..RETRIES {
                let plans = self.plan_migration(id, to_version, map).await?;
                if dry_run {
                    return Ok(plans.into_iter().map(|p| p.migration).collect());
                }
                match self.commit_migration(plans, map).await {
                    Ok(done) => return Ok(done),
                    Err(e) if e.is_conflict() => continue,
                    Err(e) => return Err(e),
                }
            }
            Err(ControlError::Store(stm_store::StoreError::retryable(format!(
                "migrate {id}: still conflicting after {RETRIES} attempts"
            ))))
        })
        .await
    }

    async fn plan_migration(
        &self,
        id: &str,
        to_version: Version,
        map: &PathMap,
    ) -> Result<Vec<Planned>, ControlError> {
        let root = self.load(id).await?;
        let target = self
            .driver
            .definitions
            .get_version(&root.definition_id, to_version)
            .cloned()
            .ok_or_else(|| MigrationRefusal::NotDeployed {
                definition_id: root.definition_id.clone(),
                version: to_version,
            })?;
        // the root, then its region children (recursively): they run the same machine
        let mut executions = vec![root];
        let mut next = 0;
        while next < executions.len() {
            let regions = self.driver.live_regions(&executions[next]).await?;
            executions.extend(regions);
            next += 1;
        }
        let mut plans = Vec::new();
        let mut unmapped = Vec::new();
        for exe in executions {
            match self.plan_one(exe, &target, to_version, map).await? {
                Ok(plan) => plans.push(plan),
                Err(paths) => unmapped.extend(paths),
            }
        }
        if !unmapped.is_empty() {
            return Err(MigrationRefusal::Unmapped {
                execution_id: id.to_string(),
                version: to_version,
                unmapped,
            }
            .into());
        }
        Ok(plans)
    }

    /// One execution's move, or every path of it the target lacks.
    async fn plan_one(
        &self,
        mut exe: Execution,
        target: &stm_core::Definition,
        to_version: Version,
        map: &PathMap,
    ) -> Result<Result<Planned, Vec<UnmappedPath>>, ControlError> {
        let mut moved = Vec::new();
        let mut missing = Vec::new();
        let exe_id = exe.id.clone();
        let mut place = |what: &'static str, path: &str, must_exist: bool| -> String {
            let new = map.apply(path);
            if must_exist && target.get(&new).is_none() {
                missing.push(UnmappedPath {
                    execution_id: exe_id.clone(),
                    what,
                    path: path.to_string(),
                    mapped: (new != path).then(|| new.clone()),
                });
            }
            if new != path {
                moved.push((path.to_string(), new.clone()));
            }
            new
        };
        let old_active = exe.active_path.clone();
        if let Some(active) = &old_active {
            exe.active_path = Some(place("the active state", active, true));
        }
        if !exe.root_path.is_empty() {
            exe.root_path = place("the region", &exe.root_path.clone(), true);
        }
        exe.history = std::mem::take(&mut exe.history)
            .into_iter()
            .map(|(composite, child)| {
                (
                    place("the history entry of", &composite, true),
                    place("the history entry", &child, true),
                )
            })
            .collect();
        for state in exe.children.values_mut() {
            if !state.submachine {
                state.root_path = place("the region", &state.root_path.clone(), !state.finished);
            }
        }
        for join in &mut exe.joins {
            join.site = place("the fan-out", &join.site.clone(), false);
        }
        exe.invoke_seq = std::mem::take(&mut exe.invoke_seq)
            .into_iter()
            .map(|(site, n)| (place("the invoke", &site, false), n))
            .collect();
        if !missing.is_empty() {
            return Ok(Err(missing));
        }
        // a renamed state's armed timer moves with it (a timer sits on the active state
        // or one of its ancestors)
        let mut timers = Vec::new();
        if let Some(active) = &old_active {
            let mut path = active.as_str();
            loop {
                let new = map.apply(path);
                if new != path {
                    if let Some(fire_at) = self.driver.store.armed_timer(&exe.id, path).await? {
                        timers.push(TimerOp::Cancel {
                            path: path.to_string(),
                        });
                        timers.push(TimerOp::Schedule { path: new, fire_at });
                    }
                }
                match path.rfind('.') {
                    Some(dot) => path = &path[..dot],
                    None => break,
                }
            }
        }
        moved.sort();
        moved.dedup();
        let migration = Migration {
            execution_id: exe.id.clone(),
            from_version: exe.definition_version,
            to_version,
            moved,
        };
        exe.definition_version = Some(to_version);
        Ok(Ok(Planned {
            exe,
            migration,
            timers,
        }))
    }

    async fn commit_migration(
        &self,
        plans: Vec<Planned>,
        map: &PathMap,
    ) -> Result<Vec<Migration>, ControlError> {
        let now = self.driver.clock.now();
        let mut done = Vec::new();
        for Planned {
            mut exe,
            migration,
            timers,
        } in plans
        {
            let mut data = Map::new();
            data.insert(
                "from_version".into(),
                migration
                    .from_version
                    .map_or(Value::Null, |v| Value::from(v.to_string())),
            );
            data.insert("to_version".into(), Value::from(migration.to_version.to_string()));
            data.insert("map".into(), map.to_json());
            let from_path = exe.active_path.as_deref().map(|p| {
                migration
                    .moved
                    .iter()
                    .find(|(_, new)| new == p)
                    .map_or(p.to_string(), |(old, _)| old.clone())
            });
            let step = control_step("migrate", exe.status, from_path, &exe, now, data);
            exe.stamp(now);
            let commit = Commit {
                timers,
                traces: vec![step],
                ..Commit::default()
            };
            self.driver.store.commit(&mut exe, commit).await?;
            tracing::info!(
                execution_id = %migration.execution_id,
                from = %migration.from_version.map_or("unpinned".to_string(), |v| v.to_string()),
                to = %migration.to_version,
                moved = migration.moved.len(),
                "execution migrated"
            );
            done.push(migration);
        }
        Ok(done)
    }
}
