//! Every environment variable's name is spelled in `shared/env/src/lib.rs` and nowhere
//! else in the crates' sources (`cli/src`, `shared/*/src`, `functions/*/src`): a string
//! literal that starts with `STM_`, or that equals a listed name (`AWS_REGION`), is a
//! second spelling, which a rename would miss. Prose that mentions a name (`or set
//! STM_DEFINITIONS_DIR`) is not a name and may stay. The tests' own directories are left
//! out on purpose: they spell the names to check the contract from outside.

use std::path::{Path, PathBuf};

/// The workspace root: two levels above this crate.
fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.join("../..");
    assert!(
        root.join("Cargo.toml").is_file() && root.join("cli/src").is_dir(),
        "the scan runs in the workspace only (no cli/src under {})",
        root.display()
    );
    root
}

/// The values of the list's `pub const NAME: &str = "VALUE";` lines.
fn listed(list: &str) -> Vec<String> {
    list.lines()
        .filter_map(|line| line.trim().strip_prefix("pub const "))
        .filter_map(|rest| rest.split_once(": &str = \""))
        .filter_map(|(_, value)| value.strip_suffix("\";"))
        .map(str::to_string)
        .collect()
}

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `src` directories of the CLI, the shared crates and the functions.
fn source_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.join("cli/src")];
    for group in ["shared", "functions"] {
        let Ok(entries) = std::fs::read_dir(root.join(group)) else {
            continue;
        };
        let mut crates: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path().join("src"))
            .filter(|src| src.is_dir())
            .collect();
        crates.sort();
        dirs.extend(crates);
    }
    dirs
}

/// The string literals of Rust source `text` with the line each starts on: ordinary,
/// byte and raw strings; comments, char literals and lifetimes skipped.
fn string_literals(text: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = text.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // block comments nest in Rust
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    line += usize::from(chars[i] == '\n');
                    i += 1;
                }
            }
        } else if c == 'r'
            && (i == 0 || !ident(chars[i - 1]) || (chars[i - 1] == 'b' && (i < 2 || !ident(chars[i - 2]))))
            && matches!(next, Some('"' | '#'))
        {
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                // `r#ident`, a raw identifier
                i = j;
                continue;
            }
            let hashes = j - i - 1;
            let start_line = line;
            let mut k = j + 1;
            let mut value = String::new();
            while k < chars.len() {
                if chars[k] == '"' && (1..=hashes).all(|h| chars.get(k + h) == Some(&'#')) {
                    break;
                }
                line += usize::from(chars[k] == '\n');
                value.push(chars[k]);
                k += 1;
            }
            out.push((start_line, value));
            i = k + 1 + hashes;
        } else if c == '"' {
            let start_line = line;
            let mut k = i + 1;
            let mut value = String::new();
            while k < chars.len() && chars[k] != '"' {
                if chars[k] == '\\' {
                    value.push(chars[k]);
                    k += 1;
                }
                if let Some(&ch) = chars.get(k) {
                    line += usize::from(ch == '\n');
                    value.push(ch);
                }
                k += 1;
            }
            out.push((start_line, value));
            i = k + 1;
        } else if c == '\'' {
            // a char literal ('x', '\n', '\u{1F600}', '"'), else a lifetime or label
            if next == Some('\\') {
                // past the escaped character, which may be a quote itself ('\'')
                let mut k = i + 3;
                while k < chars.len() && chars[k] != '\'' {
                    k += 1;
                }
                i = k + 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// What a literal spells that only the list may: a `STM_` name (or a `STM_X=...` line), or
/// a listed name exactly.
fn second_spelling(literal: &str, names: &[String]) -> bool {
    literal.starts_with("STM_") || names.iter().any(|name| name == literal)
}

#[test]
fn the_lexer_finds_strings_and_skips_comments_chars_and_lifetimes() {
    let text = "fn f<'a>(x: &'a str) -> char { // \"STM_NO\"\n  /* \"STM_NO\" /* nested */ */ \
                let q = '\"'; let p = '\\''; let s = \"STM_A\"; let r = r#\"STM_B \"quoted\"\"#; let b = br\"AWS_REGION\"; \
                let e = \"a \\\" STM_NO\"; 'x' }";
    let found: Vec<String> = string_literals(text).into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        found,
        ["STM_A", "STM_B \"quoted\"", "AWS_REGION", "a \\\" STM_NO"],
        "{found:?}"
    );
    let names = vec!["AWS_REGION".to_string()];
    let flagged: Vec<&String> = found.iter().filter(|s| second_spelling(s, &names)).collect();
    assert_eq!(flagged, ["STM_A", "STM_B \"quoted\"", "AWS_REGION"]);
}

#[test]
fn every_variable_is_named_in_the_list_only() {
    let root = repo_root();
    let list_file = root.join("shared/env/src/lib.rs");
    let list = std::fs::read_to_string(&list_file).expect("the list is readable");
    let names = listed(&list);
    assert!(
        names.len() >= 20 && names.iter().any(|n| n == "STM_EMULATOR"),
        "the list's names were not read: {names:?}"
    );
    let mut seen = std::collections::BTreeSet::new();
    for name in &names {
        assert!(seen.insert(name), "{name} is listed twice");
    }

    let mut files = Vec::new();
    for dir in source_dirs(&root) {
        rust_files(&dir, &mut files);
    }
    assert!(files.len() > 100, "too few sources found: {}", files.len());
    let list_file = list_file.canonicalize().expect("the list's path");
    let mut found = Vec::new();
    for file in &files {
        if file.canonicalize().is_ok_and(|f| f == list_file) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("a readable source");
        for (line, literal) in string_literals(&text) {
            if second_spelling(&literal, &names) {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                found.push(format!("{}:{line}: {literal:?}", shown.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "environment variable names spelled outside shared/env/src/lib.rs (use its constants, \
         `stm_env::QUEUE_URL`, or add the name there):\n  {}",
        found.join("\n  ")
    );
}
