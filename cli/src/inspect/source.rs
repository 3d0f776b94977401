//! A machine's `.stm` source, each line with whether an active state is declared on it.

use std::collections::BTreeSet;

use stm_core::definition::Definition;

/// A machine's `.stm` source, each line with whether an active state is declared on it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SourceView {
    pub file: String,
    pub lines: Vec<(String, bool)>,
}

impl SourceView {
    /// `text`, from `file`, with the lines in `marked` (1-based) marked.
    pub(crate) fn new(file: String, text: &str, marked: &BTreeSet<usize>) -> SourceView {
        let lines = text
            .lines()
            .enumerate()
            .map(|(i, line)| (line.to_string(), marked.contains(&(i + 1))))
            .collect();
        SourceView { file, lines }
    }
}

/// The source of `defn` with the declarations of its `active` states marked: `None` when
/// it has no file (a version read back from its frozen form) or the file is not readable
/// from here.
pub(crate) fn source_view(defn: &Definition, active: &BTreeSet<String>) -> Option<SourceView> {
    let file = defn.source_file.clone()?;
    let text = std::fs::read_to_string(&file).ok()?;
    let marked = defn
        .nodes
        .iter()
        .filter(|node| !node.full_path.is_empty() && active.contains(&node.full_path))
        .filter_map(|node| node.pos.as_ref().map(|pos| pos.line))
        .collect();
    Some(SourceView::new(file, &text, &marked))
}
