//! Routes and tallies ([`crate::route`]): a routes write wins only over the generation it
//! read, and tallies add up whatever the order and the keys.

use stm_core::version::Version;

use super::{Rng, SeedOnFailure};
use crate::route::{tally_keys, Canary, Route, Routes, Tally};
use crate::ExecutionStore;

fn version(n: u64) -> Version {
    format!("{n:016x}").parse().expect("16 hex digits")
}

/// Nothing stored reads as no route at generation 0; each write that names the
/// generation it read wins once and moves the generation on, and a write naming an older
/// one writes nothing; what was written reads back whole.
pub async fn routes_are_guarded_by_their_generation<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let store = make(0).await;
    let empty = store.routes().await.expect("routes");
    assert_eq!(empty, Routes::default());

    let mut routes = Routes::default();
    routes.machines.insert("Order".into(), Route::to(version(1)));
    assert!(store.put_routes(&routes, 0).await.expect("first write"));
    // a second writer that also read generation 0 loses, and writes nothing
    let mut other = Routes::default();
    other.machines.insert("Order".into(), Route::to(version(9)));
    assert!(!store.put_routes(&other, 0).await.expect("stale write"));
    let read = store.routes().await.expect("routes");
    assert_eq!(read.generation, 1);
    assert_eq!(read.machines, routes.machines);

    let mut next = read.clone();
    next.machines.get_mut("Order").expect("Order").canary = Some(Canary {
        version: version(2),
        weight: 10,
        since: 1_700_000_000.5,
        window_seconds: Some(60),
    });
    next.machines.insert("Ship".into(), Route::to(version(3)));
    assert!(store
        .put_routes(&next, read.generation)
        .await
        .expect("second write"));
    assert!(!store
        .put_routes(&next, read.generation)
        .await
        .expect("replayed write"));
    let read = store.routes().await.expect("routes");
    assert_eq!(read.generation, 2);
    assert_eq!(read.machines, next.machines);
    assert!(read.is_canary("Order", version(2)));
    assert!(!read.is_canary("Order", version(1)));
}

/// Drawn adds over drawn shards of two windows sum, per window, to what was added; keys
/// never added count nothing.
pub async fn tallies_add_up<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let seed = super::env_u64(stm_env::TALLIES_SEED, 0x7a11);
    let _report = SeedOnFailure::new("tallies_add_up", stm_env::TALLIES_SEED, seed);
    let mut rng = Rng::new(seed);
    let store = make(0).await;
    let v = version(2);
    let mut expected = [Tally::default(), Tally::default()];
    for _ in 0..40 {
        let window = rng.index(2);
        let keys = tally_keys("Order", v, 60, &[window as i64]);
        let key = keys[rng.index(keys.len())].clone();
        let failed = rng.index(3) as u64;
        let tally = Tally {
            finished: failed + rng.index(4) as u64,
            failed,
        };
        expected[window].add(tally);
        store
            .add_tallies(&[(key, tally)], 4_000_000_000)
            .await
            .expect("add");
    }
    for (window, sum) in expected.iter().enumerate() {
        let keys = tally_keys("Order", v, 60, &[window as i64]);
        assert_eq!(store.tally(&keys).await.expect("tally"), *sum, "window {window}");
    }
    let both = tally_keys("Order", v, 60, &[0, 1]);
    let mut sum = expected[0];
    sum.add(expected[1]);
    assert_eq!(store.tally(&both).await.expect("tally"), sum);
    // another window length, another version: other keys
    let other = tally_keys("Order", v, 30, &[0, 1]);
    assert_eq!(store.tally(&other).await.expect("tally"), Tally::default());
}
