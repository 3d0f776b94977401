//! Commits of shapes drawn at random from a seed, read back whole and in order.
//!
//! The other row checks each commit one shape, and a shape decides which code runs: a
//! fan-out of tiny intents never fills a packed spawn row (DynamoDB's store cuts one at
//! ~350 KB), so a row that lost its last intent at the cut passed them all. Here each
//! shape draws how many executions commit how many times, in which interleaving, how many
//! rows each commit writes to how many targets (1 to 30 rows of a group in one commit), how
//! large each row is (tiny to an intent that nearly fills a packed row alone), and at least
//! one wide fan-out (past a transaction's 100 items) whose contexts fill several packed
//! rows; then reads everything back by a scan, by key and through relay passes of a drawn
//! size read in pages of a drawn size. `STM_SHAPES_SEED` sets the seed (printed on a
//! failure), `STM_SHAPES` how many shapes a run draws.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;
use stm_core::{Map, Value};

use super::seeded::{env_u64, Rng, SeedOnFailure};
use super::{event, exe};
use crate::{Commit, ExecutionStore, OutboxEntry, SpawnEntry, SpawnIntent, DEFAULT_TRACE_MAX};

/// The seed of a run's shapes.
pub const SHAPES_SEED_VAR: &str = stm_env::SHAPES_SEED;
/// How many shapes a run draws.
pub const SHAPES_VAR: &str = stm_env::SHAPES;
const DEFAULT_SEED: u64 = 0x5_4A9E_5EED;
/// Two shapes a run: every store suite runs the check, some over moto, where a shape's few
/// MB of rows take seconds; another seed is one environment variable away.
const DEFAULT_SHAPES: u64 = 2;

/// The largest context pad: alone it nearly fills a packed spawn row (cut at ~350 KB,
/// counting an intent's context twice for the escapes of the packed list), so rows are cut
/// before, after and around intents of every size.
const ROW_CUT_PAD: u64 = 180_000;
/// A wide fan-out's contexts at least: several packed rows, whatever the draw.
pub const WIDE_MIN_BYTES: u64 = 700_000;
/// A wide fan-out's contexts at most: with its other rows, under a transaction's 4 MB.
const WIDE_MAX_BYTES: u64 = 2_200_000;
/// The execution ids rows are sent to (and `None`, no target): few, so a commit writes
/// several rows of one group.
const TARGETS: [&str; 3] = ["shape-target-a", "shape-target-b", "shape-target-c"];

/// A size in `0..=max`, as many tiny rows as large ([`Rng::spread`]).
fn size(rng: &mut Rng, max: u64) -> u64 {
    rng.spread(max + 1) - 1
}

/// A string of about `bytes` serialized bytes, distinct per `tag`: a quote, a backslash and
/// a non-ASCII letter (escaped once in the context's JSON, again in a packed row's list),
/// then filler.
fn pad(tag: &str, bytes: u64) -> String {
    let head = format!("{tag}\"\\é");
    let filler = (bytes as usize).saturating_sub(head.len() + 8);
    let letter = char::from(b'a' + (tag.len() % 26) as u8);
    let mut s = head;
    s.extend(std::iter::repeat_n(letter, filler));
    s
}

fn intent(parent: &str, n: usize, pad_bytes: u64) -> SpawnIntent {
    let child_id = format!("{parent}:Shape:{n}");
    let mut context = Map::new();
    context.insert("n".into(), json!(n));
    context.insert("pad".into(), Value::String(pad(&child_id, pad_bytes)));
    SpawnIntent {
        child_id,
        root_path: "root.each".into(),
        context,
    }
}

/// An emit to one of the first `groups` targets or to none.
fn emit(rng: &mut Rng, id: String, groups: u64, max_bytes: u64) -> (Option<String>, stm_core::Event) {
    let pick = rng.below(groups + 1);
    let target = (pick < groups).then(|| TARGETS[pick as usize].to_string());
    let bytes = size(rng, max_bytes);
    (target, event("Shaped", &id, json!({ "pad": pad(&id, bytes) })))
}

