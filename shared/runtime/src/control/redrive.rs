//! Redrive: a dead-lettered (FAILED) execution back to RUNNING at a leaf the operator
//! chooses, once the bug that failed it is fixed (harel 0.9.0's `redrive`).
//!
//! The rules are harel's: the target is a leaf in the execution's own branch, never inside
//! an orthogonal state (a single leaf cannot stand for a fork's regions); no child may be
//! unfinished (moving the parent would orphan it); the context is kept, the `error` and
//! the history are cleared (a cascade an `on exit` failure cut short leaves a partial
//! history), and the machine's `ttl` restarts. Anything but a FAILED execution is left
//! as it is. One CAS commit, checked again on every attempt against the record it writes.
//!
//! The `ttl` restarts on the worker's clock, not the operator's: a laptop's clock off by
//! an hour would otherwise end the execution an hour early or late. The redrive clears
//! `expires_at` and arms the recheck timer (`@parked`) at the failed step's time, due at
//! once by any clock near the functions'; the worker, handling the recheck, arms the
//! `ttl` from its own clock.

use stm_core::definition::NodeKind;
use stm_core::{engine, Definition, Execution, Status};
use stm_store::{Commit, TimerOp};

use super::{control_step, Control, ControlError, RETRIES};
use crate::driver::PARKED_PATH;

/// Why a target is not a place to redrive an execution to, in harel's words (its
/// `ValueError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedriveRefusal {
    /// The target is not a state, or not a leaf.
    #[error("redrive target must be a leaf state, got {}", repr(.target))]
    NotALeaf { target: String },
    /// The target is outside the execution's own branch (a region runs its own).
    #[error(
        "redrive target {} is outside this execution's own branch (rooted at {})",
        repr(.target),
        repr(.root)
    )]
    OutsideBranch { target: String, root: String },
    /// The target is inside an orthogonal state, whose regions a single leaf cannot stand for.
    #[error(
        "redrive target {} is inside orthogonal state {} — a single leaf can't represent a \
         fork's parallel regions; target a leaf before it instead, and let the model's own transition \
         re-fork it normally",
        repr(.target),
        repr(.orthogonal)
    )]
    InsideOrthogonal { target: String, orthogonal: String },
    /// A child is still running: moving the parent would orphan it.
    #[error("redrive refused: execution has unfinished children (cancel/terminate them first)")]
    UnfinishedChildren,
}

/// A state path as harel's messages quote it (Python's `repr`).
fn repr(path: &str) -> String {
    stm_core::pyvalue::repr(&stm_core::Value::from(path))
}

/// Why `target` is not a place to redrive `exe` to (`None`: it is).
pub(crate) fn redrive_refusal(defn: &Definition, exe: &Execution, target: &str) -> Option<RedriveRefusal> {
    let node = match defn.get(target) {
        Some(node) if !defn.node(node).is_composite() => node,
        _ => {
            return Some(RedriveRefusal::NotALeaf {
                target: target.to_string(),
            })
        }
    };
    let root = match defn.get(&exe.root_path) {
        Some(root) if defn.is_descendant(node, root) => root,
        _ => {
            return Some(RedriveRefusal::OutsideBranch {
                target: target.to_string(),
                root: exe.root_path.clone(),
            })
        }
    };
    for ancestor in defn.ancestors(node) {
        let n = defn.node(ancestor);
        if n.kind == NodeKind::Orthogonal {
            return Some(RedriveRefusal::InsideOrthogonal {
                target: target.to_string(),
                orthogonal: n.full_path.clone(),
            });
        }
        if ancestor == root {
            break;
        }
    }
    if exe.has_unfinished_children() {
        return Some(RedriveRefusal::UnfinishedChildren);
    }
    None
}

impl Control {
    /// Put FAILED execution `id` back to RUNNING at leaf `target` (`redrive_refusal`
    /// says why it cannot be). An execution in any other status is left as it is, as
    /// harel does. The next event or timer moves it on.
    pub async fn redrive(&self, id: &str, target: &str) -> Result<Status, ControlError> {
        stm_aws::as_function("operator", async {
            for _ in 0..RETRIES {
                let mut exe = self.load(id).await?;
                if exe.status != Status::Failed {
                    return Ok(exe.status);
                }
                let defn = self.driver.definition_for(&exe)?;
                if let Some(why) = redrive_refusal(&defn, &exe, target) {
                    return Err(why.into());
                }
                let (from_status, from_path) = (exe.status, exe.active_path.clone());
                let now = self.driver.clock.now();
                // the failed step's time, on a function's clock (the operator's if unknown)
                let failed_at = exe.updated_at.unwrap_or(now).min(now);
                exe.status = Status::Running;
                exe.active_path = Some(target.to_string());
                exe.error = None;
                exe.history.clear();
                let mut timers = Vec::new();
                if engine::ttl_delay(&defn, &exe).is_some() {
                    exe.expires_at = None;
                    timers.push(TimerOp::Schedule {
                        path: PARKED_PATH.into(),
                        fire_at: failed_at,
                    });
                }
                exe.stamp(now);
                let step = control_step("redrive", from_status, from_path, &exe, now, stm_core::Map::new());
                let commit = Commit {
                    timers,
                    traces: vec![step],
                    ..Commit::default()
                };
                match self.driver.store.commit(&mut exe, commit).await {
                    Ok(_) => return Ok(Status::Running),
                    Err(e) if e.is_conflict() => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            Err(ControlError::Store(stm_store::StoreError::retryable(format!(
                "redrive {id}: still conflicting after {RETRIES} attempts"
            ))))
        })
        .await
    }
}
