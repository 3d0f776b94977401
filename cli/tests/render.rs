//! `stm render` through the binary, beside `harel render` on the same files: PlantUML by
//! default (and with `--plantuml`), Mermaid with `--mermaid`, the same bytes as harel's.
//! (The renderers themselves are compared with harel's on every machine of the repository
//! and generated ones in shared/core/tests/render_plantuml.rs and render_golden.rs.)

mod common;

use common::{harel_in as harel, repo, stderr, stdout, stm_alone as stm};

#[test]
fn stm_render_prints_harels_plantuml_by_default() {
    let ours = stm(&["render", "examples/order.stm"]);
    let theirs = harel(&repo(), &["render", "examples/order.stm"]);
    assert!(ours.status.success(), "{}", stderr(&ours));
    assert!(theirs.status.success(), "harel: {}", stderr(&theirs));
    assert_eq!(stdout(&ours), stdout(&theirs));
    assert!(stdout(&ours).contains("[*] --> Draft\n"), "{}", stdout(&ours));

    let explicit = stm(&["render", "examples/order.stm", "--plantuml"]);
    assert!(explicit.status.success(), "{}", stderr(&explicit));
    assert_eq!(explicit.stdout, ours.stdout);
}

#[test]
fn stm_render_matches_harel_on_every_example_and_a_named_machine() {
    let mut cases: Vec<Vec<String>> = std::fs::read_dir(repo().join("examples"))
        .expect("examples/")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "stm"))
        .map(|p| {
            vec![format!(
                "examples/{}",
                p.file_name().unwrap_or_default().to_string_lossy()
            )]
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 5, "expected the examples, found {cases:?}");
    let multi = "shared/core/tests/data/dsl/ok/multi_machine.stm";
    let harel_list = stdout(&harel(&repo(), &["list", multi]));
    // the last one, so that the name is what picks it
    let name = harel_list
        .lines()
        .find_map(|l| l.strip_prefix("machines:"))
        .and_then(|m| m.split(',').next_back())
        .map(|m| m.trim().to_string())
        .expect("harel lists the machines");
    cases.push(vec![multi.to_string(), name]);
    for case in &cases {
        for format in [None, Some("--mermaid")] {
            let mut args: Vec<&str> = vec!["render"];
            args.extend(case.iter().map(String::as_str));
            args.extend(format);
            let ours = stm(&args);
            let theirs = harel(&repo(), &args);
            assert!(theirs.status.success(), "harel {args:?}: {}", stderr(&theirs));
            assert!(ours.status.success(), "stm {args:?}: {}", stderr(&ours));
            assert_eq!(stdout(&ours), stdout(&theirs), "stm {args:?}");
        }
    }
}

#[test]
fn stm_render_mermaid_still_prints_mermaid() {
    let out = stm(&["render", "examples/order.stm", "--mermaid"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("stateDiagram-v2\n[*] --> Draft\n"),
        "{}",
        stdout(&out)
    );
    let both = stm(&["render", "examples/order.stm", "--mermaid", "--plantuml"]);
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));
}