/// The spawn intents of a wide fan-out of `parent` (101–180 children: past a
/// transaction's 100 items, so DynamoDB's store packs them), their contexts tiny to
/// nearly a packed row each, `least_bytes` of them at least (several packed rows: 700 KB
/// fill four or more) and at most 2.2 MB (a transaction's 4 MB with room to spare), drawn
/// from `seed`. The runtime's relay suite commits the same over DynamoDB.
pub fn wide_fan_out(seed: u64, parent: &str, tag: &str, least_bytes: u64) -> Vec<SpawnIntent> {
    let rng = &mut Rng::new(seed);
    let least = least_bytes.min(WIDE_MAX_BYTES);
    let width = rng.between(101, 180) as usize;
    let mut sizes: Vec<u64> = (0..width).map(|_| size(rng, ROW_CUT_PAD)).collect();
    // within the transaction's bytes: the last intents drawn large come out tiny
    let mut total = 0;
    for s in &mut sizes {
        *s = (*s).min(WIDE_MAX_BYTES.saturating_sub(total));
        total += *s;
    }
    // enough to fill several packed rows: top up intents picked at random
    while total < least {
        let i = rng.below(width as u64) as usize;
        let more = (ROW_CUT_PAD - sizes[i]).min(least - total);
        sizes[i] += more;
        total += more;
    }
    sizes
        .iter()
        .enumerate()
        .map(|(i, &bytes)| intent(parent, i, bytes))
        .map(|mut sp| {
            sp.child_id = format!("{}:{tag}", sp.child_id);
            sp
        })
        .collect()
}

/// One drawn commit of execution `exe`.
struct Drawn {
    exe: usize,
    commit: Commit,
}

/// Draw a commit: wide (a fan-out past a transaction's 100 items, contexts of `wide_bytes`
/// at least) or narrow (up to 30 rows to a few targets, a few intents, under 100 items).
fn draw_commit(rng: &mut Rng, parent: &str, tag: &str, wide_bytes: Option<u64>) -> Commit {
    let mut commit = Commit::default();
    match wide_bytes {
        Some(least) => {
            commit.spawns = wide_fan_out(rng.next(), parent, tag, least);
            let groups = rng.between(1, TARGETS.len() as u64);
            commit.emits = (0..rng.below(6))
                .map(|k| emit(rng, format!("{tag}-e{k}"), groups, 4_000))
                .collect();
        }
        None => {
            let spawns = rng.below(7) as usize;
            commit.spawns = (0..spawns)
                .map(|i| {
                    let bytes = size(rng, 40_000);
                    let mut sp = intent(parent, i, bytes);
                    sp.child_id = format!("{}:{tag}", sp.child_id);
                    sp
                })
                .collect();
            // few groups and up to 30 rows: up to 30 rows of one group in one commit
            let groups = rng.between(1, TARGETS.len() as u64);
            commit.emits = (0..rng.below(31))
                .map(|k| emit(rng, format!("{tag}-e{k}"), groups, 20_000))
                .collect();
        }
    }
    commit
}

/// A shape: 1–3 executions, 1–5 commits each (some without rows), interleaved; one of them
/// a wide fan-out of large contexts, sometimes a second of tiny ones (one packed row).
fn draw_shape(rng: &mut Rng, n: u64) -> (Vec<String>, Vec<Drawn>) {
    let executions = rng.between(1, 3) as usize;
    let ids: Vec<String> = (0..executions).map(|e| format!("shape{n}-x{e}")).collect();
    let mut queues: Vec<Vec<Drawn>> = Vec::new();
    let wide_at = (rng.below(executions as u64) as usize, rng.below(4) as usize);
    let tiny_wide = rng.chance(30).then(|| rng.below(executions as u64) as usize);
    for (e, id) in ids.iter().enumerate() {
        let commits = if e == wide_at.0 {
            wide_at.1 + 1 + rng.below(2) as usize
        } else {
            rng.between(1, 4) as usize
        };
        let mut own = Vec::new();
        for c in 0..commits {
            let tag = format!("c{c}");
            let wide = if (e, c) == wide_at {
                Some(WIDE_MIN_BYTES)
            } else if tiny_wide == Some(e) && c == 0 {
                Some(0)
            } else {
                None
            };
            let commit = if wide.is_none() && rng.chance(15) {
                Commit::default()
            } else {
                draw_commit(rng, id, &tag, wide)
            };
            let commit = match wide {
                // a fan-out of tiny contexts: sizes drawn, then cut to a few bytes
                Some(0) => Commit {
                    spawns: commit
                        .spawns
                        .into_iter()
                        .map(|mut sp| {
                            if let Some(Value::String(p)) = sp.context.get_mut("pad") {
                                p.truncate(sp.child_id.len() + 4);
                            }
                            sp
                        })
                        .collect(),
                    ..commit
                },
                _ => commit,
            };
            own.push(Drawn { exe: e, commit });
        }
        own.reverse();
        queues.push(own);
    }
    // interleave the executions' commits, each execution's in its own order
    let mut drawn = Vec::new();
    while queues.iter().any(|q| !q.is_empty()) {
        let live: Vec<usize> = (0..queues.len()).filter(|&i| !queues[i].is_empty()).collect();
        let pick = live[rng.below(live.len() as u64) as usize];
        drawn.extend(queues[pick].pop());
    }
    (ids, drawn)
}

