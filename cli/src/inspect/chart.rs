//! The statechart as nested boxes, the active states flagged.

use std::collections::BTreeSet;

use stm_core::definition::{Definition, NodeId, NodeKind};

/// What a state box is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BoxKind {
    /// The machine itself.
    Machine,
    /// A state with sub-states, one active at a time.
    Composite,
    /// An AND-state: its children are regions, all active at once.
    Orthogonal,
    /// A region of an orthogonal state (it runs as a child execution).
    Region,
    Leaf,
    /// A leaf that records an outcome when reached.
    Final,
}

impl BoxKind {
    /// A short lowercase name (CSS classes, a terminal's legend).
    pub fn as_str(self) -> &'static str {
        match self {
            BoxKind::Machine => "machine",
            BoxKind::Composite => "composite",
            BoxKind::Orthogonal => "orthogonal",
            BoxKind::Region => "region",
            BoxKind::Leaf => "leaf",
            BoxKind::Final => "final",
        }
    }
}

/// One state of the statechart, with its sub-states.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StateBox {
    pub name: String,
    /// Its full path (`""` for the machine).
    pub path: String,
    pub kind: BoxKind,
    /// Active in the execution (or one of its regions).
    pub active: bool,
    /// Its parent's initial state.
    pub initial: bool,
    /// The outcome a final state records.
    pub outcome: Option<String>,
    /// The machine it invokes, if any.
    pub invokes: Option<String>,
    pub children: Vec<StateBox>,
}

/// Every state active when `paths` are: each path and its ancestors (`A.B.C` makes
/// `A`, `A.B` and `A.B.C` active).
pub(crate) fn active_set<'a>(paths: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for path in paths {
        let mut end = 0;
        for (at, c) in path.char_indices() {
            if c == '.' {
                set.insert(path[..at].to_string());
            }
            end = at + c.len_utf8();
        }
        if end > 0 {
            set.insert(path.to_string());
        }
    }
    set
}

/// The statechart below `root_path` (`""`: the whole machine) as nested boxes, the states
/// in `active` flagged; `None` if the machine has no such state.
pub(crate) fn state_tree(defn: &Definition, root_path: &str, active: &BTreeSet<String>) -> Option<StateBox> {
    let root = defn.get(root_path)?;
    Some(state_box(defn, root, active))
}

fn state_box(defn: &Definition, id: NodeId, active: &BTreeSet<String>) -> StateBox {
    let node = defn.node(id);
    let parent = node.parent.map(|p| defn.node(p));
    let kind = match node.kind {
        NodeKind::Root => BoxKind::Machine,
        NodeKind::Orthogonal => BoxKind::Orthogonal,
        _ if parent.is_some_and(|p| p.kind == NodeKind::Orthogonal) => BoxKind::Region,
        NodeKind::Composite => BoxKind::Composite,
        NodeKind::Leaf if node.outcome.is_some() => BoxKind::Final,
        NodeKind::Leaf => BoxKind::Leaf,
    };
    StateBox {
        name: if node.kind == NodeKind::Root {
            defn.id.clone()
        } else {
            node.name.clone()
        },
        path: node.full_path.clone(),
        kind,
        // the machine box is active whenever anything in it is
        active: active.contains(&node.full_path) || (node.kind == NodeKind::Root && !active.is_empty()),
        initial: parent.is_some_and(|p| p.start_state.as_deref() == Some(node.name.as_str())),
        outcome: node.outcome.clone(),
        invokes: node.invoke.clone(),
        children: node
            .children
            .iter()
            .map(|&child| state_box(defn, child, active))
            .collect(),
    }
}

/// The leaf states under `root_path` that belong to its own execution (not to a region's
/// child execution): where `redrive` may resume.
pub(crate) fn leaves_under(defn: &Definition, root_path: &str) -> Vec<String> {
    let Some(root) = defn.get(root_path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(id) = frontier.pop() {
        let node = defn.node(id);
        match node.kind {
            NodeKind::Leaf => out.push(node.full_path.clone()),
            // its regions run as their own executions
            NodeKind::Orthogonal => {}
            NodeKind::Composite | NodeKind::Root => frontier.extend(node.children.iter().rev()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECKOUT: &str = r#"
event Go {}
machine Shop {
  initial Cart
  state Cart {}
  orthogonal Fulfil {
    state Payment {
      initial Charging
      state Charging {}
      final Paid success
      from Charging to Paid on Go
    }
    state Stock {
      initial Reserving
      state Reserving {}
      final Held success
      from Reserving to Held on Go
    }
  }
  final Done success
  from Cart to Fulfil on Go
  from Fulfil join all to Done else to Done
}
"#;

    fn shop() -> Definition {
        stm_core::dsl::load_definition_str(CHECKOUT, Some("Shop"), None).expect("the test machine compiles")
    }

    #[test]
    fn a_path_makes_its_ancestors_active() {
        let set = active_set(["Fulfil.Payment.Charging", "Fulfil.Stock.Reserving"]);
        let got: Vec<&str> = set.iter().map(String::as_str).collect();
        assert_eq!(
            got,
            [
                "Fulfil",
                "Fulfil.Payment",
                "Fulfil.Payment.Charging",
                "Fulfil.Stock",
                "Fulfil.Stock.Reserving"
            ]
        );
        assert!(active_set([""]).is_empty());
    }

    #[test]
    fn the_tree_nests_regions_under_their_orthogonal_state_and_flags_the_active_ones() {
        let active = active_set(["Fulfil", "Fulfil.Payment.Charging"]);
        let tree = state_tree(&shop(), "", &active).expect("the machine's root");
        assert_eq!(
            (tree.name.as_str(), tree.kind, tree.active),
            ("Shop", BoxKind::Machine, true)
        );
        let names: Vec<&str> = tree.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Cart", "Fulfil", "Done"]);
        assert!(tree.children[0].initial && !tree.children[0].active);
        let fulfil = &tree.children[1];
        assert_eq!((fulfil.kind, fulfil.active), (BoxKind::Orthogonal, true));
        let payment = &fulfil.children[0];
        assert_eq!((payment.kind, payment.active), (BoxKind::Region, true));
        let charging = &payment.children[0];
        assert_eq!(
            (
                charging.path.as_str(),
                charging.kind,
                charging.active,
                charging.initial
            ),
            ("Fulfil.Payment.Charging", BoxKind::Leaf, true, true)
        );
        let paid = &payment.children[1];
        assert_eq!(
            (paid.kind, paid.outcome.as_deref(), paid.active),
            (BoxKind::Final, Some("success"), false)
        );
        assert!(!fulfil.children[1].active, "Stock has no active path given");
        assert_eq!(tree.children[2].kind, BoxKind::Final);
    }

    #[test]
    fn a_region_execution_draws_its_own_branch_and_an_unknown_one_nothing() {
        let tree = state_tree(&shop(), "Fulfil.Stock", &BTreeSet::new()).expect("the region");
        assert_eq!((tree.name.as_str(), tree.kind), ("Stock", BoxKind::Region));
        assert!(state_tree(&shop(), "Nowhere", &BTreeSet::new()).is_none());
    }

    #[test]
    fn redrive_leaves_stop_at_the_regions() {
        assert_eq!(leaves_under(&shop(), ""), ["Cart", "Done"]);
        assert_eq!(
            leaves_under(&shop(), "Fulfil.Payment"),
            ["Fulfil.Payment.Charging", "Fulfil.Payment.Paid"]
        );
    }
}
