//! Hover: what the name under the cursor declares, in Markdown.
//!
//! A state shows its path, kind and transitions (from the built definition when the
//! machine loads, else what the text says); an event its fields; a guard its predicate;
//! a fragment its parameters; a handler its binding; an import the file it names.

use lsp_types::{Hover, HoverContents, MarkupContent, MarkupKind, Position, Uri};
use stm_core::{Definition, NodeKind};

use super::documents::{path_of, resolve_import, Documents};
use super::index::StateDecl;
use super::symbols::{resolve, Declaration};

/// The hover for `position` in the document `uri`, if the cursor is on a name the
/// server knows.
pub(crate) fn hover(documents: &Documents, uri: &Uri, position: Position) -> Option<Hover> {
    let text = documents.text(uri)?;
    let index = super::index::FileIndex::build(&text);
    if let Some(import) = index.import_at(position) {
        let target = resolve_import(uri, &import.path)?;
        let shown = path_of(&target).map_or(target.to_string(), |p| p.display().to_string());
        return Some(markdown(
            format!("**import** `{}`\n\n{shown}", import.path),
            import.range,
        ));
    }
    let occurrence = index.occurrence_at(position)?;
    let declaration = resolve(documents, uri, &index, occurrence)?;
    let value = match &declaration {
        Declaration::State(_, state) => state_text(&text, uri, state),
        Declaration::Event(_, event) => {
            let mut out = format!("**event {}**", event.name);
            if event.fields.is_empty() {
                out.push_str("\n\nno fields");
            }
            for field in &event.fields {
                let optional = if field.optional { "?" } else { "" };
                out.push_str(&format!("\n- `{}`: {}{optional}", field.name, field.ty));
            }
            out
        }
        Declaration::Guard(_, guard) => format!("**guard {}**\n\n`{}`", guard.name, guard.predicate),
        Declaration::Fragment(_, fragment, used_as) => {
            let params: Vec<String> = fragment.params.iter().map(|(n, k)| format!("{n}: {k}")).collect();
            format!("**fragment {used_as}**({})", params.join(", "))
        }
        Declaration::Machine(_, machine, used_as) => {
            format!("**machine {used_as}**\n\ndeclared as `{}`", machine.name)
        }
        Declaration::Action(_, binding) => {
            format!("**handler {}**\n\nbound to `{}`", binding.name, binding.target)
        }
    };
    Some(markdown(value, occurrence.range))
}

fn markdown(value: String, range: lsp_types::Range) -> Hover {
    Hover {
        contents: HoverContents::Markup(MarkupContent {
            kind: MarkupKind::Markdown,
            value,
        }),
        range: Some(range),
    }
}

/// A state's path, kind and transitions.
fn state_text(text: &str, uri: &Uri, state: &StateDecl) -> String {
    let heading = format!("**state {}.{}**", state.container, state.path);
    if !state.container_is_fragment {
        let origin = path_of(uri);
        if let Ok(definition) =
            stm_core::dsl::load_definition_str(text, Some(&state.container), origin.as_deref())
        {
            if let Some(details) = built_state_text(&definition, &state.path) {
                return format!("{heading} ({details}");
            }
        }
    }
    let kind = if state.keyword == "state" {
        "state"
    } else {
        &state.keyword
    };
    let place = if state.container_is_fragment {
        ", in a fragment"
    } else {
        ""
    };
    format!("{heading} ({kind}{place})")
}

/// `kind)` then the transitions of the node at `path`, from the built definition.
fn built_state_text(definition: &Definition, path: &str) -> Option<String> {
    let id = *definition.index.get(path)?;
    let node = &definition.nodes[id.0];
    // a transition is kept by the composite that declares it, its source named in it
    let transitions: Vec<_> = definition
        .nodes
        .iter()
        .flat_map(|n| &n.transitions)
        .filter(|t| t.source == id)
        .collect();
    let kind = match node.kind {
        NodeKind::Leaf if node.outcome.is_some() => "final",
        NodeKind::Leaf => "leaf",
        NodeKind::Composite => "composite",
        NodeKind::Orthogonal => "orthogonal",
        NodeKind::Root => "machine",
    };
    let mut out = format!("{kind})");
    if let Some(outcome) = &node.outcome {
        out.push_str(&format!("\n\noutcome: `{outcome}`"));
    }
    if let Some(invoke) = &node.invoke {
        out.push_str(&format!("\n\ninvokes `{invoke}`"));
    }
    if transitions.is_empty() {
        out.push_str("\n\nno transitions");
        return Some(out);
    }
    out.push_str("\n\ntransitions:");
    for transition in transitions {
        let trigger = match &transition.event_filter {
            Some(filter) => {
                let guarded = if filter.predicate.is_some() {
                    " (guarded)"
                } else {
                    ""
                };
                format!("on {}{guarded}", filter.kinds.join(" | "))
            }
            None => "automatic".to_string(),
        };
        let target = match (&transition.target, &transition.choice, &transition.selector) {
            (Some(target), _, _) => format!("`{}`", definition.nodes[target.0].full_path),
            (None, Some(choice), _) => {
                let targets = choice.branches.iter().map(|(_, t)| *t).chain(choice.default);
                one_of(targets.map(|t| definition.nodes[t.0].full_path.clone()))
            }
            (None, None, Some(selector)) => {
                let targets = selector.mapper.values().chain(&selector.default).cloned();
                one_of(targets)
            }
            (None, None, None) => "itself (internal)".to_string(),
        };
        out.push_str(&format!("\n- {trigger} → {target}"));
    }
    Some(out)
}

/// `one of `A`, `B`` for the targets a choice or selector can pick.
fn one_of(targets: impl Iterator<Item = String>) -> String {
    let mut names: Vec<String> = Vec::new();
    for target in targets {
        if !names.contains(&target) {
            names.push(target);
        }
    }
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    format!("one of {}", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hover_text(text: &str, position: Position) -> Option<String> {
        let uri = crate::lsp::uri::parse("file:///nowhere/h.stm").expect("a url");
        let mut documents = Documents::default();
        documents.open(uri.clone(), text.to_string());
        hover(&documents, &uri, position).and_then(|h| match h.contents {
            HoverContents::Markup(m) => Some(m.value),
            _ => None,
        })
    }

    const TEXT: &str = "event Go { n: int }\nguard ok = n > 1\nfragment F(x: state, y: value) {\n  initial S\n  state S {}\n}\nmachine M {\n  initial A\n  state A {}\n  final B done\n  from A to B on Go where ok\n}\n";

    #[test]
    fn describes_each_kind_of_name() {
        assert_eq!(
            hover_text(TEXT, Position::new(10, 7)).as_deref(),
            Some("**state M.A** (leaf)\n\ntransitions:\n- on Go (guarded) → `B`")
        );
        assert_eq!(
            hover_text(TEXT, Position::new(10, 18)).as_deref(),
            Some("**event Go**\n- `n`: int")
        );
        assert_eq!(
            hover_text(TEXT, Position::new(10, 26)).as_deref(),
            Some("**guard ok**\n\n`n > 1`")
        );
        assert_eq!(
            hover_text(TEXT, Position::new(2, 9)).as_deref(),
            Some("**fragment F**(x: state, y: value)")
        );
        assert_eq!(
            hover_text(TEXT, Position::new(4, 8)).as_deref(),
            Some("**state F.S** (state, in a fragment)")
        );
        assert_eq!(hover_text(TEXT, Position::new(10, 3)), None);
    }
}