/// The bytes of a context's pad (what a failure message shows instead of the context).
fn pad_len(context: &Map) -> usize {
    context.get("pad").and_then(Value::as_str).map_or(0, str::len)
}

#[track_caller]
fn assert_same_spawns(got: &[SpawnEntry], want: &[SpawnEntry], how: &str) {
    let first_difference = got.iter().zip(want).position(|(g, w)| g != w);
    if let Some(i) = first_difference {
        let show = |e: &SpawnEntry| {
            format!(
                "seq {} {} (parent {}, root {}, pad {} bytes)",
                e.seq,
                e.child_id,
                e.parent_id,
                e.root_path,
                pad_len(&e.context)
            )
        };
        panic!(
            "{how}: spawn intent {i} of {} is {}, committed {}",
            want.len(),
            show(&got[i]),
            show(&want[i])
        );
    }
    if got.len() != want.len() {
        let missing: Vec<&str> = want
            .iter()
            .skip(got.len())
            .take(5)
            .map(|e| e.child_id.as_str())
            .collect();
        let extra: Vec<&str> = got
            .iter()
            .skip(want.len())
            .take(5)
            .map(|e| e.child_id.as_str())
            .collect();
        panic!(
            "{how}: {} spawn intents came back, {} committed (first missing {missing:?}, first extra {extra:?})",
            got.len(),
            want.len()
        );
    }
}

#[track_caller]
fn assert_same_outbox(got: &[OutboxEntry], want: &[OutboxEntry], how: &str) {
    let first_difference = got.iter().zip(want).position(|(g, w)| g != w);
    if let Some(i) = first_difference {
        let show = |e: &OutboxEntry| {
            format!(
                "seq {} {} to {:?} (pad {} bytes)",
                e.seq,
                e.event.id,
                e.target_id,
                pad_len(&e.event.data)
            )
        };
        panic!(
            "{how}: outbox entry {i} of {} is {}, committed {}",
            want.len(),
            show(&got[i]),
            show(&want[i])
        );
    }
    assert_eq!(
        got.len(),
        want.len(),
        "{how}: outbox entries that came back, committed"
    );
}

/// Drawn shapes (see the module docs): each commit's seqs are its block (spawn rows first,
/// above the execution's earlier commits); every intent and entry comes back once, as
/// committed, in seq order (a packed row's intents in the commit's order): by a scan, by
/// key (`pending_rows_of` the last commit) and through the relay's passes of
/// `oldest_pending_seqs` read by `pending_rows` in pages and acked, after which nothing is
/// pending.
pub async fn drawn_shapes_come_back_whole_and_in_order<S: ExecutionStore>(make: impl AsyncFn(usize) -> S) {
    let seed = env_u64(SHAPES_SEED_VAR, DEFAULT_SEED);
    let shapes = env_u64(SHAPES_VAR, DEFAULT_SHAPES);
    assert!(
        shapes > 0,
        "{SHAPES_VAR}=0 draws nothing: the check would check nothing"
    );
    let _report = SeedOnFailure::new("drawn_shapes_come_back_whole_and_in_order", SHAPES_SEED_VAR, seed);
    let mut master = Rng::new(seed);
    for n in 0..shapes {
        let store = make(DEFAULT_TRACE_MAX).await;
        let mut rng = Rng::new(master.next());
        let (ids, drawn) = draw_shape(&mut rng, n);
        check_shape(&store, &mut rng, n, &ids, drawn).await;
    }
}

