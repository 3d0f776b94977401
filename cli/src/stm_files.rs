//! Finding the `.stm` files in a folder: the one place the CLI lists a directory for them
//! (`stm validate DIR`, `stm versions freeze|check DIR`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::errors::usage;

/// The extension of a machine file.
const EXTENSION: &str = "stm";

/// How far [`in_dir`] looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// The regular files directly in the folder, exactly as a deployment's worker lists
    /// its definitions folder (`stm_runtime::config::files_in`): what `stm versions`
    /// freezes and compares must be what the worker loads.
    Top,
    /// The folder and every folder below it: what `stm validate DIR` checks.
    Recursive,
}

/// The `.stm` files in `dir`, sorted by path (the order is the output's, on every
/// machine); a usage error naming `dir` when it cannot be read.
pub fn in_dir(dir: &Path, depth: Depth) -> Result<Vec<PathBuf>> {
    let mut found = match depth {
        Depth::Top => stm_runtime::config::files_in(dir, EXTENSION).map_err(|e| cannot_read(dir, e))?,
        Depth::Recursive => {
            let mut found = Vec::new();
            walk(dir, &mut found)?;
            found
        }
    };
    found.sort();
    Ok(found)
}

/// Every `.stm` path below `dir` that is not a directory, in no order: a symbolic link that
/// leads nowhere is kept, so that `stm validate` reports it rather than skipping it.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| cannot_read(dir, e))?;
    for entry in entries {
        let path = entry.with_context(|| format!("read {}", dir.display()))?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == EXTENSION) {
            out.push(path);
        }
    }
    Ok(())
}

fn cannot_read(dir: &Path, err: std::io::Error) -> anyhow::Error {
    usage(format!("cannot read {}: {err}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_level_is_the_workers_and_recursive_goes_down() {
        let root = std::env::temp_dir().join(format!("stm-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("sub/deeper")).expect("create the folders");
        for file in ["b.stm", "a.stm", "notes.txt", "sub/c.stm", "sub/deeper/d.stm"] {
            std::fs::write(root.join(file), "").expect("write a file");
        }
        let names = |depth| -> Vec<String> {
            in_dir(&root, depth)
                .expect("listed")
                .iter()
                .filter_map(|p| p.strip_prefix(&root).ok())
                .map(|p| p.display().to_string())
                .collect()
        };
        assert_eq!(names(Depth::Top), ["a.stm", "b.stm"]);
        assert_eq!(
            names(Depth::Recursive),
            ["a.stm", "b.stm", "sub/c.stm", "sub/deeper/d.stm"]
        );
        let missing = in_dir(&root.join("nowhere"), Depth::Top).expect_err("no such folder");
        assert!(missing.to_string().starts_with("cannot read "), "{missing}");
        std::fs::remove_dir_all(&root).expect("clean up");
    }
}
