//! `stm-runtime`: the one driver shared by `stm run`, the local stack and the Lambda
//! functions, plus the action registry, the event queue and the three functions' logic.
//!
//! - [`driver`]: effects -> actions -> one atomic commit -> delivery.
//! - [`actions`]: handler names -> Rust functions, with harel's `harel.lib.*` built-ins.
//! - [`queue`]: the [`Queue`] trait, SQS FIFO and in-memory implementations, the message
//!   contract (DESIGN §3.3).
//! - [`worker`], [`relay`], [`sweeper`]: what the three Lambda functions do, as plain
//!   async functions over a store and a queue.
//! - [`eventsource`]: the SQS event-source-mapping emulation the local stack and the
//!   end-to-end tests run the worker under.
//! - [`config`]: the functions' environment and the definitions directory.
//! - [`metrics`]: CloudWatch metrics as Embedded Metric Format log lines.

pub mod actions;
pub mod config;
pub mod control;
pub mod doorbell;
pub mod driver;
pub mod eventsource;
pub mod metrics;
pub mod queue;
pub mod relay;
pub mod remote;
pub mod sweeper;
pub mod worker;

pub use actions::{ActionFn, ActionInput, ActionRegistry, UnboundActions};
pub use control::Control;
pub use driver::{Clock, Definitions, Driver, DriverError, ManualClock, StepReport, SystemClock};
pub use queue::{MemoryQueue, OutgoingMessage, Queue, SqsQueue};
pub use relay::RelaySummary;
pub use sweeper::SweepSummary;
pub use worker::{Record, Worker, WorkerSettings};
