//! An execution's children (regions and invoked machines) as a tree.

use stm_core::Status;

/// A child execution in the tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChildNode {
    pub id: String,
    /// The state it runs (a region's path) or was invoked from.
    pub root_path: String,
    /// An invoked machine (else a region of its parent's).
    pub submachine: bool,
    /// What the parent records of it.
    pub finished: bool,
    pub outcome: Option<String>,
    /// Its own record, when it exists yet (and the tree was not cut short before it).
    pub record: Option<ChildRecord>,
    pub children: Vec<ChildNode>,
}

/// The part of a child's record the tree shows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChildRecord {
    pub definition_id: String,
    pub status: Status,
    pub active_path: Option<String>,
}

/// The active paths of the region children in `children`, and of their regions in turn:
/// an invoked machine runs another statechart, so its subtree is left out.
pub(crate) fn region_paths(children: &[ChildNode]) -> impl Iterator<Item = &str> {
    let mut out = Vec::new();
    let mut frontier: Vec<&ChildNode> = children.iter().collect();
    while let Some(node) = frontier.pop() {
        if node.submachine {
            continue;
        }
        if let Some(path) = node.record.as_ref().and_then(|r| r.active_path.as_deref()) {
            out.push(path);
        }
        frontier.extend(node.children.iter());
    }
    out.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_paths_skip_invoked_machines() {
        let record = |path: &str| {
            Some(ChildRecord {
                definition_id: "M".into(),
                status: Status::Running,
                active_path: Some(path.into()),
            })
        };
        let child = |id: &str, submachine: bool, path: &str, children: Vec<ChildNode>| ChildNode {
            id: id.into(),
            root_path: String::new(),
            submachine,
            finished: false,
            outcome: None,
            record: record(path),
            children,
        };
        let tree = vec![
            child(
                "r1",
                false,
                "A.R1.X",
                vec![child("r1a", false, "A.R1.X.Q.Y", Vec::new())],
            ),
            child(
                "sub",
                true,
                "Elsewhere",
                vec![child("deep", false, "Z", Vec::new())],
            ),
        ];
        let mut paths: Vec<&str> = region_paths(&tree).collect();
        paths.sort_unstable();
        assert_eq!(paths, ["A.R1.X", "A.R1.X.Q.Y"]);
    }
}
