//! The run: the cases (generated, or replayed from a file), harel over them in Python
//! shards, our driver on each, the disagreements written out; and the test itself.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{json, Value};
use stm_core::pyjson;

use crate::cases::{gen_case, Case};
use crate::compare::{compare, object, Verdict, DELIBERATE_DIFFERENCES};
use crate::values::json_str;

const DEFAULT_CASES: usize = 200;
const DEFAULT_SEED: u64 = 0x5eed_2026;

// ---------------------------------------------------------------- the harness

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// Run harel on every case (shards in parallel), results by case name.
fn run_harel(dir: &Path, cases: &[(Case, PathBuf)], jobs: usize) -> BTreeMap<String, Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/harel_batch.py");
    let mut children = Vec::new();
    for shard in 0..jobs {
        let input = dir.join(format!("cases-{shard}.jsonl"));
        let mut text = String::new();
        for (case, path) in cases.iter().skip(shard).step_by(jobs) {
            let _ = writeln!(
                text,
                "{{\"name\": {}, \"machine\": {}, \"machine_name\": \"M\", \"seed\": {}, \"steps\": {}}}",
                json_str(&case.name),
                json_str(&path.to_string_lossy()),
                case.seed,
                case.steps
            );
        }
        std::fs::write(&input, text).expect("write the batch");
        let stdin = std::fs::File::open(&input).expect("open the batch");
        let mut cmd = Command::new(stm_testkit::python());
        cmd.arg(&script);
        if std::env::var_os("STM_FUZZ_ARMING_ORDER").is_some() {
            cmd.arg("--arming-order");
        }
        let child = cmd
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} (set STM_PYTHON to the venv with harel 0.9.0): {e}",
                    stm_testkit::python().display()
                )
            });
        children.push(child);
    }
    let mut out = BTreeMap::new();
    for (shard, child) in children.into_iter().enumerate() {
        let output = child.wait_with_output().expect("harel batch");
        assert!(
            output.status.success(),
            "harel_batch.py failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let _ = std::fs::write(dir.join(format!("results-{shard}.jsonl")), &output.stdout);
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let v = pyjson::loads(line).unwrap_or_else(|e| panic!("harel output line: {e:?}: {line}"));
            let name = v["name"].as_str().unwrap_or_default().to_string();
            out.insert(name, v);
        }
    }
    out
}

/// The cases of a JSONL file, each `{"name", "machine": <.stm text>, "case": {"seed",
/// "steps"}}`: the shape of a `fuzz-disagreements.jsonl` line, so a report replays as is
/// (and a hand-minimised case is written the same way).
fn replay(file: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let v = pyjson::loads(line).unwrap_or_else(|e| panic!("{}:{}: {e:?}", file.display(), i + 1));
            let name = v["name"]
                .as_str()
                .map_or_else(|| format!("replay-{i:05}"), str::to_string);
            Case {
                name,
                index: v["index"].as_u64().map_or(i, |n| n as usize),
                text: v["machine"].as_str().unwrap_or_default().to_string(),
                seed: pyjson::dumps(&v["case"]["seed"]),
                steps: pyjson::dumps(&v["case"]["steps"]),
            }
        })
        .collect()
}

#[tokio::test]
async fn differential_fuzz_against_harel() {
    let seed = stm_testkit::env_u64("STM_FUZZ_SEED", DEFAULT_SEED);
    let count = env_usize("STM_FUZZ_CASES").unwrap_or(DEFAULT_CASES);
    let only = env_usize("STM_FUZZ_ONLY");
    let jobs = env_usize("STM_FUZZ_JOBS")
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()).min(2))
        .max(1);
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{seed:x}"));
    std::fs::create_dir_all(&dir).expect("fuzz dir");
    let started = Instant::now();

    let generated: Vec<Case> = match std::env::var("STM_FUZZ_REPLAY") {
        Ok(file) => replay(Path::new(&file)),
        Err(_) => match only {
            Some(i) => vec![gen_case(seed, i)],
            None => (0..count).map(|i| gen_case(seed, i)).collect(),
        },
    };
    let cases: Vec<(Case, PathBuf)> = generated
        .into_iter()
        .map(|case| {
            let path = dir.join(format!("{}.stm", case.name));
            std::fs::write(&path, &case.text).expect("write machine");
            (case, path)
        })
        .collect();
    assert!(!cases.is_empty(), "no case to run");
    let harel = run_harel(&dir, &cases, jobs.min(cases.len()).max(1));
    let harel_secs = started.elapsed().as_secs_f64();

    let report = target.join("fuzz-disagreements.jsonl");
    let mut lines = String::new();
    let mut agree = 0;
    let mut deliberate: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut classes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (case, path) in &cases {
        let result = harel
            .get(&case.name)
            .unwrap_or_else(|| panic!("no harel result for {}", case.name));
        let harel_text = pyjson::dumps(result);
        if let Some((_, reason)) = DELIBERATE_DIFFERENCES
            .iter()
            .find(|(m, _)| harel_text.contains(m))
        {
            deliberate.entry(reason).or_default().push(case.name.clone());
            continue;
        }
        let (verdict, ours) = compare(case, path, result).await;
        match verdict {
            Verdict::Agree => agree += 1,
            Verdict::Disagree {
                class,
                what,
                path: at,
                ours: o,
                harel: h,
                all,
            } => {
                classes.entry(class.clone()).or_default().push(case.name.clone());
                let record = object(vec![
                    ("name", Value::from(case.name.clone())),
                    ("seed", Value::from(format!("{seed:#x}"))),
                    ("index", Value::from(case.index)),
                    ("class", Value::from(class)),
                    (
                        "first_difference",
                        object(vec![
                            ("what", Value::from(what)),
                            ("path", Value::from(at)),
                            ("ours", o),
                            ("harel", h),
                        ]),
                    ),
                    ("differs", json!(all)),
                    ("machine", Value::from(case.text.clone())),
                    (
                        "case",
                        object(vec![
                            ("seed", pyjson::loads(&case.seed).unwrap_or(Value::Null)),
                            ("steps", pyjson::loads(&case.steps).unwrap_or(Value::Null)),
                        ]),
                    ),
                    ("harel", result.clone()),
                    ("ours", ours),
                ]);
                lines.push_str(&pyjson::dumps(&record));
                lines.push('\n');
            }
        }
    }
    std::fs::write(&report, &lines).expect("write the disagreements");
    let total = cases.len();
    eprintln!(
        "differential fuzz (seed {seed:#x}, {jobs} harel process(es)): {agree}/{total} agree, \
         {} deliberate differences, in {:.1}s (harel {harel_secs:.1}s)",
        deliberate.values().map(Vec::len).sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
    for (class, names) in &classes {
        let shown: Vec<&str> = names.iter().take(4).map(String::as_str).collect();
        eprintln!("  {:>4}  {class}  (e.g. {})", names.len(), shown.join(", "));
    }
    let deliberate_count: usize = deliberate.values().map(Vec::len).sum();
    for (reason, names) in &deliberate {
        eprintln!(
            "  {:>4}  deliberate difference: {reason}  (e.g. {})",
            names.len(),
            names[0]
        );
    }
    eprintln!("disagreements: {}", report.display());
    eprintln!("machines and batches: {}", dir.display());
    assert_eq!(
        agree + deliberate_count,
        total,
        "{} of {total} fuzz cases disagree with harel; see {}",
        total - agree,
        report.display()
    );
}
