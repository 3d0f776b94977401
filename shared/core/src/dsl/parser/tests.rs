//! Unit tests of the parser: error positions and the ambiguous prefixes.

use super::*;

use super::report::end_position;

fn err(src: &str) -> DslError {
    parse_program(src).expect_err("should fail")
}

#[test]
fn end_position_matches_python_splitlines() {
    assert_eq!(end_position(""), (1, 1, String::new()));
    assert_eq!(end_position("a\n"), (1, 2, "a".into()));
    assert_eq!(end_position("a\n\n"), (2, 1, String::new()));
    assert_eq!(end_position("ab\r\ncd"), (2, 3, "cd".into()));
    assert_eq!(end_position("ab\rc"), (2, 2, "c".into()));
}

#[test]
fn error_positions() {
    // a word running into a keyword fails where harel's lexer fails
    let e = err("machine M { from A to B on X where high or or not_rejected }");
    assert_eq!((e.line, e.column), (Some(1), Some(49)), "{e}");
    let e = err("event E { x: stringall }");
    assert_eq!((e.line, e.column), (Some(1), Some(24)), "{e}");
    let e = err("machine M {\n  context.x\n}");
    assert_eq!((e.line, e.column), (Some(2), Some(10)), "{e}");
    let e = err("bind { a == pkg.f }");
    assert_eq!((e.line, e.column), (Some(1), Some(11)), "{e}");
    // harel would accept it: our (whole-word) error, with a hint
    let e = err("machine M { fromA to B }");
    assert_eq!((e.line, e.column), (Some(1), Some(13)), "{e}");
    assert!(
        e.hint
            .as_deref()
            .unwrap_or("")
            .contains("`fromA` reads as the keyword `from` followed by `A`"),
        "{e}"
    );
    let e = err("machine M {\n  from A to B on\n}");
    assert_eq!((e.line, e.column), (Some(3), Some(1)));
    assert!(e.message.contains("an event name"), "{}", e.message);
    let e = err("machine M {\n  from A -> B\n}");
    assert_eq!((e.line, e.column), (Some(2), Some(10)));
    assert!(e.hint.as_deref().unwrap_or("").contains("->"));
    let e = err("machine M {\n  state A {\n");
    assert_eq!((e.line, e.column), (Some(2), Some(12)));
    assert!(e.message.starts_with("unexpected end of input"));
    let e = err("machine M { timeout 1.5 }");
    assert_eq!((e.line, e.column), (Some(1), Some(22)));
    let e = err("machine M { from A to B on enter foo bar }");
    assert_eq!((e.line, e.column), (Some(1), Some(38)));
    let e = err("machine M {\n  stat A {}\n}");
    assert_eq!((e.line, e.column), (Some(2), Some(3)));
    assert_eq!(e.hint.as_deref(), Some("did you mean `state`?"));
    let e = err("");
    assert_eq!((e.line, e.column), (Some(1), Some(1)));
    let e = err("machine M { state a.b {} }");
    assert_eq!((e.line, e.column), (Some(1), Some(20)));
}

#[test]
fn ambiguous_prefixes_read_like_harel() {
    let items = |src: &str| match parse_program(src).expect("parses").remove(0) {
        Stmt::Machine { items, .. } => items,
        other => panic!("{other:?}"),
    };
    // `on enter X` after a transition: the hook when both read
    let it = items("machine M { from A to B on enter cancel_on_failure }");
    assert!(
        matches!(
            &it[..],
            [Item::Transition { trigger: None, .. }, Item::OnEnter(_)]
        ),
        "{it:?}"
    );
    let it = items("machine M { from A to B on enter from B to C }");
    assert!(
        matches!(
            &it[..],
            [Item::Transition { trigger: Some(_), .. }, Item::Transition { .. }]
        ),
        "{it:?}"
    );
    // `not` as a guard name
    let it = items("machine M { from A choose { when x == 1 and not to B } }");
    assert!(matches!(&it[..], [Item::Choice { .. }]), "{it:?}");
    let it = items("machine M { from A to B on X where not and y == 1 }");
    let [Item::Transition {
        trigger: Some(Trigger {
            pred: Some(Pred::All(v)),
            ..
        }),
        ..
    }] = &it[..]
    else {
        panic!("{it:?}")
    };
    assert_eq!(v[0], Pred::Guard("not".into()));
    let it = items("machine M { from A to B on X where not ok }");
    assert!(matches!(
        &it[..],
        [Item::Transition {
            trigger: Some(Trigger {
                pred: Some(Pred::Not(_)),
                ..
            }),
            ..
        }]
    ));
    // `invoke X`: the machine X when both read
    let it = items("machine M { invoke cancel_on_failure }");
    assert!(matches!(&it[..], [Item::Invoke { fqn: Some(_), .. }]), "{it:?}");
    let it = items("machine M { invoke for x in y }");
    assert!(
        matches!(
            &it[..],
            [Item::Invoke {
                fqn: None,
                each: Some(_),
                ..
            }]
        ),
        "{it:?}"
    );
    let it = items("machine M { invoke with { a: b } }");
    assert!(
        matches!(&it[..], [Item::Invoke { fqn: None, .. }, Item::InvokeWith(_)]),
        "{it:?}"
    );
    // `timeout context k`: the context key when both read
    let it = items("machine M { timeout context cancel_on_failure }");
    assert!(
        matches!(&it[..], [Item::Timeout(TimeoutSpec::Context(_))]),
        "{it:?}"
    );
    let it = items("machine M { timeout context initial X }");
    assert!(
        matches!(&it[..], [Item::Timeout(TimeoutSpec::Param(_)), Item::Initial(_)]),
        "{it:?}"
    );
}

#[test]
fn every_word_the_parser_matches_is_a_keyword() {
    // the lists the parser branches on are parts of the one exported list
    for word in ITEM_WORDS
        .iter()
        .chain(&DECL_WORDS)
        .chain(&TYPES)
        .chain(&PARAM_KINDS)
    {
        assert!(KEYWORDS.contains(word), "`{word}` is missing from KEYWORDS");
    }
    for (i, word) in KEYWORDS.iter().enumerate() {
        assert!(!KEYWORDS[..i].contains(word), "`{word}` is twice in KEYWORDS");
    }
}
