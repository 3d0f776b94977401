//! The latency model: each kind of call a distribution with a tail (log-normal, given by
//! its median and its 99th percentile), sampled with the run's seeded generator, and the
//! percentiles of what a run measured with it.
//!
//! AWS publishes no percentiles for these calls. Where AWS states a figure it is named;
//! the rest are this model's assumptions, labelled as such, and the table the simulator
//! prints lists them all, so a reader can see what every served and concurrency figure
//! rests on.

use stm_testkit::Rng;

use crate::metered::{Beside, Call};

/// One kind of call: its median and 99th percentile in seconds, and where they come from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallLatency {
    pub(crate) kind: &'static str,
    pub(crate) p50: f64,
    pub(crate) p99: f64,
    pub(crate) source: &'static str,
}

/// z of the 99th percentile of a standard normal.
const Z99: f64 = 2.326_347_874;

impl CallLatency {
    /// A draw: log-normal with median `p50` and 99th percentile `p99`.
    pub(crate) fn sample(&self, rng: &mut Rng) -> f64 {
        let sigma = (self.p99 / self.p50).ln() / Z99;
        self.p50 * (sigma * standard_normal(rng)).exp()
    }
}

/// A standard normal draw (Box-Muller).
fn standard_normal(rng: &mut Rng) -> f64 {
    let u1 = rng.unit().max(f64::MIN_POSITIVE);
    let u2 = rng.unit();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

const SINGLE_DIGIT: &str =
    "AWS: DynamoDB \"delivers single-digit millisecond performance at any scale\"; tail assumed 3x";

/// Every call kind the simulation charges, by the name the meter and the queue count it
/// under. A kind not listed takes [`OTHER`].
pub(crate) const CALLS: &[CallLatency] = &[
    CallLatency {
        kind: "GetItem",
        p50: 0.004,
        p99: 0.012,
        source: SINGLE_DIGIT,
    },
    CallLatency {
        kind: "BatchGetItem",
        p50: 0.005,
        p99: 0.015,
        source: SINGLE_DIGIT,
    },
    CallLatency {
        kind: "PutItem",
        p50: 0.005,
        p99: 0.015,
        source: SINGLE_DIGIT,
    },
    CallLatency {
        kind: "DeleteItem",
        p50: 0.005,
        p99: 0.015,
        source: SINGLE_DIGIT,
    },
    CallLatency {
        kind: "Query",
        p50: 0.005,
        p99: 0.015,
        source: SINGLE_DIGIT,
    },
    CallLatency {
        kind: "TransactWriteItems",
        p50: 0.012,
        p99: 0.040,
        source: "assumed: two phases (prepare, commit) over every item's partition, 2-3x a single write",
    },
    CallLatency {
        kind: "BatchWriteItem",
        p50: 0.008,
        p99: 0.025,
        source: "assumed: 25 writes in parallel, the slowest of them",
    },
    CallLatency {
        kind: "Scan",
        p50: 0.030,
        p99: 0.090,
        source: "assumed: a 1 MB page read and filtered",
    },
    CallLatency {
        kind: "SendMessageBatch",
        p50: 0.010,
        p99: 0.035,
        source: "assumed: an SQS FIFO send (replicated before it answers)",
    },
    CallLatency {
        kind: "ReceiveMessage",
        p50: 0.010,
        p99: 0.035,
        source: "assumed: the event source's receive of a batch (one group's messages or several)",
    },
    CallLatency {
        kind: "DeleteMessageBatch",
        p50: 0.008,
        p99: 0.025,
        source: "assumed: the event source's delete of the batch",
    },
    CallLatency {
        kind: "ChangeMessageVisibility",
        p50: 0.008,
        p99: 0.025,
        source: "assumed: as a delete",
    },
    CallLatency {
        kind: "Invoke",
        p50: 0.010,
        p99: 0.040,
        source: "assumed: the event source's synchronous invoke of a warm instance, beyond the handler",
    },
    CallLatency {
        kind: "PutEvents",
        p50: 0.015,
        p99: 0.050,
        source: "assumed: an EventBridge put of status events",
    },
];

/// A call of a kind the table does not list.
pub(crate) const OTHER: CallLatency = CallLatency {
    kind: "other",
    p50: 0.010,
    p99: 0.030,
    source: "assumed",
};

pub(crate) fn of(kind: &str) -> CallLatency {
    CALLS.iter().copied().find(|c| c.kind == kind).unwrap_or(OTHER)
}

/// Draws per call kind: a run's latencies, from its own seed.
#[derive(Debug)]
pub(crate) struct Sampler {
    rng: Rng,
}

impl Sampler {
    pub(crate) fn new(seed: u64) -> Sampler {
        Sampler { rng: Rng::new(seed) }
    }

    /// The time of `calls` made one after another (a handler's calls are serial: each
    /// waits for the answer before the next).
    pub(crate) fn serial<'a>(&mut self, calls: impl IntoIterator<Item = &'a str>) -> f64 {
        calls.into_iter().map(|kind| of(kind).sample(&mut self.rng)).sum()
    }
}

