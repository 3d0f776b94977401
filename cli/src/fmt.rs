//! `stm fmt FILE... [--check | --diff]`: harel's `fmt` (`stm_core::fmt`), its command line
//! and its exit codes: rewrite the files in place (`formatted FILE`), or with `--check`
//! write nothing and exit 2 naming the files that would change, or with `--diff` print
//! a unified diff.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::errors::usage;

/// Lines of context around a change in `--diff` (difflib's default).
const CONTEXT: usize = 3;

/// Format .stm files in place as harel's `fmt` does: 2-space indentation by bracket
/// depth, trailing whitespace trimmed, blank runs collapsed; comments and line
/// structure kept.
#[derive(Args)]
pub struct FmtArgs {
    /// The .stm files.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Write nothing; exit 2 naming the files that would change.
    #[arg(long, conflicts_with = "diff")]
    check: bool,
    /// Print a unified diff instead of writing.
    #[arg(long)]
    diff: bool,
}

pub fn fmt(args: FmtArgs) -> Result<ExitCode> {
    let FmtArgs { files, check, diff } = args;
    let mut changed = Vec::new();
    for path in &files {
        let text = read_utf8(path)?;
        let formatted = stm_core::fmt::format_text(&text);
        if formatted == text {
            continue;
        }
        changed.push(path.display().to_string());
        if diff {
            print!("{}", unified_diff(path, &text, &formatted));
        } else if !check {
            std::fs::write(path, &formatted)
                .map_err(|e| usage(format!("cannot write {}: {e}", path.display())))?;
            println!("formatted {}", path.display());
        }
    }
    if check && !changed.is_empty() {
        eprintln!("would reformat: {}", changed.join(", "));
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

/// The file as harel reads it (UTF-8, universal newlines), or a usage error naming it.
fn read_utf8(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        usage(format!(
            "{} is not UTF-8 text: a .stm file is UTF-8",
            path.display()
        ))
    })?;
    Ok(stm_core::fmt::universal_newlines(&text))
}

/// One line of the diff: kept, removed or added.
#[derive(Clone, Copy, PartialEq)]
enum Op {
    Keep,
    Remove,
    Add,
}

/// The edit script from `old` to `new` by longest common subsequence; a very large file
/// is one replacement (formatting touches most lines of such a file anyway).
fn edits<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<(Op, &'a str)> {
    if old.len().saturating_mul(new.len()) > 25_000_000 {
        let mut out: Vec<(Op, &str)> = old.iter().map(|l| (Op::Remove, *l)).collect();
        out.extend(new.iter().map(|l| (Op::Add, *l)));
        return out;
    }
    let (n, m) = (old.len(), new.len());
    // lcs[i][j]: the longest common subsequence of old[i..] and new[j..]
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if old[i] == new[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            out.push((Op::Keep, old[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // removals before additions, as difflib writes a replaced run
            out.push((Op::Remove, old[i]));
            i += 1;
        } else {
            out.push((Op::Add, new[j]));
            j += 1;
        }
    }
    out
}

/// difflib's `start,length` for a hunk's side.
fn range(start: usize, length: usize) -> String {
    match length {
        1 => format!("{}", start + 1),
        0 => format!("{start},0"),
        _ => format!("{},{length}", start + 1),
    }
}

/// `old` to `new` as a unified diff with harel's headers.
fn unified_diff(path: &Path, old: &str, new: &str) -> String {
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let script = edits(&old_lines, &new_lines);
    let mut out = format!("--- {0} (original)\n+++ {0} (formatted)\n", path.display());
    let changes: Vec<usize> = (0..script.len()).filter(|&k| script[k].0 != Op::Keep).collect();
    let mut k = 0;
    while k < changes.len() {
        // a hunk: changes less than 2 * CONTEXT kept lines apart, with CONTEXT around
        let first = changes[k];
        let mut last = first;
        while k + 1 < changes.len() && changes[k + 1] - last <= 2 * CONTEXT {
            k += 1;
            last = changes[k];
        }
        k += 1;
        let from = first.saturating_sub(CONTEXT);
        let to = (last + CONTEXT + 1).min(script.len());
        let before = &script[..from];
        let old_start = before.iter().filter(|(op, _)| *op != Op::Add).count();
        let new_start = before.iter().filter(|(op, _)| *op != Op::Remove).count();
        let hunk = &script[from..to];
        let old_len = hunk.iter().filter(|(op, _)| *op != Op::Add).count();
        let new_len = hunk.iter().filter(|(op, _)| *op != Op::Remove).count();
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(old_start, old_len),
            range(new_start, new_len)
        ));
        for (op, line) in hunk {
            out.push(match op {
                Op::Keep => ' ',
                Op::Remove => '-',
                Op::Add => '+',
            });
            out.push_str(line);
            if !line.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}
