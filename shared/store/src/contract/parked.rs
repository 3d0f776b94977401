//! Parked events in rows of their own: numbered in order, a redelivery known by its id, a
//! park that lost the item's version refused, pages of numbers read in order past holes,
//! and a commit's release deleting its row.

use serde_json::json;

use super::{event, exe, Rng, SeedOnFailure};
use crate::{Commit, ExecutionStore, Parked, ParkedEvent, Unpark, PARKED_PAGE};

/// A drawn run of parked events (1 to 250: one page or several), some numbers left as
/// holes (taken, never written), the first kept by the commit that starts the run and the
/// others by `park`: every kept one comes back once, in number order, page by page; a
/// second park of one is `AlreadyKept` and writes nothing; a park against a moved version
/// conflicts; a commit that releases one deletes its row, and its event may be parked
/// again afterwards.
pub async fn parked_rows_keep_order_and_claims<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let seed = super::env_u64(stm_env::PARKED_ROWS_SEED, 0x9a4c);
    let _report = SeedOnFailure::new(
        "parked_rows_keep_order_and_claims",
        stm_env::PARKED_ROWS_SEED,
        seed,
    );
    let mut rng = Rng::new(seed);
    let store = make(0).await;
    for round in 0..3 {
        let id = format!("parking-{round}");
        let count = [1, rng.between(2, PARKED_PAGE), rng.between(PARKED_PAGE + 1, 250)][round];
        let mut e = exe(&id, "parking-def");
        store.save(&mut e).await.expect("create");
        let mut kept: Vec<(u64, String)> = Vec::new();
        let mut taken = 0;
        for i in 0..count {
            let number = store.take_park_number(&id).await.expect("number");
            taken += 1;
            assert_eq!(number, taken, "numbers are taken in order from 1");
            if i > 0 && rng.chance(10) {
                continue; // a hole: a park that lost its race or died
            }
            let parked = ParkedEvent {
                number,
                event: event("Later", &format!("{id}-ev-{i}"), json!({"i": i})),
            };
            if kept.is_empty() {
                e.parked_after = Some(number - 1);
                let commit = Commit {
                    park: Some(Box::new(parked.clone())),
                    ..Commit::default()
                };
                store
                    .commit(&mut e, commit)
                    .await
                    .expect("the first park's commit");
            } else {
                let answer = store.park(&id, e.version, &parked).await.expect("park");
                assert_eq!(answer, Parked::Kept);
            }
            kept.push((number, parked.event.id.clone()));
            if rng.chance(20) {
                // a redelivery of one already kept, under the number it takes now
                let (_, again) = &kept[rng.index(kept.len())];
                let number = store.take_park_number(&id).await.expect("number");
                taken += 1;
                let twice = ParkedEvent {
                    number,
                    event: event("Later", again, json!({})),
                };
                assert_eq!(
                    store.park(&id, e.version, &twice).await.expect("park again"),
                    Parked::AlreadyKept,
                    "{again} is kept once"
                );
            }
        }
        let last = store.last_park_number(&id).await.expect("last");
        assert_eq!(last, taken);
        let stale = ParkedEvent {
            number: last + 1,
            event: event("Later", &format!("{id}-stale"), json!({})),
        };
        let refused = store.park(&id, e.version - 1, &stale).await;
        assert!(
            refused.is_err_and(|err| err.is_conflict()),
            "a park on a moved version"
        );
        // any commit of the execution while events wait moves what a park is checked
        // against (a store may check a guard of its own rather than the item)
        let read_at = e.version;
        store.save(&mut e).await.expect("a commit while events wait");
        let late = ParkedEvent {
            number: last + 2,
            event: event("Later", &format!("{id}-late"), json!({})),
        };
        let refused = store.park(&id, read_at, &late).await;
        assert!(
            refused.is_err_and(|err| err.is_conflict()),
            "a park read before the execution's last commit"
        );

        // read back page by page
        let mut read: Vec<(u64, String)> = Vec::new();
        let mut after = 0;
        while after < last {
            let page = store.parked_events(&id, after, last).await.expect("page");
            assert!(page
                .iter()
                .all(|p| p.number > after && p.number <= after + PARKED_PAGE));
            read.extend(page.iter().map(|p| (p.number, p.event.id.clone())));
            after = (after + PARKED_PAGE).min(last);
        }
        assert_eq!(
            read, kept,
            "round {round}: every kept event once, in number order"
        );

        // a release's commit deletes its row; the event can be kept again after it
        let (number, event_id) = kept[0].clone();
        let commit = Commit {
            processed_event_ids: vec![event_id.clone()],
            unpark: vec![Unpark {
                number,
                event_id: event_id.clone(),
            }],
            ..Commit::default()
        };
        store.commit(&mut e, commit).await.expect("release");
        let left = store.parked_events(&id, 0, last).await.expect("page");
        assert!(
            left.iter().all(|p| p.number != number),
            "released: its row is gone"
        );
        let again = ParkedEvent {
            number: store.take_park_number(&id).await.expect("number"),
            event: event("Later", &event_id, json!({})),
        };
        assert_eq!(
            store.park(&id, e.version, &again).await.expect("park"),
            Parked::Kept
        );
    }
}
