//! The queue contract (`stm_runtime::queue::contract`) run against every queue: the
//! in-memory FIFO, and SQS FIFO over the emulator behind the strict AWS layer (through the
//! real SDK, the queue created as the functions create it).

mod memory {
    use stm_runtime::MemoryQueue;

    async fn make() -> MemoryQueue {
        MemoryQueue::new(5)
    }

    stm_runtime::queue_contract_tests!(make);
}

#[cfg(feature = "aws")]
mod sqs {
    use stm_runtime::queue::SqsQueue;

    /// A fresh FIFO queue (and its dead-letter queue) per check.
    async fn make() -> SqsQueue {
        let moto = stm_testkit::moto().await;
        let client = SqsQueue::client(Some(moto.endpoint()), stm_testkit::REGION).await;
        let name = format!("{}-events", stm_testkit::unique_prefix("queue-contract"));
        let urls = SqsQueue::ensure(&client, &name, 30, 5)
            .await
            .expect("create the queue");
        SqsQueue::new(client, urls.queue_url)
    }

    stm_runtime::queue_contract_tests!(make);
}

/// The contract catches a queue that breaks it: each hook below gets one thing wrong,
/// and the check for it fails.
mod it_bites {
    use std::sync::Arc;

    use async_trait::async_trait;
    use stm_runtime::queue::{contract, HookedQueue, QueueError, QueueHook, ReceivedMessage};
    use stm_runtime::{MemoryQueue, Queue};

    /// A memory queue that gets one thing wrong.
    type Broken = HookedQueue<Flaw, MemoryQueue>;

    #[derive(Clone, Copy)]
    enum Flaw {
        /// `delete` answers Ok and deletes nothing.
        DeleteDoesNothing,
        /// Receives drop the message attributes (a spawn intent reads as an event).
        LosesAttributes,
        /// Every receive reports a first receive.
        ForgetsReceiveCounts,
    }

    #[async_trait]
    impl QueueHook for Flaw {
        async fn receive(
            &self,
            inner: &dyn Queue,
            max: usize,
            visibility: i32,
            wait: i32,
        ) -> Result<Vec<ReceivedMessage>, QueueError> {
            let mut got = inner.receive(max, visibility, wait).await?;
            for message in &mut got {
                match self {
                    Flaw::LosesAttributes => message.message_attributes.clear(),
                    Flaw::ForgetsReceiveCounts => {
                        message.receive_count = 1;
                        message
                            .attributes
                            .insert("ApproximateReceiveCount".into(), "1".into());
                    }
                    Flaw::DeleteDoesNothing => {}
                }
            }
            Ok(got)
        }

        async fn delete(&self, inner: &dyn Queue, receipt_handle: &str) -> Result<(), QueueError> {
            match self {
                // visible again at once, as if never received: a real no-op would leave it
                // hidden, and gone to the check for the visibility timeout
                Flaw::DeleteDoesNothing => inner.change_visibility(receipt_handle, 0).await,
                _ => inner.delete(receipt_handle).await,
            }
        }
    }

    /// Whether `check` fails (panics) over queues with `flaw`.
    async fn fails<F>(flaw: Flaw, check: impl FnOnce(Box<dyn Fn() -> Broken + Send + Sync>) -> F) -> bool
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let make = Box::new(move || HookedQueue::new(Arc::new(MemoryQueue::new(5)), flaw));
        tokio::spawn(check(make)).await.is_err()
    }

    #[tokio::test]
    async fn each_flaw_fails_its_check() {
        assert!(
            fails(Flaw::DeleteDoesNothing, |make| {
                contract::a_deleted_message_is_gone(async move || make())
            })
            .await
        );
        assert!(
            fails(Flaw::LosesAttributes, |make| {
                contract::bodies_groups_and_kinds_round_trip(async move || make())
            })
            .await
        );
        assert!(
            fails(Flaw::ForgetsReceiveCounts, |make| {
                contract::a_released_message_returns_with_its_receive_count(async move || make())
            })
            .await
        );
    }
}
