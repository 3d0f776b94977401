//! A queue that forwards every call to an inner queue through a hook (feature `contract`):
//! the seam of the tests that make a queue fail, die, drop, copy, record or pause at chosen
//! calls, so that each says only what it does differently and none forwards the whole
//! trait by hand. The store's counterpart is the runtime tests' `HookedStore`.
//!
//! Around each call [`HookedQueue`] asks its [`QueueHook`]: [`before`](QueueHook::before)
//! (which may fail the call or hold it), then the call itself, which the hook may take
//! over ([`publish_batch`](QueueHook::publish_batch), [`receive`](QueueHook::receive),
//! [`delete`](QueueHook::delete), [`change_visibility`](QueueHook::change_visibility):
//! each forwards to the inner queue unless the hook says otherwise), then
//! [`after`](QueueHook::after).

use std::sync::Arc;

use async_trait::async_trait;

use super::{OutgoingMessage, PublishFailure, Queue, QueueError, ReceivedMessage};

/// A call a hooked queue forwards, with its arguments.
#[derive(Debug, Clone, Copy)]
pub enum QueueCall<'a> {
    PublishBatch {
        messages: &'a [OutgoingMessage],
    },
    Receive {
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    },
    Delete {
        receipt_handle: &'a str,
    },
    ChangeVisibility {
        receipt_handle: &'a str,
        seconds: i32,
    },
}

impl QueueCall<'_> {
    /// The SQS operation the call is (`SendMessageBatch`, ...), for the errors a hook makes.
    pub fn operation(&self) -> &'static str {
        match self {
            QueueCall::PublishBatch { .. } => "SendMessageBatch",
            QueueCall::Receive { .. } => "ReceiveMessage",
            QueueCall::Delete { .. } => "DeleteMessage",
            QueueCall::ChangeVisibility { .. } => "ChangeMessageVisibility",
        }
    }
}

/// The code of the failures a publish comes back with when [`QueueHook::before`] fails it.
pub const HOOK_FAILURE: &str = "HookFailed";

/// What a hooked queue asks around each call. Every method defaults to doing nothing but
/// forward.
#[async_trait]
pub trait QueueHook: Send + Sync {
    /// Before the call: an `Err` fails it without reaching the inner queue. A publish never
    /// fails as a whole: each of its messages comes back failed, code [`HOOK_FAILURE`] and
    /// the error as message.
    async fn before(&self, _call: &QueueCall<'_>) -> Result<(), QueueError> {
        Ok(())
    }

    /// The publish itself: what to send to `inner` (fewer, changed or more messages) and
    /// which failures to answer.
    async fn publish_batch(&self, inner: &dyn Queue, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        inner.publish_batch(messages).await
    }

    /// The receive itself: the hook may change or drop what `inner` hands back.
    async fn receive(
        &self,
        inner: &dyn Queue,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, QueueError> {
        inner.receive(max, visibility_seconds, wait_seconds).await
    }

    /// The delete itself.
    async fn delete(&self, inner: &dyn Queue, receipt_handle: &str) -> Result<(), QueueError> {
        inner.delete(receipt_handle).await
    }

    /// The visibility change itself.
    async fn change_visibility(
        &self,
        inner: &dyn Queue,
        receipt_handle: &str,
        seconds: i32,
    ) -> Result<(), QueueError> {
        inner.change_visibility(receipt_handle, seconds).await
    }

    /// Once the call was answered, whatever the answer (not after a `before` that failed it).
    async fn after(&self, _call: &QueueCall<'_>) {}
}

/// The inner queue of a [`HookedQueue`] as the `&dyn Queue` a hook is handed, be it a
/// queue type or a `dyn Queue` already.
pub trait AsQueue: Send + Sync {
    fn as_queue(&self) -> &dyn Queue;
}

impl<Q: Queue> AsQueue for Q {
    fn as_queue(&self) -> &dyn Queue {
        self
    }
}

impl AsQueue for dyn Queue {
    fn as_queue(&self) -> &dyn Queue {
        self
    }
}

/// `inner` with `hook` asked around every call. `Q` is the inner queue's type where a test
/// still reads it as such (`HookedQueue<H, MemoryQueue>`: its snapshot, its dead letters),
/// any queue otherwise.
pub struct HookedQueue<H, Q: ?Sized = dyn Queue> {
    pub inner: Arc<Q>,
    pub hook: H,
}

impl<H: std::fmt::Debug, Q: ?Sized> std::fmt::Debug for HookedQueue<H, Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookedQueue")
            .field("hook", &self.hook)
            .finish_non_exhaustive()
    }
}

