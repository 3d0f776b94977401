//! `stm-runtime`: the one driver shared by `stm run`, the local stack and the Lambda
//! functions, plus the action registry.
//!
//! - [`driver`]: effects -> actions -> one atomic commit -> delivery.
//! - [`actions`]: handler names -> Rust functions, with harel's `harel.lib.*` built-ins.

pub mod actions;
pub mod driver;

pub use actions::{ActionFn, ActionInput, ActionRegistry, UnboundActions};
pub use driver::{Clock, Definitions, Driver, DriverError, ManualClock, StepReport, SystemClock};
