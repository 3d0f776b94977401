//! The statechart drawn as nested HTML boxes: a composite holds its sub-states, an
//! orthogonal state holds its regions side by side (dashed), the active states are
//! highlighted (`class="active"`), the initial state marked with an arrow.

use std::fmt::Write;

use crate::inspect::{BoxKind, StateBox};

use super::html::esc;

/// `tree` as HTML.
pub(crate) fn draw(tree: &StateBox) -> String {
    let mut out = String::new();
    out.push_str(r#"<div class="chart">"#);
    draw_box(tree, &mut out);
    out.push_str("</div>");
    out
}

fn draw_box(state: &StateBox, out: &mut String) {
    let mut class = format!("state {}", state.kind.as_str());
    // a final state is a leaf too: `.state.leaf.active` finds every active leaf
    if state.kind == BoxKind::Final {
        class.push_str(" leaf");
    }
    if state.active {
        class.push_str(" active");
    }
    // writing to a String cannot fail
    let _ = write!(
        out,
        r#"<div class="{class}" data-path="{}" title="{}{}">"#,
        esc(&state.path),
        esc(if state.path.is_empty() {
            &state.name
        } else {
            &state.path
        }),
        if state.active { " (active)" } else { "" }
    );
    out.push_str(r#"<div class="state-name">"#);
    if state.initial {
        out.push_str(r#"<span class="initial" title="initial state">&#9679;&#8594;</span> "#);
    }
    out.push_str(&esc(&state.name));
    if let Some(outcome) = &state.outcome {
        let _ = write!(
            out,
            r#" <span class="outcome" title="the outcome it records">&#8658; {}</span>"#,
            esc(outcome)
        );
    }
    if let Some(machine) = &state.invokes {
        let _ = write!(out, r#" <span class="invokes">invokes {}</span>"#, esc(machine));
    }
    out.push_str("</div>");
    if !state.children.is_empty() {
        let _ = write!(out, r#"<div class="substates {}">"#, state.kind.as_str());
        for child in &state.children {
            draw_box(child, out);
        }
        out.push_str("</div>");
    }
    out.push_str("</div>");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(name: &str, active: bool) -> StateBox {
        StateBox {
            name: name.into(),
            path: format!("O.R.{name}"),
            kind: BoxKind::Leaf,
            active,
            initial: false,
            outcome: None,
            invokes: None,
            children: Vec::new(),
        }
    }

    #[test]
    fn active_leaves_are_marked_and_names_escaped() {
        let region = StateBox {
            name: "R".into(),
            path: "O.R".into(),
            kind: BoxKind::Region,
            active: true,
            initial: true,
            outcome: None,
            invokes: None,
            children: vec![leaf("A<b>", true), leaf("C", false)],
        };
        let html = draw(&region);
        assert!(html.contains(r#"class="state region active""#), "{html}");
        assert!(
            html.contains(r#"class="state leaf active" data-path="O.R.A&lt;b&gt;""#),
            "{html}"
        );
        assert!(html.contains("A&lt;b&gt;") && !html.contains("A<b>"), "{html}");
        assert!(html.contains(r#"class="initial""#), "{html}");
        assert_eq!(html.matches(r#"class="state "#).count(), 3);
    }
}
