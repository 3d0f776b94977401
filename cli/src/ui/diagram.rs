//! The statechart drawn as nested HTML boxes: a composite holds its sub-states, an
//! orthogonal state holds its regions side by side (dashed), the active states are
//! highlighted (`class="active"`), the initial state marked with an arrow. On a machine's
//! page each state also shows how many executions are in it, shaded by that count (a heat
//! map), the count linking to the list of them, and the chart carries an empty SVG layer
//! on which the console's script draws the transitions as arrows between the boxes (their
//! positions are only known once the browser has laid the boxes out).

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::inspect::{BoxKind, StateBox};

use super::markup::esc;

/// How many executions are in each state (by path), and where a count links to.
pub(crate) struct Heat<'a> {
    pub counts: &'a BTreeMap<String, usize>,
    /// The href of the list of the executions in a state, from its path.
    pub href: &'a dyn Fn(&str) -> String,
}

impl Heat<'_> {
    /// The shade of `count`, 0 (none) to 4 (the most of any state).
    fn level(&self, count: usize) -> usize {
        let most = self.counts.values().copied().max().unwrap_or(0);
        if count == 0 || most == 0 {
            0
        } else {
            (count * 4).div_ceil(most).clamp(1, 4)
        }
    }
}

/// `tree` as HTML.
pub(crate) fn draw(tree: &StateBox) -> String {
    draw_with(tree, None)
}

/// `tree` as HTML, each state with its count of executions.
pub(crate) fn draw_heat(tree: &StateBox, heat: &Heat<'_>) -> String {
    draw_with(tree, Some(heat))
}

fn draw_with(tree: &StateBox, heat: Option<&Heat<'_>>) -> String {
    let mut out = String::new();
    out.push_str(r#"<div class="chart">"#);
    if heat.is_some() {
        out.push_str(concat!(
            r#"<svg class="edges" aria-hidden="true"><defs>"#,
            r#"<marker id="arrowhead" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">"#,
            r#"<path d="M0,0 L10,5 L0,10 z"/></marker></defs></svg>"#
        ));
    }
    draw_box(tree, heat, &mut out);
    out.push_str("</div>");
    out
}

fn draw_box(state: &StateBox, heat: Option<&Heat<'_>>, out: &mut String) {
    let count = heat.map(|h| h.counts.get(&state.path).copied().unwrap_or(0));
    let mut class = format!("state {}", state.kind.as_str());
    if let (Some(heat), Some(count)) = (heat, count) {
        let _ = write!(class, " heat-{}", heat.level(count));
    }
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
    if let (Some(heat), Some(count)) = (heat, count) {
        if state.kind != BoxKind::Machine {
            let _ = write!(
                out,
                r#" <a class="count" href="{}" title="executions in {} now">{count}</a>"#,
                esc(&(heat.href)(&state.path)),
                esc(&state.path)
            );
        }
    }
    out.push_str("</div>");
    if !state.children.is_empty() {
        let _ = write!(out, r#"<div class="substates {}">"#, state.kind.as_str());
        for child in &state.children {
            draw_box(child, heat, out);
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

    #[test]
    fn a_heat_map_counts_and_shades_each_state() {
        let region = StateBox {
            name: "R".into(),
            path: "O.R".into(),
            kind: BoxKind::Region,
            active: false,
            initial: false,
            outcome: None,
            invokes: None,
            children: vec![leaf("A", false), leaf("C", false)],
        };
        let counts = BTreeMap::from([("O.R.A".to_string(), 8), ("O.R.C".to_string(), 1)]);
        let href = |path: &str| format!("/in/{path}");
        let html = draw_heat(
            &region,
            &Heat {
                counts: &counts,
                href: &href,
            },
        );
        assert!(
            html.contains(r#"class="state leaf heat-4" data-path="O.R.A""#),
            "{html}"
        );
        assert!(
            html.contains(r#"class="state leaf heat-1" data-path="O.R.C""#),
            "{html}"
        );
        assert!(html.contains(r#"class="state region heat-0""#), "{html}");
        assert!(
            html.contains(r#"<a class="count" href="/in/O.R.A" title="executions in O.R.A now">8</a>"#),
            "{html}"
        );
    }
}