async fn check_shape<S: ExecutionStore>(store: &S, rng: &mut Rng, n: u64, ids: &[String], drawn: Vec<Drawn>) {
    let mut exes: Vec<_> = ids.iter().map(|id| exe(id, "def")).collect();
    for e in &mut exes {
        store.save(e).await.expect("create");
    }
    let mut want_spawns: Vec<SpawnEntry> = Vec::new();
    let mut want_outbox: Vec<OutboxEntry> = Vec::new();
    // per execution: the highest seq so far, and the rows of its last commit that wrote any
    let mut highest: BTreeMap<usize, i64> = BTreeMap::new();
    let mut last_rows: BTreeMap<usize, (Vec<SpawnEntry>, Vec<OutboxEntry>)> = BTreeMap::new();
    let mut wide = 0;
    for (k, Drawn { exe: e, mut commit }) in drawn.into_iter().enumerate() {
        let what = format!("shape {n}, commit {k} of {}", ids[e]);
        // about half the commits are made in a trace: each of their rows comes back with it
        if rng.below(2) == 0 {
            commit.trace_context = Some(format!(
                "00-{:032x}-{:016x}-01",
                u128::from(rng.next()) << 64 | 1,
                rng.next() | 1
            ));
        }
        let trace_context = commit.trace_context.clone();
        let (intents, emits) = (commit.spawns.clone(), commit.emits.clone());
        let items = 1 + intents.len() + emits.len();
        let context_bytes: usize = intents.iter().map(|i| pad_len(&i.context)).sum();
        if items > 100 && context_bytes as u64 >= WIDE_MIN_BYTES {
            wide += 1;
        }
        let written = store
            .commit(&mut exes[e], commit)
            .await
            .unwrap_or_else(|err| panic!("{what} ({items} items, {context_bytes} context bytes): {err}"));
        assert_eq!(
            (written.spawns.len(), written.outbox.len()),
            (intents.len(), emits.len()),
            "{what}: a seq for each row"
        );
        assert!(
            written.spawns.windows(2).all(|w| w[0] <= w[1]) && written.outbox.windows(2).all(|w| w[0] < w[1]),
            "{what}: seqs in the commit's order: {written:?}"
        );
        if let (Some(s), Some(o)) = (written.spawns.last(), written.outbox.first()) {
            assert!(s < o, "{what}: spawn rows before outbox rows: {written:?}");
        }
        let lowest = written.spawns.first().or(written.outbox.first());
        if let (Some(low), Some(before)) = (lowest, highest.get(&e)) {
            assert!(
                low > before,
                "{what}: above the execution's earlier seqs ({before}): {written:?}"
            );
        }
        let top = written.outbox.last().or(written.spawns.last());
        if let Some(top) = top {
            highest.insert(e, *top);
        }
        let spawns: Vec<SpawnEntry> = intents
            .into_iter()
            .zip(&written.spawns)
            .map(|(i, &seq)| SpawnEntry {
                seq,
                parent_id: ids[e].clone(),
                child_id: i.child_id,
                root_path: i.root_path,
                context: i.context,
                trace_context: trace_context.clone(),
            })
            .collect();
        let outbox: Vec<OutboxEntry> = emits
            .into_iter()
            .zip(&written.outbox)
            .map(|((target_id, event), &seq)| OutboxEntry {
                seq,
                target_id,
                event,
                trace_context: trace_context.clone(),
            })
            .collect();
        if !spawns.is_empty() || !outbox.is_empty() {
            last_rows.insert(e, (spawns.clone(), outbox.clone()));
        }
        want_spawns.extend(spawns);
        want_outbox.extend(outbox);
    }
    assert!(wide > 0, "shape {n}: no wide fan-out of large contexts was drawn");
    // seq order; a packed row's intents (one seq) stay in the commit's order
    want_spawns.sort_by_key(|s| s.seq);
    want_outbox.sort_by_key(|o| o.seq);
    let spawn_rows: BTreeSet<i64> = want_spawns.iter().map(|s| s.seq).collect();
    let outbox_rows: BTreeSet<i64> = want_outbox.iter().map(|o| o.seq).collect();
    assert!(
        spawn_rows.is_disjoint(&outbox_rows) && outbox_rows.len() == want_outbox.len(),
        "shape {n}: seqs are unique"
    );
    let context_bytes: usize = want_spawns.iter().map(|s| pad_len(&s.context)).sum();
    eprintln!(
        "shape {n}: {} executions, {} spawn intents in {} rows ({context_bytes} context bytes), {} outbox rows",
        ids.len(),
        want_spawns.len(),
        spawn_rows.len(),
        want_outbox.len()
    );

    let how = format!("shape {n}: pending_spawns");
    assert_same_spawns(&store.pending_spawns().await.expect("scan"), &want_spawns, &how);
    let how = format!("shape {n}: pending_outbox");
    assert_same_outbox(&store.pending_outbox().await.expect("scan"), &want_outbox, &how);
    for (e, (spawns, outbox)) in &last_rows {
        let got = store.pending_rows_of(&ids[*e]).await.expect("by key");
        let how = format!("shape {n}: pending_rows_of({})", ids[*e]);
        assert_same_spawns(&got.spawns, spawns, &how);
        assert_same_outbox(&got.outbox, outbox, &how);
    }

    // the relay's way: passes of a drawn size, read in pages of a drawn size, acked
    let (mut got_spawns, mut got_outbox) = (Vec::new(), Vec::new());
    let mut delivered: Vec<i64> = Vec::new();
    let rows = spawn_rows.len() + outbox_rows.len();
    for pass in 0.. {
        assert!(pass <= rows, "shape {n}: {rows} rows take at most {rows} passes");
        let limit = rng.between(1, 100) as usize;
        let seqs = store
            .oldest_pending_seqs(limit, f64::INFINITY)
            .await
            .expect("seqs");
        if seqs.is_empty() {
            break;
        }
        assert!(
            seqs.len() <= limit,
            "shape {n}: a pass of {limit} took {}",
            seqs.len()
        );
        let page = rng.between(1, 100) as usize;
        let how = format!("shape {n}: pass {pass} (limit {limit}, pages of {page})");
        for read in seqs.chunks(page) {
            let spawns: Vec<i64> = read.iter().filter(|s| s.spawn).map(|s| s.seq).collect();
            let outbox: Vec<i64> = read.iter().filter(|s| !s.spawn).map(|s| s.seq).collect();
            let rows = store.pending_rows(&spawns, &outbox).await.expect("rows");
            let mut row_seqs: Vec<i64> = rows.spawns.iter().map(|s| s.seq).collect();
            row_seqs.dedup();
            assert_eq!(row_seqs, spawns, "{how}: the spawn rows read, in order");
            let seqs: Vec<i64> = rows.outbox.iter().map(|o| o.seq).collect();
            assert_eq!(seqs, outbox, "{how}: the outbox rows read, in order");
            got_spawns.extend(rows.spawns);
            got_outbox.extend(rows.outbox);
            // acked a page at a time or once the pass is read (as the relay's chunks fall)
            if rng.chance(50) {
                store.ack_rows(&spawns, &outbox).await.expect("ack");
            }
        }
        let spawns: Vec<i64> = seqs.iter().filter(|s| s.spawn).map(|s| s.seq).collect();
        let outbox: Vec<i64> = seqs.iter().filter(|s| !s.spawn).map(|s| s.seq).collect();
        store.ack_rows(&spawns, &outbox).await.expect("ack (again)");
        delivered.extend(seqs.iter().map(|s| s.seq));
    }
    assert!(
        delivered.windows(2).all(|w| w[0] < w[1]),
        "shape {n}: the passes took the lowest seqs first, each once"
    );
    assert_same_spawns(
        &got_spawns,
        &want_spawns,
        &format!("shape {n}: the passes' spawn intents"),
    );
    assert_same_outbox(
        &got_outbox,
        &want_outbox,
        &format!("shape {n}: the passes' outbox rows"),
    );
    assert!(
        store.pending_spawns().await.expect("spawns").is_empty(),
        "shape {n}: all acked"
    );
    assert!(
        store.pending_outbox().await.expect("outbox").is_empty(),
        "shape {n}: all acked"
    );
}
