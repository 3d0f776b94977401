//! `harel/render`: the document as a Mermaid `stateDiagram-v2`, for harel's VS Code
//! preview.
//!
//! The request and its answer are harel's (`harel/lsp/server.py`): params
//! `{uri, machine?}`, result `{mermaid, machine, error, line, column, isFragment, note,
//! targets}`, every key present (null when it does not apply). `machine` picks a
//! machine, a fragment or an imported submachine (its full name); else the first
//! machine, else the first fragment. A fragment is drawn inside a stand-in machine that
//! `use`s it with placeholder arguments. The machine is not validated: a machine that
//! loads draws, so the preview follows the text as it is typed.

use super::uri;
use lsp_types::Uri;
use serde_json::{json, Value};

use super::documents::{path_of, Documents};
use super::index::FileIndex;

/// What the preview shows.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Rendered {
    pub mermaid: Option<String>,
    pub machine: Option<String>,
    pub error: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub is_fragment: bool,
    pub note: Option<String>,
    /// `(name, kind)`: kind `machine`, `fragment` or `submachine`.
    pub targets: Vec<(String, &'static str)>,
}

impl Rendered {
    /// The JSON answer, harel's shape.
    pub(crate) fn to_json(&self) -> Value {
        let targets: Vec<Value> = self
            .targets
            .iter()
            .map(|(name, kind)| json!({"name": name, "kind": kind}))
            .collect();
        json!({
            "mermaid": self.mermaid,
            "machine": self.machine,
            "error": self.error,
            "line": self.line,
            "column": self.column,
            "isFragment": self.is_fragment,
            "note": self.note,
            "targets": targets,
        })
    }

    fn failed(err: stm_core::dsl::DslError, machine: Option<String>) -> Rendered {
        Rendered {
            error: Some(err.message),
            line: err.line,
            column: err.column,
            machine,
            ..Rendered::default()
        }
    }
}

/// The answer to a `harel/render` request with `params`.
pub(crate) fn render_request(documents: &Documents, params: &Value) -> Value {
    let uri = params.get("uri").and_then(Value::as_str).and_then(uri::parse);
    let Some(uri) = uri else {
        return json!({"error": "no document uri"});
    };
    let Some(text) = documents.text(&uri) else {
        return json!({"error": format!("cannot read {}", uri.as_str())});
    };
    let machine = params.get("machine").and_then(Value::as_str);
    render_text(&text, &uri, machine).to_json()
}