impl<H, Q: ?Sized> HookedQueue<H, Q> {
    pub fn new(inner: Arc<Q>, hook: H) -> Self {
        HookedQueue { inner, hook }
    }
}

#[async_trait]
impl<H: QueueHook, Q: AsQueue + ?Sized> Queue for HookedQueue<H, Q> {
    async fn publish_batch(&self, messages: &[OutgoingMessage]) -> Vec<PublishFailure> {
        let call = QueueCall::PublishBatch { messages };
        if let Err(e) = self.hook.before(&call).await {
            let message = e.to_string();
            return (0..messages.len())
                .map(|index| PublishFailure {
                    index,
                    code: HOOK_FAILURE.into(),
                    message: message.clone(),
                })
                .collect();
        }
        let failures = self.hook.publish_batch(self.inner.as_queue(), messages).await;
        self.hook.after(&call).await;
        failures
    }

    async fn receive(
        &self,
        max: usize,
        visibility_seconds: i32,
        wait_seconds: i32,
    ) -> Result<Vec<ReceivedMessage>, QueueError> {
        let call = QueueCall::Receive {
            max,
            visibility_seconds,
            wait_seconds,
        };
        self.hook.before(&call).await?;
        let inner = self.inner.as_queue();
        let out = self
            .hook
            .receive(inner, max, visibility_seconds, wait_seconds)
            .await;
        self.hook.after(&call).await;
        out
    }

    async fn delete(&self, receipt_handle: &str) -> Result<(), QueueError> {
        let call = QueueCall::Delete { receipt_handle };
        self.hook.before(&call).await?;
        let out = self.hook.delete(self.inner.as_queue(), receipt_handle).await;
        self.hook.after(&call).await;
        out
    }

    async fn change_visibility(&self, receipt_handle: &str, seconds: i32) -> Result<(), QueueError> {
        let call = QueueCall::ChangeVisibility {
            receipt_handle,
            seconds,
        };
        self.hook.before(&call).await?;
        let inner = self.inner.as_queue();
        let out = self.hook.change_visibility(inner, receipt_handle, seconds).await;
        self.hook.after(&call).await;
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    use stm_core::Event;

    use super::*;
    use crate::MemoryQueue;

    /// Refuses every call while `dead`; notes each call answered.
    #[derive(Default)]
    struct Dies {
        dead: AtomicBool,
        answered: Mutex<Vec<&'static str>>,
    }

    #[async_trait]
    impl QueueHook for Dies {
        async fn before(&self, call: &QueueCall<'_>) -> Result<(), QueueError> {
            if self.dead.load(Ordering::SeqCst) {
                return Err(QueueError::failed(call.operation(), "dead"));
            }
            Ok(())
        }

        async fn after(&self, call: &QueueCall<'_>) {
            self.answered
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(call.operation());
        }
    }

    fn go(id: &str) -> OutgoingMessage {
        OutgoingMessage::event("g", &Event::new("Go").with_id(id))
    }

    #[tokio::test]
    async fn a_call_its_hook_fails_never_reaches_the_inner_queue() {
        let queue = HookedQueue::new(Arc::new(MemoryQueue::new(5)), Dies::default());
        assert!(queue.publish_batch(&[go("e1")]).await.is_empty());
        queue.hook.dead.store(true, Ordering::SeqCst);
        let failed = queue.publish_batch(&[go("e2"), go("e3")]).await;
        let codes: Vec<(usize, &str)> = failed.iter().map(|f| (f.index, f.code.as_str())).collect();
        assert_eq!(
            codes,
            [(0, HOOK_FAILURE), (1, HOOK_FAILURE)],
            "each message fails"
        );
        assert_eq!(queue.inner.len(), 1, "the refused publish sent nothing");
        assert!(queue.receive(10, 30, 0).await.is_err());

        queue.hook.dead.store(false, Ordering::SeqCst);
        let got = queue.receive(10, 30, 0).await.expect("receive");
        assert_eq!(got.len(), 1, "the message the refused receive left");
        queue.delete(&got[0].receipt_handle).await.expect("delete");
        assert!(queue.inner.is_empty());
        let answered = queue
            .hook
            .answered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        assert_eq!(
            answered,
            ["SendMessageBatch", "ReceiveMessage", "DeleteMessage"],
            "`after` only for the calls answered"
        );
    }
}
