//! A real race of harel's commit and ours on one execution: exactly one wins each round.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{json, Value};
use stm_core::{Event, Execution};
use stm_store::{Commit, DynamoDbStore, ExecutionStore, StoreError, Written};

use crate::support::{our_store, PRELUDE};

/// Who commits first in a round of the race.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Order {
    /// Harel is released, then we commit at once: the commits overlap, either may win.
    Overlapping,
    /// Our commit has landed before harel is released: harel's CAS must fail.
    OursFirst,
    /// Harel's commit has landed (we read its answer) before ours starts: our CAS must fail.
    /// Without these rounds harel rarely wins an overlapping one (its release goes through
    /// a pipe), so a store that ignored the CAS could go unnoticed.
    HarelFirst,
}

fn release(to_py: &mut impl Write) {
    to_py.write_all(b"go\n").and_then(|()| to_py.flush()).expect("go");
}

fn answer(from_py: &mut impl BufRead) -> Value {
    let mut line = String::new();
    from_py.read_line(&mut line).expect("read");
    serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("python result ({e}): {line:?}"))
}

async fn commit_ours(store: &DynamoDbStore, mine: &mut Execution, r: usize) -> Result<Written, StoreError> {
    store
        .commit(
            mine,
            Commit {
                emits: vec![(None, Event::new("X").with_id(format!("ours-{r}")))],
                ..Commit::default()
            },
        )
        .await
}

/// Rounds of a real race: harel loads, waits for "go", commits; we load and commit, at the
/// same moment or strictly before or after it. Exactly one wins each round, the loser sees
/// the winner's version, and each side wins the rounds it commits first in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cas_race_between_harel_and_us_has_one_winner() {
    let prefix = stm_testkit::unique_prefix("race");
    let store = our_store(&prefix).await;
    let moto = stm_testkit::moto().await;
    let orders = [Order::Overlapping, Order::OursFirst, Order::HarelFirst];
    let rounds = 3 * orders.len();
    for r in 0..rounds {
        let mut e = Execution::new(format!("race-{r}"), "def");
        store.save(&mut e).await.expect("insert");
    }
    let script = format!(
        "{PRELUDE}\n{}",
        r#"
rounds = int(sys.argv[1])
for r in range(rounds):
    exe = store.load(f"race-{r}")
    exe.context["by"] = "harel"
    print("loaded", flush=True)
    sys.stdin.readline()
    try:
        store.commit(exe, [(None, Event(id=f"harel-{r}", kind="X"))])
        print(json.dumps({"won": True}), flush=True)
    except StoreConflict as c:
        print(json.dumps({"won": False, "expected": c.expected, "found": c.found}), flush=True)
"#
    );
    let mut child = Command::new(stm_testkit::python())
        .arg("-c")
        .arg(&script)
        .arg(rounds.to_string())
        .env("ENDPOINT", moto.endpoint())
        .env("PREFIX", &prefix)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python");
    let mut to_py = child.stdin.take().expect("stdin");
    let mut from_py = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let (mut ours_won, mut harel_won) = (0, 0);
    for r in 0..rounds {
        let order = orders[r % orders.len()];
        line.clear();
        from_py.read_line(&mut line).expect("read");
        assert_eq!(line.trim(), "loaded", "python side");
        let id = format!("race-{r}");
        let mut mine = store.load(&id).await.expect("load").expect("stored");
        mine.context.insert("by".into(), json!("ours"));
        let (ours, theirs) = match order {
            Order::Overlapping => {
                release(&mut to_py);
                let ours = commit_ours(&store, &mut mine, r).await;
                (ours, answer(&mut from_py))
            }
            Order::OursFirst => {
                let ours = commit_ours(&store, &mut mine, r).await;
                release(&mut to_py);
                (ours, answer(&mut from_py))
            }
            Order::HarelFirst => {
                release(&mut to_py);
                let theirs = answer(&mut from_py);
                (commit_ours(&store, &mut mine, r).await, theirs)
            }
        };
        let harel_ok = theirs["won"] == json!(true);
        match (&ours, harel_ok) {
            (Ok(_), false) => {
                ours_won += 1;
                assert_eq!(
                    (theirs["expected"].clone(), theirs["found"].clone()),
                    (json!(1), json!(2))
                );
            }
            (
                Err(StoreError::Conflict {
                    expected: 1,
                    found: Some(2),
                    ..
                }),
                true,
            ) => harel_won += 1,
            _ => {
                panic!("round {r} ({order:?}): exactly one writer must win, got ours={ours:?} harel={theirs}")
            }
        }
        match order {
            Order::OursFirst => assert!(!harel_ok, "round {r}: ours landed first, harel must lose"),
            Order::HarelFirst => assert!(harel_ok, "round {r}: harel's landed first, we must lose"),
            Order::Overlapping => {}
        }
        let stored = store.load(&id).await.expect("load").expect("stored");
        assert_eq!(stored.version, 2);
        let winner = if harel_ok { "harel" } else { "ours" };
        assert_eq!(stored.context.get("by"), Some(&json!(winner)));
        let outbox: Vec<String> = store
            .pending_outbox()
            .await
            .expect("outbox")
            .into_iter()
            .map(|o| o.event.id)
            .collect();
        assert!(outbox.contains(&format!("{winner}-{r}")));
        let loser = if harel_ok { "ours" } else { "harel" };
        assert!(
            !outbox.contains(&format!("{loser}-{r}")),
            "the loser's emit must not leak"
        );
    }
    drop(to_py);
    assert!(child.wait().expect("python exit").success());
    assert_eq!(ours_won + harel_won, rounds);
    eprintln!("race: ours won {ours_won}, harel won {harel_won} of {rounds}");
    // a race one side never wins is no race: e.g. a store whose CAS lets every write
    // through makes harel lose every round it does not strictly lead
    assert!(
        ours_won >= 1 && harel_won >= 1,
        "each side must win at least once: ours won {ours_won}, harel won {harel_won} of {rounds}"
    );
}
