//! The `.stm` front end's API and the behaviours that are ours rather than harel's.

use std::path::{Path, PathBuf};

use stm_core::definition::{NodeKind, Timeout};
use stm_core::dsl;
use stm_core::Value;

fn ok_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dsl/ok")
}

#[test]
fn parse_lists_what_a_file_declares() {
    // what `stm list` prints: names in first-declaration order
    let text = std::fs::read_to_string(ok_dir().join("multi_machine.stm")).expect("read");
    let p = dsl::parse(&text).expect("parses");
    assert_eq!(p.machines, ["First", "Second"]);
    assert_eq!(p.events, ["Ping", "Pong"]);
    assert!(p.fragments.is_empty());
    let text = std::fs::read_to_string(ok_dir().join("imports_alias.stm")).expect("read");
    let p = dsl::parse(&text).expect("parses");
    assert_eq!(p.imports.len(), 2);
    assert_eq!(
        (p.imports[0].path.as_str(), p.imports[0].alias.as_deref()),
        ("lib/retry.stm", Some("r"))
    );
    assert_eq!((p.imports[1].line, p.imports[1].column), (2, 1));
    assert_eq!(p.bindings.get("do_it").map(String::as_str), Some("jobs.work.run"));
    let p = dsl::parse("fragment F { initial A state A {} }\nguard g = x == 1").expect("parses");
    assert_eq!(
        (p.machines.len(), p.fragments.as_slice(), p.guards.as_slice()),
        (0, &["F".to_string()][..], &["g".to_string()][..])
    );
}

#[test]
fn load_all_and_source_files() {
    let all = dsl::load_all_file(&ok_dir().join("multi_machine.stm")).expect("loads");
    assert_eq!(
        all.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["First", "Second"]
    );
    // a library of fragments only: no machine, no error
    assert!(
        dsl::load_all_file(&ok_dir().join("lib/retry.stm"))
            .expect("loads")
            .len()
            == 1
    );
    let path = ok_dir().join("imports_alias.stm");
    let d = dsl::load_definition_file(&path, None).expect("loads");
    let lib = ok_dir().join("lib/retry.stm");
    let worker = &d.submachines["r.Worker"];
    assert_eq!(worker.id, "r.Worker");
    assert_eq!(worker.node(worker.root).name, "Worker");
    let src = worker.source_file.as_deref().expect("imported file");
    assert_eq!(Path::new(src).canonicalize().ok(), lib.canonicalize().ok());
    // a node spliced from an imported fragment is positioned in the fragment's file
    let work = d.get("Work").expect("Work");
    let pos = d.node(work).pos.clone().expect("pos");
    assert_eq!((pos.line, pos.column), (4, 1));
}

#[test]
fn empty_input_parens_are_no_inputs() {
    // harel 0.9.0 crashes on `f()` (a `None` placeholder in its transformer)
    let d = dsl::load_definition_str("machine M { on enter pkg.f() initial A state A {} }", None, None)
        .expect("loads");
    let a = d.node(d.root).on_enter.clone().expect("hook");
    assert_eq!(a.function, "pkg.f");
    assert!(a.inputs.is_empty());
}

#[test]
fn a_bare_bool_fills_a_value_parameter() {
    // harel reads the bare word as a parameter name and reports `unbound value params: true`
    let src = "fragment F(on: value, wait: value) { initial A state A { on enter pkg.f(flag: on) timeout wait } }\n\
               machine M { initial F use F(on = true, wait = 5) }";
    let d = dsl::load_definition_str(src, None, None).expect("loads");
    let a = d.get("F.A").expect("F.A");
    let node = d.node(a);
    assert_eq!(
        node.on_enter.as_ref().expect("hook").inputs["flag"],
        Value::Bool(true)
    );
    assert_eq!(node.timeout, Some(Timeout::Seconds(5.0)));
}

#[test]
fn strings_keep_non_ascii_characters() {
    // harel decodes the UTF-8 bytes as Latin-1 (`"é"` becomes `"Ã©"`)
    let d = dsl::load_definition_str(
        "machine M { on enter pkg.f(s: \"é ✓\") initial A state A {} }",
        None,
        None,
    )
    .expect("loads");
    assert_eq!(
        d.node(d.root).on_enter.as_ref().expect("hook").inputs["s"],
        Value::from("é ✓")
    );
}

#[test]
fn glued_keywords_are_refused_with_a_hint() {
    let e = dsl::parse("machine M {\n  initialA\n  state A {}\n}").expect_err("glued");
    assert_eq!((e.line, e.column), (Some(2), Some(3)));
    let hint = e.hint.expect("hint");
    assert!(
        hint.contains("`initialA` reads as the keyword `initial` followed by `A` in harel"),
        "{hint}"
    );
}

#[test]
fn deep_nesting_is_bounded() {
    let nested = |n: usize| {
        let mut s = String::from("machine M { initial S0\n");
        for i in 0..n {
            s.push_str(&format!("state S{i} {{ initial S{} \n", i + 1));
        }
        s.push_str(&format!("state S{n} {{}}\n"));
        s.push_str(&"}\n".repeat(n + 1));
        s
    };
    // 90 levels load (parser, expansion and builder), on a test thread's stack
    let d = dsl::load_definition_str(&nested(90), None, None).expect("deep but fine");
    assert_eq!(d.nodes.len(), 92);
    assert_eq!(d.node(d.get("S0").expect("S0")).kind, NodeKind::Composite);
    let e = dsl::parse(&nested(150)).expect_err("too deep");
    assert!(e.message.contains("nesting is too deep"), "{e}");
    let e = dsl::parse(&format!(
        "machine M {{ from A to B on X where {}x == 1{} }}",
        "(".repeat(200),
        ")".repeat(200)
    ))
    .expect_err("too deep");
    assert!(e.message.contains("nesting is too deep"), "{e}");
    // fragments using fragments multiply the depth: bounded too
    let mut src = String::new();
    for i in 0..80 {
        src.push_str(&format!(
            "fragment F{i} {{ initial A state A {{ initial B state B {{ initial F{} use F{} }} }} }}\n",
            i + 1,
            i + 1
        ));
    }
    src.push_str("fragment F80 { initial A state A {} }\nmachine M { initial F0 use F0 }");
    match dsl::load_definition_str(&src, None, None) {
        Ok(d) => panic!("{} nodes: expected too deep", d.nodes.len()),
        Err(e) => assert!(e.message.contains("states nest too deeply"), "{e}"),
    }
}

#[test]
fn many_ambiguous_items_in_one_block() {
    // every `invoke X` and `timeout context k` is a choice point: no recursion per item
    let mut src = String::from("machine M { initial S0\n");
    for i in 0..3000 {
        src.push_str(&format!("state S{i} {{ invoke W{i} timeout context k{i} }}\n"));
    }
    src.push_str("invoke Root\n".repeat(3000).as_str());
    src.push('}');
    let p = dsl::parse(&src).expect("parses");
    assert_eq!(p.machines, ["M"]);
    // and an error at the very end is still found
    let bad = format!("{} oops }}", &src[..src.len() - 1]);
    let e = dsl::parse(&bad).expect_err("oops");
    assert!(e.message.contains("found `oops`"), "{e}");
    assert_eq!(e.line, Some(6002));
}
