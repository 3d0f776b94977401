//! Error golden tests: every `tests/data/dsl/err/*.stm` fails to load with the expected
//! message, at the line and column harel 0.9.0 reports (recorded in `err/<name>.json`
//! by `tests/data/dsl/dump_harel_errors.py`). Where harel accepts the file or crashes
//! (our deliberate differences), the expected location is given here.

use std::path::{Path, PathBuf};

use serde_json::Value;
use stm_core::dsl::{self, DslError};

fn err_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dsl/err")
}

struct Case {
    name: &'static str,
    /// substrings our message must contain
    message: &'static [&'static str],
    /// our location when harel reports none (it accepts the file or crashes)
    own_location: Option<(usize, usize)>,
    /// the file the error must name, relative to `err/` (default: the case's own file)
    file: Option<&'static str>,
    /// a substring of the hint
    hint: Option<&'static str>,
    /// our location where harel points at the start of the transition: the caret goes
    /// under the name that does not resolve
    name_at: Option<(usize, usize)>,
}

const fn case(name: &'static str, message: &'static [&'static str]) -> Case {
    Case {
        name,
        message,
        own_location: None,
        file: None,
        hint: None,
        name_at: None,
    }
}

impl Case {
    const fn at(mut self, line: usize, column: usize) -> Self {
        self.own_location = Some((line, column));
        self
    }
    const fn in_file(mut self, file: &'static str) -> Self {
        self.file = Some(file);
        self
    }
    const fn hint(mut self, hint: &'static str) -> Self {
        self.hint = Some(hint);
        self
    }
    const fn name_at(mut self, line: usize, column: usize) -> Self {
        self.name_at = Some((line, column));
        self
    }
}

const CASES: &[Case] = &[
    // --- syntax ---
    case(
        "syntax_arrow",
        &["expected `to`, `choose`, `select` or `join`", "found `-`"],
    )
    .hint("no `->` arrow"),
    case("syntax_missing_event", &["expected an event name", "found `}`"]),
    case("syntax_eof", &["unexpected end of input"]).hint("missing its closing `}`"),
    case("syntax_typo_keyword", &["found `stat`"]).hint("did you mean `state`?"),
    case("syntax_assign_in_where", &["a comparison operator", "found `=`"]),
    case("syntax_timeout_float", &["a whole number", "found `.5`"]),
    case("syntax_timeout_negative", &["a number of seconds", "found `-`"]),
    case("syntax_bad_character", &["unexpected character `@`"]),
    case("syntax_unterminated_string", &["unterminated string"]),
    case(
        "syntax_dotted_state_name",
        &["a name cannot contain `.`", "`a.b`"],
    ),
    case("syntax_bad_type", &["expected a type", "found `strin`"]),
    case("syntax_empty_file", &["unexpected end of input", "a declaration"]),
    case("syntax_with_commas", &["found `,`"]),
    case("syntax_furthest_alternative", &["found `bar`"]),
    case(
        "syntax_select_without_branches",
        &["a result value", "found `else`"],
    ),
    case(
        "syntax_fragment_param_kind",
        &["a parameter kind", "found `number`"],
    ),
    case("syntax_stray_brace", &["expected a declaration", "found `}`"]),
    case("syntax_sign_space", &["found `-`"]),
    // --- structure (the parser's transformer) ---
    case(
        "ttl_on_state",
        &["`ttl` is only allowed at the machine level, not on state B"],
    ),
    case(
        "context_on_fragment",
        &["`context` is only allowed at the machine level, not on fragment F"],
    ),
    case(
        "ttl_in_inline_invoke",
        &["`ttl` is only allowed at the machine level, not on an inline `invoke` target"],
    ),
    case("namespace_unknown", &["unknown namespace 'ctx' in 'ctx.n'"]),
    case(
        "namespace_nested",
        &["'context.a.b': a reference names one field of `context`, not a nested path"],
    ),
    case(
        "set_not_context",
        &["`set` writes the execution context: 'event.n' must be `context.<field>`"],
    ),
    case(
        "set_operand_namespace",
        &["unknown namespace 'count' in 'count.x'"],
    ),
    case(
        "context_default_optional",
        &["context field 'n' has a default, so it can't also be optional"],
    ),
    // --- resolution (the loader and the builder) ---
    case("unknown_fragment", &["use of unknown fragment 'Retyr'"]).hint("known fragments: Retry"),
    case(
        "unbound_handler",
        &["unbound action handlers: archive, notify, pick"],
    )
    .hint("bind {"),
    case("unbound_guard", &["unbound guards: okay"]),
    case("unbound_value", &["unbound value params: budget"]),
    case("timeout_context_param", &["unbound value params: context"]),
    case("use_unknown_args", &["use 'F': unknown args: b, c"]),
    case("use_missing_args", &["use 'F': missing args: b, c"]),
    case("use_bad_arg_kind", &["use 'F': arg 'next' must be a state name"]),
    case(
        "use_collision",
        &["use 'F' as 'F' collides with an existing state"],
    ),
    case(
        "unresolved_target",
        &["cannot resolve transition target 'Missing' from state A"],
    )
    .name_at(6, 15),
    case(
        "unresolved_source",
        &["cannot resolve transition source 'Nope' from machine M"],
    )
    .name_at(4, 8),
    case(
        "unresolved_choice_target",
        &["cannot resolve choice target 'Elsewhere' from machine M"],
    )
    .name_at(6, 13),
    // harel resolves transitions composite by composite, innermost first
    case(
        "unresolved_in_nested_first",
        &["cannot resolve transition target 'Inner' from state P"],
    )
    .name_at(8, 15),
    case("import_missing", &["import not found: lib/does_not_exist.stm"]).hint("lib/does_not_exist.stm"),
    case("import_syntax_error", &["found `X`"]).in_file("lib/broken.stm"),
    case(
        "import_fragment_bad_target",
        &["cannot resolve transition target 'Gone' from state X"],
    )
    .name_at(4, 13)
    .in_file("lib/badfrag.stm"),
    case("multiple_machines", &["multiple machines (One, Two)"]),
    case("no_machine", &["no machine declared"]),
    // --- deliberate differences: harel accepts or crashes ---
    case(
        "import_cycle",
        &[
            "import cycle: ",
            "cycle_a.stm -> ",
            "cycle_b.stm -> ",
            "cycle_a.stm",
        ],
    )
    .at(1, 1)
    .in_file("lib/cycle_b.stm"),
    case("fragment_recursion", &["fragment 'F' uses itself"]).at(4, 3),
    case("guard_recursion", &["guard 'a' refers to itself"]).at(6, 3),
    case(
        "timeout_param_string",
        &["timeout of state W.X must be a number of seconds, got '5'"],
    )
    .at(1, 37),
    case("string_bad_escape", &["invalid string: truncated `\\xXX` escape"]).at(3, 36),
    case("keyword_glued", &["found `fromA`"]).at(4, 3),
];

fn harel_outcome(name: &str) -> Value {
    let path = err_dir().join(format!("{name}.json"));
    serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("golden json")
}

fn load(name: &str) -> DslError {
    let path = err_dir().join(format!("{name}.stm"));
    match dsl::load_definition_file(&path, None) {
        Ok(_) => panic!("{name}: loaded, expected an error"),
        Err(e) => e,
    }
}

#[test]
fn every_error_case_has_an_expectation() {
    let mut names: Vec<String> = std::fs::read_dir(err_dir())
        .expect("err dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "stm"))
        .map(|p| p.file_stem().expect("stem").to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut listed: Vec<String> = CASES.iter().map(|c| c.name.to_string()).collect();
    listed.sort();
    assert_eq!(names, listed);
    assert!(CASES.len() >= 20);
}

#[test]
fn errors_match_harel() {
    let mut failures = Vec::new();
    for c in CASES {
        let e = load(c.name);
        let harel = harel_outcome(c.name);
        let mut problems = Vec::new();
        for m in c.message {
            if !e.message.contains(m) {
                problems.push(format!("message lacks {m:?}"));
            }
        }
        let harel_loc = match (harel["line"].as_u64(), harel["column"].as_u64()) {
            (Some(l), Some(col)) => Some((l as usize, col as usize)),
            _ => None,
        };
        let expected_loc = match (harel["outcome"].as_str(), harel_loc, c.own_location) {
            (Some("error"), Some(_), None) if c.name_at.is_some() => c.name_at,
            (Some("error"), Some(loc), None) => Some(loc),
            (Some("error"), Some(_), Some(_)) => {
                problems.push("harel reports a location: do not override it".into());
                None
            }
            (_, _, own) => own,
        };
        let ours = match (e.line, e.column) {
            (Some(l), Some(col)) => Some((l, col)),
            _ => None,
        };
        if ours != expected_loc {
            problems.push(format!(
                "location {ours:?}, expected {expected_loc:?} (harel: {harel_loc:?})"
            ));
        }
        if harel["outcome"] == "error" && harel_loc.is_none() && ours.is_some() {
            problems.push("harel reports no location".into());
        }
        let want_file = err_dir().join(c.file.unwrap_or(&format!("{}.stm", c.name)));
        let got_file = e.file.as_deref().map(Path::new).map(Path::to_path_buf);
        if got_file.as_ref().and_then(|f| f.canonicalize().ok()) != want_file.canonicalize().ok() {
            problems.push(format!("file {:?}, expected {}", e.file, want_file.display()));
        }
        if e.line.is_some() && e.snippet.is_none() {
            problems.push("a located error without its source line".into());
        }
        if let Some(h) = c.hint {
            if !e.hint.as_deref().unwrap_or("").contains(h) {
                problems.push(format!("hint {:?} lacks {h:?}", e.hint));
            }
        }
        if !problems.is_empty() {
            failures.push(format!("{}: {}\n{e}", c.name, problems.join("; ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failing cases:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn renders_with_a_caret() {
    let e = load("syntax_missing_event");
    let file = err_dir().join("syntax_missing_event.stm").display().to_string();
    assert_eq!(
        e.to_string(),
        format!("error: expected an event name, found `}}`\n --> {file}:5:1\n  |\n5 | }}\n  | ^")
    );
    let e = load("syntax_arrow");
    let text = e.to_string();
    assert!(
        text.contains("5 |   from A -> B on Go\n  |          ^\n  = hint: transitions read"),
        "{text}"
    );
}

#[test]
fn errors_from_text_name_no_file() {
    let e = dsl::parse("machine M {\n  from A to B on\n}").expect_err("syntax error");
    assert_eq!((e.file.as_deref(), e.line, e.column), (None, Some(3), Some(1)));
    assert!(e.to_string().contains(" --> <input>:3:1"), "{e}");
    let e = dsl::load_definition_str("machine M { state A {} from A to B }", None, None).expect_err("target");
    assert_eq!((e.line, e.column), (Some(1), Some(34)));
    assert!(e.message.contains("cannot resolve transition target 'B'"));
}

/// A misspelt state: the message names where it was looked up (never an empty scope),
/// the caret is under the name, and the hint offers the nearest state.
#[test]
fn a_misspelt_target_state_is_pointed_at_with_the_nearest_name() {
    let source = "event Pay {}\nevent Go {}\nmachine Shop {\n  initial Cart\n  state Cart {}\n  state Paid {}\n  from Cart to Piad on Pay\n}\n";
    let e = dsl::load_definition_str(source, None, None).expect_err("an unknown target");
    assert_eq!(
        e.to_string(),
        "error: cannot resolve transition target 'Piad' from machine Shop\n \
         --> <input>:7:16\n  |\n7 |   from Cart to Piad on Pay\n  |                ^\n  = hint: did you mean `Paid`?"
    );
    // inside a composite, a choice target, and a source: the same three parts
    let source = "machine M {\n  initial A\n  state A {\n    initial Waiting\n    state Waiting {}\n    from Waiting choose {\n      when x == 1 to Wating\n    }\n  }\n}\n";
    let e = dsl::load_definition_str(source, None, None).expect_err("an unknown choice target");
    assert_eq!(e.message, "cannot resolve choice target 'Wating' from state A");
    assert_eq!((e.line, e.column), (Some(7), Some(22)));
    assert_eq!(e.hint.as_deref(), Some("did you mean `Waiting`?"));
    let e = dsl::load_definition_str(
        "machine M {\n  initial Cart\n  state Cart {}\n  from Crat to Cart on Go\n}\n",
        None,
        None,
    )
    .expect_err("an unknown source");
    assert_eq!(
        e.message,
        "cannot resolve transition source 'Crat' from machine M"
    );
    assert_eq!((e.line, e.column), (Some(4), Some(8)));
    assert_eq!(e.hint.as_deref(), Some("did you mean `Cart`?"));
    // nothing close: no guess
    let e = dsl::load_definition_str(
        "machine M {\n  initial A\n  state A {}\n  from A to Elsewhere on Go\n}\n",
        None,
        None,
    )
    .expect_err("an unknown target");
    assert_eq!(e.hint, None);
}

#[test]
fn machine_selection() {
    let src = "machine One { initial A state A {} }\nmachine Two { initial B state B {} }";
    assert_eq!(
        dsl::load_definition_str(src, Some("Two"), None).expect("Two").id,
        "Two"
    );
    let e = dsl::load_definition_str(src, Some("Three"), None).expect_err("no Three");
    assert!(e.message.contains("no machine named 'Three'"), "{}", e.message);
    assert_eq!(e.line, None);
}
