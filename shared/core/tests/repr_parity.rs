//! `pyvalue::repr` of strings against Python's own `repr` (the test venv's Python, the one
//! harel runs on): the same quotes and the same escapes, for every character Python calls
//! non-printable.

use serde_json::Value;
use stm_core::pyvalue;

mod common;
use common::run_python;

#[test]
fn is_printable_is_pythons_for_every_code_point() {
    let ranges = run_python(
        "import json\nr=[];s=None\nfor c in range(0x110000):\n  u=not chr(c).isprintable()\n  \
         if u and s is None: s=c\n  elif not u and s is not None: r.append((s,c-1)); s=None\n\
         if s is not None: r.append((s,0x10FFFF))\nprint(json.dumps(r))",
        "",
    );
    let ranges: Vec<(u32, u32)> = serde_json::from_value(ranges).expect("ranges");
    let unprintable = |c: u32| ranges.iter().any(|&(a, b)| a <= c && c <= b);
    let mut differ = Vec::new();
    for c in (0..0x11_0000u32).filter_map(char::from_u32) {
        if pyvalue::is_printable(c) == unprintable(c as u32) {
            differ.push(format!("U+{:04X}", c as u32));
        }
    }
    assert!(
        differ.is_empty(),
        "{} code points differ (regenerate with scripts/gen-unprintable.py): {:?}",
        differ.len(),
        &differ[..differ.len().min(20)]
    );
}

#[test]
fn string_repr_is_pythons() {
    let samples = [
        "plain",
        "",
        "it's",
        "say \"hi\"",
        "both ' and \"",
        "back\\slash",
        "tab\tnew\nline\rcr",
        "nbsp\u{a0}nel\u{85}soft\u{ad}",
        "zero\u{200b}width\u{200d}joiner\u{feff}bom",
        "line\u{2028}para\u{2029}",
        "private\u{e000}use",
        "unassigned\u{378}\u{10ffff}",
        "ctl\u{0}\u{1f}\u{7f}\u{9f}",
        "é ü 中文 🎉 e\u{301}",
        "em\u{2003}space ideographic\u{3000}space",
        "tag\u{e0041}",
    ];
    let input = serde_json::to_string(&samples).expect("JSON");
    let theirs = run_python(
        "import json,sys\nprint(json.dumps([repr(s) for s in json.load(sys.stdin)]))",
        &input,
    );
    for (sample, expected) in samples.iter().zip(theirs.as_array().expect("a list")) {
        assert_eq!(
            pyvalue::repr(&Value::from(*sample)),
            expected.as_str().expect("a string"),
            "repr of {sample:?}"
        );
    }
}

/// Python's `repr(float)` for floats from every range: Python draws them from the bits
/// (and a few products that land on a tie between two shortest spellings), sends each as
/// its 64 bits and its repr.
#[test]
fn float_repr_is_pythons() {
    let cases = run_python(
        "import json, random, struct\nrandom.seed(2026)\nout=[]\n\
         def add(f): out.append([struct.unpack('<Q', struct.pack('<d', f))[0], repr(f)])\n\
         for _ in range(20000):\n  f = struct.unpack('<d', struct.pack('<Q', random.getrandbits(64)))[0]\n  \
         if f == f and f not in (float('inf'), float('-inf')): add(f)\n\
         for _ in range(5000): add(random.randint(-2**60, 2**60) * random.choice([0.1, 0.3, 0.7, 1e-5, 1e16, 2.5]))\n\
         for k in range(-30, 308): add(10.0 ** k); add(-(2.0 ** (3 * k)))\n\
         add(5e-324); add(1.7976931348623157e308); add(9007199254740992 * 0.1)\n\
         print(json.dumps(out))",
        "",
    );
    let mut differ = Vec::new();
    let cases = cases.as_array().cloned().unwrap_or_default();
    for case in &cases {
        let bits = case[0].as_u64().expect("bits");
        let expected = case[1].as_str().expect("repr");
        let got = pyvalue::float_repr(f64::from_bits(bits));
        if got != expected {
            differ.push(format!("{expected} (ours {got})"));
        }
    }
    assert!(cases.len() > 25_000);
    assert!(
        differ.is_empty(),
        "{}/{} differ: {:?}",
        differ.len(),
        cases.len(),
        &differ[..differ.len().min(10)]
    );
}