impl Sampler {
    /// The time of a caller's `calls`, in their order: one after another, but a relay
    /// delivery's lanes side by side (the longest lane's time) and a group of chains side
    /// by side (a parallel scan's segments, a read's `BatchGetItem`s: its requests dealt to
    /// its chains in turn, the longest chain's time).
    pub(crate) fn timed(&mut self, calls: &[Call]) -> f64 {
        let mut total = 0.0;
        let mut at = 0;
        while at < calls.len() {
            let first = calls[at].beside;
            // the run of calls that go side by side with the first
            let together = calls[at..]
                .iter()
                .take_while(|c| match (first, c.beside) {
                    (Beside::Serial, _) => false,
                    (Beside::Lane(a), Beside::Lane(b)) => a.delivery == b.delivery,
                    (Beside::Chains { group: a, .. }, Beside::Chains { group: b, .. }) => a == b,
                    _ => false,
                })
                .count()
                .max(1);
            let run = &calls[at..at + together];
            at += together;
            let mut strands: std::collections::BTreeMap<usize, f64> = Default::default();
            for (k, call) in run.iter().enumerate() {
                let strand = match call.beside {
                    Beside::Serial => 0,
                    Beside::Lane(lane) => lane.index,
                    Beside::Chains { width, .. } => k % width,
                };
                *strands.entry(strand).or_default() += of(call.kind).sample(&mut self.rng);
            }
            total += strands.into_values().fold(0.0, f64::max);
        }
        total
    }
}

/// The `q` quantile (0..=1) of `values`, nearest rank; 0 when there is none.
pub(crate) fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls side by side take their longest strand's time, calls one after another the
    /// sum: two lanes of one delivery the longer lane, a group of two chains the longer
    /// chain (its calls dealt in turn), a lane of another delivery and a serial call after
    /// them their own. Checked against the same draws taken one by one.
    #[test]
    fn side_by_side_calls_take_their_longest_strand() {
        let lane = |delivery, index| {
            Beside::Lane(stm_runtime::relay::RelayLane {
                delivery,
                index,
                of: 2,
            })
        };
        let chains = Beside::Chains { group: 7, width: 2 };
        let beside = [
            lane(1, 0),
            lane(1, 1),
            lane(1, 0),
            chains,
            chains,
            chains,
            lane(2, 0),
            Beside::Serial,
        ];
        let calls: Vec<Call> = beside
            .iter()
            .enumerate()
            .map(|(order, beside)| Call {
                kind: "Scan",
                order: order as u64,
                beside: *beside,
            })
            .collect();
        let mut draws = Sampler::new(11);
        let d: Vec<f64> = (0..calls.len()).map(|_| draws.serial(["Scan"])).collect();
        let expected = (d[0] + d[2]).max(d[1]) + (d[3] + d[5]).max(d[4]) + d[6] + d[7];
        let got = Sampler::new(11).timed(&calls);
        assert!((got - expected).abs() < 1e-12, "{got} vs {expected}");
        // and one after another, the same calls take their sum
        let serial: Vec<Call> = calls
            .iter()
            .map(|c| Call {
                beside: Beside::Serial,
                ..*c
            })
            .collect();
        let sum: f64 = d.iter().sum();
        assert!((Sampler::new(11).timed(&serial) - sum).abs() < 1e-12);
    }

    /// The sampler gives back the percentiles it was given: a model whose p99 drifted
    /// from its table would make every figure rest on a tail nobody wrote down.
    #[test]
    fn draws_have_the_medians_and_tails_of_the_table() {
        let mut rng = Rng::new(7);
        for call in CALLS {
            let mut draws: Vec<f64> = (0..40_000).map(|_| call.sample(&mut rng)).collect();
            let p50 = quantile(&mut draws, 0.5);
            let p99 = quantile(&mut draws, 0.99);
            assert!(
                (p50 / call.p50 - 1.0).abs() < 0.03,
                "{}: p50 {p50} vs {}",
                call.kind,
                call.p50
            );
            assert!(
                (p99 / call.p99 - 1.0).abs() < 0.08,
                "{}: p99 {p99} vs {}",
                call.kind,
                call.p99
            );
        }
    }
}
