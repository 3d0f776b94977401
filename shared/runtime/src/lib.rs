//! `stm-runtime`: the one driver shared by `stm run`, the local stack and the Lambda
//! functions, plus the action registry, the event queue and the three functions' logic.
//!
//! - [`driver`]: effects -> actions -> one atomic commit -> delivery.
//! - [`definitions`]: the machines a driver runs, current and retained versions.
//! - [`actions`]: handler names -> Rust functions, with harel's `harel.lib.*` built-ins.
//! - [`queue`]: the [`Queue`] trait, SQS FIFO and in-memory implementations, the message
//!   contract (harel 0.9.0's messages; see `queue`).
//! - [`control`]: the sending side and the control plane (create, send, cancel,
//!   terminate, suspend, resume), harel's `SenderLogic` and `engine/control.py`.
//! - [`worker`], [`relay`], [`sweeper`]: what the three Lambda functions do, as plain
//!   async functions over a store and a queue.
//! - [`doorbell`]: precise timers, a delayed doorbell message per near timer.
//! - [`remote`]: actions bound to a Lambda function or an HTTPS endpoint (harel's FaaS
//!   wire contract).
//! - [`eventsource`]: the SQS event-source-mapping emulation the local stack and the
//!   end-to-end tests run the worker under.
//! - [`config`]: the functions' environment and the definitions directory.
//! - [`metrics`]: CloudWatch metrics as Embedded Metric Format log lines.
//!
//! Nothing here knows Lambda's event types: the `stm-lambda` crate owns that boundary and
//! calls [`Worker::handle_invocation`], [`doorbell::handle_doorbells`],
//! [`relay::scheduled_pass`] and [`sweeper::scheduled_sweep`].
//!
//! Feature `aws` (default): everything that talks to AWS: the SQS queue and doorbells, the
//! DynamoDB store from the functions' configuration, and remote actions. Without it no AWS SDK, hyper or rustls crate is compiled,
//! so the embedded runner (`stm run`: [`Driver`] over a `MemoryStore`, [`MemoryQueue`],
//! [`Control`]) builds in about a minute instead of a quarter of an hour on two cores.

pub mod actions;
pub mod config;
pub mod control;
pub mod definitions;
pub mod doorbell;
pub mod driver;
pub mod eventsource;
mod join;
pub mod metrics;
pub mod purge;
pub mod queue;
pub mod relay;
pub mod remote;
pub mod rollout;
pub mod status;
pub mod sweeper;
pub mod telemetry;
pub mod worker;

pub use actions::{ActionFn, ActionInput, ActionRegistry, ActionState, UnboundActions};
pub use control::{Control, ControlError};
pub use definitions::Definitions;
pub use driver::{
    Burst, BurstStepError, Clock, Driver, DriverError, ManualClock, SpawnParents, StepReport, SystemClock,
};
#[cfg(feature = "aws")]
pub use queue::SqsQueue;
pub use queue::{MemoryQueue, OutgoingMessage, Queue};
pub use relay::{RelayError, RelaySummary};
pub use sweeper::{SweepError, SweepSummary};
pub use worker::{Record, Worker, WorkerSettings};
