//! Golden tests: our Mermaid rendering against harel 0.9.0's `viz/mermaid.py` on the
//! cases in `data/validate/cases/` (the `.mmd` files, written by `data/validate/gen.py`).

#[path = "data/validate/model.rs"]
mod model;

use stm_core::render::mermaid;
use stm_core::Definition;

fn compare(name: &str, defn: &Definition) -> Option<String> {
    let expected = model::expected_mermaid(name)?;
    let ours = mermaid(defn);
    (ours != expected).then(|| format!("{name}:\n{}", model::diff(&expected, &ours)))
}

#[test]
fn mermaid_matches_harel_on_harels_own_model() {
    let names: Vec<String> = model::case_names()
        .into_iter()
        .filter(|n| model::expected_mermaid(n).is_some())
        .collect();
    assert!(
        names.len() >= 20,
        "expected the golden .mmd files, found {}",
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

#[test]
fn mermaid_matches_harel_on_parsed_stm() {
    let failures: Vec<String> = model::case_names()
        .iter()
        .filter(|n| model::expected_mermaid(n).is_some())
        .filter_map(|name| {
            let path = model::cases_dir().join(format!("{name}.stm"));
            let machine = model::expected(name).machine;
            match stm_core::dsl::load_definition_file(&path, machine.as_deref()) {
                Ok(defn) => compare(name, &defn),
                Err(e) => Some(format!("{name}: {e}")),
            }
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} case(s) differ from harel:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
