//! Golden tests: our validator against harel 0.9.0's on the cases in
//! `data/validate/cases/` (regenerate the expectations with `data/validate/gen.py`).

#[path = "data/validate/model.rs"]
mod model;

use stm_core::validate::{validate, Finding};
use stm_core::Definition;

/// Mismatches between our findings on `defn` and harel's for case `name`, as text.
fn compare(name: &str, defn: &Definition) -> Option<String> {
    let expected = model::expected(name).findings;
    let ours = validate(defn);
    let show = |f: &[Finding]| {
        f.iter()
            .map(|x| format!("    {}", x.harel_text()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let same = ours.len() == expected.len()
        && ours.iter().zip(&expected).all(|(o, e)| {
            o.severity.as_str() == e.severity
                && o.code == e.code
                && o.path.as_deref() == Some(e.path.as_str())
                && o.message == e.message
                && o.harel_text() == e.text
        });
    (!same).then(|| {
        let want = expected
            .iter()
            .map(|e| format!("    {}", e.text))
            .collect::<Vec<_>>()
            .join("\n");
        format!(
            "{name}:\n  harel ({}):\n{want}\n  ours ({}):\n{}\n",
            expected.len(),
            ours.len(),
            show(&ours)
        )
    })
}

#[test]
fn validator_matches_harel_on_harels_own_model() {
    let names = model::case_names();
    assert!(
        names.len() >= 30,
        "expected the golden cases, found {}",
        names.len()
    );
    let failures: Vec<String> = names
        .iter()
        .filter_map(|name| compare(name, &model::model_definition(name)))
        .collect();
    assert!(
        failures.is_empty(),
        "{} case(s) differ from harel:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Our `.stm` loader on case `name` (the machine its expectation names).
fn load(name: &str) -> Result<Definition, String> {
    let path = model::cases_dir().join(format!("{name}.stm"));
    let machine = model::expected(name).machine;
    stm_core::dsl::load_definition_file(&path, machine.as_deref()).map_err(|e| format!("{name}: {e}"))
}

#[test]
fn validator_matches_harel_on_parsed_stm() {
    let failures: Vec<String> = model::case_names()
        .iter()
        .filter_map(|name| match load(name) {
            Ok(defn) => compare(name, &defn),
            Err(e) => Some(e),
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} case(s) differ from harel:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn findings_on_parsed_stm_carry_their_source_location() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/validate/cases/unknown_event.stm");
    let defn = stm_core::dsl::load_definition_file(&path, None).expect("load");
    let findings = validate(&defn);
    let first = &findings[0];
    // at the name itself: `from A to B on Goo`
    assert_eq!((first.line, first.column), (Some(7), Some(18)), "{first}");
    // the nearest declared event is offered beside harel's message
    assert!(
        first.to_string().ends_with(
            "unknown_event.stm:7:18: [error] unknown_event at <root>: transition references undeclared event \
             'Goo' (did you mean `Go`?)"
        ),
        "{first}"
    );
    assert_eq!(first.hint.as_deref(), Some("did you mean `Go`?"));
    // `Stop` is nothing like `Go`: no guess
    assert_eq!(
        findings[1].message,
        "transition references undeclared event 'Stop'"
    );
    assert_eq!(findings[1].hint, None);
    // the second kind of `from A to C on Go | Stop | Cancel`
    assert_eq!((findings[1].line, findings[1].column), (Some(8), Some(23)));
}

/// The parser builds the definition harel builds (compared as `model::project` lines):
/// a mismatch in the golden tests above is then the validator's or renderer's.
#[test]
fn parser_builds_harels_model() {
    let failures: Vec<String> = model::case_names()
        .iter()
        .filter_map(|name| {
            let ours = match load(name) {
                Ok(defn) => model::project(&defn).join("\n"),
                Err(e) => return Some(e),
            };
            let harel = model::project(&model::model_definition(name)).join("\n");
            (ours != harel).then(|| format!("{name}:\n{}", model::diff(&harel, &ours)))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} case(s) built differently:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
