//! The in-memory queue, recording each visibility the worker sets on a received record
//! (its release: how long the record stays hidden before it comes back).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use stm_runtime::queue::{HookedQueue, QueueError, QueueHook};
use stm_runtime::{MemoryQueue, Queue};

/// The hook that records the releases (receipt handle -> seconds, in the order set).
pub struct Releases {
    simulated: bool,
    set: Mutex<Vec<(String, i32)>>,
}

/// A [`MemoryQueue`] under [`Releases`].
pub type ReleasingQueue = HookedQueue<Releases, MemoryQueue>;

/// A fresh in-memory queue under [`Releases`]. `simulated`: a hidden record is visible
/// again at once, as if its timeout had passed, so hours of back-off run in milliseconds.
pub fn releasing(max_receive_count: u32, simulated: bool) -> ReleasingQueue {
    let hook = Releases {
        simulated,
        set: Mutex::new(Vec::new()),
    };
    HookedQueue::new(Arc::new(MemoryQueue::new(max_receive_count)), hook)
}

impl Releases {
    pub fn all(&self) -> Vec<(String, i32)> {
        self.set.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The first visibility set on `receipt`'s record, if any.
    pub fn of(&self, receipt: &str) -> Option<i32> {
        self.all().into_iter().find(|(r, _)| r == receipt).map(|(_, s)| s)
    }
}

#[async_trait]
impl QueueHook for Releases {
    async fn change_visibility(
        &self,
        inner: &dyn Queue,
        receipt_handle: &str,
        seconds: i32,
    ) -> Result<(), QueueError> {
        self.set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((receipt_handle.to_string(), seconds));
        let seconds = if self.simulated { 0 } else { seconds };
        inner.change_visibility(receipt_handle, seconds).await
    }
}