/// The preview of `text` (the document `uri`), of `machine` when given.
pub(crate) fn render_text(text: &str, uri: &Uri, machine: Option<&str>) -> Rendered {
    let origin = path_of(uri);
    let program = match stm_core::dsl::parse(text) {
        Ok(program) => program,
        Err(err) => return Rendered::failed(err, None),
    };
    let primary_name = machine
        .filter(|m| program.machines.iter().any(|n| n == m))
        .or(program.machines.first().map(String::as_str));
    let primary = primary_name.map(|name| {
        (
            name.to_string(),
            stm_core::dsl::load_definition_str(text, Some(name), origin.as_deref()),
        )
    });
    let mut targets: Vec<(String, &'static str)> =
        program.machines.iter().map(|m| (m.clone(), "machine")).collect();
    targets.extend(program.fragments.iter().map(|f| (f.clone(), "fragment")));
    if let Some((_, Ok(definition))) = &primary {
        targets.extend(definition.submachines.keys().map(|s| (s.clone(), "submachine")));
    }

    if let (Some(wanted), Some((_, Ok(definition)))) = (machine, &primary) {
        if let Some(sub) = definition.submachines.get(wanted) {
            return Rendered {
                mermaid: Some(stm_core::render::mermaid(sub)),
                machine: Some(wanted.to_string()),
                targets,
                ..Rendered::default()
            };
        }
    }
    let wanted_fragment = machine
        .filter(|m| program.fragments.iter().any(|f| f == m) && !program.machines.iter().any(|n| n == m));
    let fragment = wanted_fragment.or(if program.machines.is_empty() {
        program.fragments.first().map(String::as_str)
    } else {
        None
    });
    if let Some(fragment) = fragment {
        let rendered = render_fragment(text, fragment, origin.as_deref());
        return Rendered { targets, ..rendered };
    }
    match primary {
        None => Rendered {
            error: Some("no machine or fragment declared in this document".to_string()),
            targets,
            ..Rendered::default()
        },
        Some((name, Err(err))) => Rendered {
            targets,
            ..Rendered::failed(err, Some(name))
        },
        Some((name, Ok(definition))) => Rendered {
            mermaid: Some(stm_core::render::mermaid(&definition)),
            machine: Some(name),
            targets,
            ..Rendered::default()
        },
    }
}

/// A fragment drawn inside a stand-in machine that `use`s it under its own name, with
/// one placeholder argument per parameter (and a sibling state for each `state` one).
fn render_fragment(text: &str, fragment: &str, origin: Option<&std::path::Path>) -> Rendered {
    let index = FileIndex::build(text);
    let params = index
        .fragments
        .iter()
        .find(|f| f.name == fragment)
        .map(|f| f.params.clone())
        .unwrap_or_default();
    let mut siblings = Vec::new();
    let mut args = Vec::new();
    for (name, kind) in &params {
        match kind.as_str() {
            "action" => args.push(format!("{name} = preview.{name}")),
            "state" => {
                siblings.push(format!("  state {name} {{}}\n"));
                args.push(format!("{name} = {name}"));
            }
            "guard" => args.push(format!("{name} = ({name} == \"x\")")),
            "value" => args.push(format!("{name} = 1")),
            "event" => {
                let mut event = name.clone();
                if let Some(first) = event.get(..1) {
                    event = first.to_uppercase() + &event[1..];
                }
                args.push(format!("{name} = {event}Evt"));
            }
            _ => {}
        }
    }
    let wrapper = format!(
        "machine __preview__ {{\n  initial {fragment}\n{}  use {fragment} ({}) as {fragment}\n}}",
        siblings.concat(),
        args.join(", ")
    );
    let combined = format!("{text}\n{wrapper}");
    match stm_core::dsl::load_definition_str(&combined, Some("__preview__"), origin) {
        Ok(definition) => Rendered {
            mermaid: Some(stm_core::render::mermaid(&definition)),
            machine: Some(fragment.to_string()),
            is_fragment: true,
            note: Some(format!("fragment '{fragment}' — placeholder arguments")),
            ..Rendered::default()
        },
        Err(err) => Rendered {
            is_fragment: true,
            ..Rendered::failed(err, Some(fragment.to_string()))
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri() -> Uri {
        uri::parse("file:///nowhere/x.stm").expect("a url")
    }

    #[test]
    fn draws_the_first_machine_and_lists_the_targets() {
        let text = "machine M {\n  initial A\n  state A {}\n}\nfragment F {\n  initial X\n  state X {}\n}\n";
        let rendered = render_text(text, &uri(), None);
        assert!(rendered
            .mermaid
            .as_deref()
            .is_some_and(|m| m.starts_with("stateDiagram-v2")));
        assert_eq!(rendered.machine.as_deref(), Some("M"));
        assert_eq!(
            rendered.targets,
            [("M".into(), "machine"), ("F".into(), "fragment")]
        );
    }

    #[test]
    fn draws_a_fragment_with_placeholders() {
        let text =
            "fragment F(done: state) {\n  initial X\n  state X {}\n  from X to done on Go\n}\nevent Go {}\n";
        let rendered = render_text(text, &uri(), None);
        assert!(rendered.is_fragment);
        assert!(rendered.mermaid.is_some(), "{rendered:?}");
    }

    #[test]
    fn a_syntax_error_is_located() {
        let rendered = render_text("machine M {\n  state }\n", &uri(), None);
        assert_eq!((rendered.line, rendered.column), (Some(2), Some(9)));
        assert!(rendered.error.is_some());
    }
}
