//! `stm versions check`'s verdicts, golden: each folder of `tests/version_check/` holds
//! two versions of a machine (`old.stm`, `new.stm`) and the report expected from one to
//! the other (`expected.txt`). `STM_BLESS=1` rewrites the expected reports (review the
//! diff before committing it).

use std::path::Path;

use stm_core::version::diff::diff;

fn load(path: &Path) -> stm_core::Definition {
    stm_core::dsl::load_definition_file(path, None).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_pair_reports_what_its_golden_file_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/version_check");
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .expect("the cases folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(
        cases.len() >= 15,
        "expected at least 15 pairs, found {}",
        cases.len()
    );
    let bless = std::env::var_os("STM_BLESS").is_some();
    let mut differ = Vec::new();
    for case in &cases {
        let report = diff(&load(&case.join("old.stm")), &load(&case.join("new.stm")));
        // the versions are hashes: the verdicts are what is golden, not the digits
        let text = report
            .to_string()
            .replace(&report.old_version.to_string(), "OLD")
            .replace(&report.new_version.to_string(), "NEW");
        let expected_file = case.join("expected.txt");
        if bless {
            std::fs::write(&expected_file, &text).expect("write the expected report");
            continue;
        }
        let expected = std::fs::read_to_string(&expected_file).unwrap_or_default();
        if text != expected {
            differ.push(format!(
                "--- {}\nexpected:\n{expected}\ngot:\n{text}",
                case.display()
            ));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn comments_and_layout_keep_the_version_and_any_real_change_moves_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/version_check");
    let old = load(&root.join("01-reformatted/old.stm"));
    let same = load(&root.join("01-reformatted/new.stm"));
    assert_eq!(
        stm_core::version::version_of(&old),
        stm_core::version::version_of(&same)
    );
    for case in [
        "02-leaf-renamed",
        "07-assignment-changed",
        "12-hooks-changed",
        "16-machine-ttl",
    ] {
        let new = load(&root.join(case).join("new.stm"));
        assert_ne!(
            stm_core::version::version_of(&old),
            stm_core::version::version_of(&new),
            "{case}"
        );
    }
}
