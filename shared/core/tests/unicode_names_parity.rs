//! `\N{NAME}` string escapes against Python's own `unicode_escape` codec (the test venv's
//! Python 3.11, the one harel decodes string literals with): every named code point of its
//! Unicode 14.0 database and every alias in our table decode to Python's character, and
//! spellings Python refuses (loose variants, later Unicode names, named sequences,
//! malformed braces) are refused. Each string goes through `dsl::parse` as
//! `import "<string>"`, so the lexer's escape decoder is what is tested.

use serde_json::{json, Value};
use stm_core::dsl;

// the table itself, for the list of its aliases (Python 3.11 cannot list them)
#[allow(dead_code)]
#[path = "../src/dsl/unicode_names.rs"]
mod unicode_names;

mod common;
use common::run_python;

/// Python's side: `names`, every `[name, code]` of `unicodedata.name`, checked to decode;
/// `decoded`, for each string literal body on stdin, the code points `unicode_escape`
/// makes of it (`None` where it refuses it).
const SCRIPT: &str = r#"
import json, sys, unicodedata
assert unicodedata.unidata_version == "14.0.0", unicodedata.unidata_version
def decode(body):
    try:
        return [ord(c) for c in body.encode("utf-8").decode("unicode_escape")]
    except UnicodeDecodeError:
        return None
names = []
for c in range(0x110000):
    n = unicodedata.name(chr(c), None)
    if n is not None:
        names.append([n, c])
bodies = json.load(sys.stdin)
print(json.dumps({"names": names, "decoded": [decode(b) for b in bodies]}))
"#;

/// Names added in Unicode 15.0 (Python 3.11 does not know them).
const UNICODE_15: &[&str] = &[
    "KANNADA SIGN COMBINING ANUSVARA ABOVE RIGHT",
    "KHOJKI LETTER QA",
    "DEVANAGARI SIGN BHALE",
    "DEVANAGARI SIGN WESTERN NINE-LIKE BHALE",
    "KAWI SIGN REPHA",
    "KAWI LETTER VOCALIC L",
    "KAWI VOWEL SIGN ALTERNATE AA",
    "KAWI PUNCTUATION FLOWER",
    "KAWI DIGIT SIX",
    "EGYPTIAN HIEROGLYPH INSERT AT MIDDLE",
    "EGYPTIAN HIEROGLYPH BEGIN WALLED ENCLOSURE",
    "EGYPTIAN HIEROGLYPH MODIFIER DAMAGED AT START AND TOP",
    "KATAKANA LETTER SMALL KO",
    "KAKTOVIK NUMERAL FOUR",
    "KAKTOVIK NUMERAL NINETEEN",
    "LATIN SMALL LETTER S WITH MID-HEIGHT LEFT HOOK",
    "MODIFIER LETTER CYRILLIC SMALL GHE",
    "MODIFIER LETTER CYRILLIC SMALL BYELORUSSIAN-UKRAINIAN I",
    "CYRILLIC SUBSCRIPT SMALL LETTER HARD SIGN",
    "NAG MUNDARI LETTER ETT",
    "NAG MUNDARI DIGIT EIGHT",
    "ARABIC SMALL LOW WORD SAKTA",
    "LAO YAMAKKAN",
    "LUNAR ECLIPSE",
    "ORCUS",
    "MARACAS",
    "HYACINTH",
    "DONKEY",
    "GINGER ROOT",
    "PEA POD",
    "SHAKING FACE",
    "LEFTWARDS PUSHING HAND",
    "RIGHTWARDS PUSHING HAND",
    // the aliases NameAliases.txt 15.0 adds
    "EM",
    "ARABIC SMALL HIGH LIGATURE ALEF WITH YEH BARREE",
    "SUNDANESE LETTER ARCHAIC I",
    // CJK extensions H (15.0) and I (15.1)
    "CJK UNIFIED IDEOGRAPH-31350",
    "CJK UNIFIED IDEOGRAPH-323AF",
    "CJK UNIFIED IDEOGRAPH-2EBF0",
];

/// Named sequences (NamedSequences.txt): not characters, refused by `\N{...}`.
const NAMED_SEQUENCES: &[&str] = &[
    "KEYCAP NUMBER SIGN",
    "KEYCAP DIGIT EIGHT",
    "LATIN CAPITAL LETTER A WITH MACRON AND GRAVE",
    "LATIN CAPITAL LETTER E WITH VERTICAL LINE BELOW AND GRAVE",
    "LATIN CAPITAL LETTER S WITH VERTICAL LINE BELOW",
    "LATIN CAPITAL LETTER A WITH OGONEK AND TILDE",
    "LATIN SMALL LETTER I WITH DOT ABOVE AND GRAVE",
    "LATIN CAPITAL LETTER M WITH TILDE",
    "LATIN SMALL LETTER HOOKED SCHWA WITH ACUTE",
    "DEVANAGARI SEQUENCE FOR LETTER QA",
    "BENGALI SEQUENCE FOR LETTER YYA",
    "TAMIL CONSONANT K",
    "TAMIL CONSONANT SS",
    "TAMIL SYLLABLE KEE",
    "TAMIL SYLLABLE NYU",
    "TAMIL SYLLABLE TTII",
    "TAMIL SYLLABLE MAI",
    "TAMIL SYLLABLE LLLII",
    "TAMIL SYLLABLE KSSII",
    "SINHALA CONSONANT SIGN YANSAYA",
    "KHMER CONSONANT SIGN COENG CHA",
    "KHMER INDEPENDENT VOWEL SIGN COENG RY",
    "KATAKANA LETTER BIDAKUON NGA",
    "MODIFIER LETTER EXTRA-LOW EXTRA-HIGH CONTOUR TONE BAR",
];

/// Literal bodies around the braces, accepted or not.
const MALFORMED: &[&str] = &[
    r"\N",
    r"\N ",
    r"\Nx",
    r"\N{",
    r"\N{}",
    r"\N{ }",
    r"\N{abc",
    r"\N{BULLET",
    r"x\N{BULLET",
    r"\N {BULLET}",
    r"\N{{BULLET}}",
    r"\N{BULLET}}",
    r"\N{BULLET}{",
    r"\N{BULLET}\N",
    r"\N{BULLET}\N{",
    r"\N{BULLET \N{BULLET}",
    r"\n{BULLET}",
    r"\\N{BULLET}",
    r"\\\N{BULLET}",
    r"\N{BULLET}\N{bullet}\N{Bullet}",
    r"\N{LF}\N{lf}\N{Lf}\N{LINE FEED}\N{NEW LINE}\N{EOL}",
    r"\N{NUL}\N{NULL}",
    r"\N{BYTE ORDER MARK}\N{BOM}\N{ZWNBSP}",
    r"\N{U+2022}",
    r"\N{2022}",
    r"\N{0x2022}",
    r"\N{<control>}",
    r"\N{<CJK Ideograph>}",
    r"\N{PRIVATE USE AREA}",
    r"\N{HANGUL SYLLABLE }",
    r"\N{HANGUL SYLLABLE}",
    r"\N{HANGUL SYLLABLE GAG}",
    r"\N{HANGUL SYLLABLE GAGX}",
    r"\N{HANGUL SYLLABLE  GA}",
    r"\N{HANGUL SYLLABLE GGGA}",
    r"\N{HANGUL SYLLABLE A}",
    r"\N{HANGUL SYLLABLE G}",
    r"\N{HANGUL SYLLABLE GA }",
    r"\N{hangul syllable GA}",
    r"\N{Hangul Syllable GA}",
    r"\N{HANGUL SYLLABLE ga}",
    r"\N{HANGUL SYLLABLE-GA}",
    r"\N{CJK UNIFIED IDEOGRAPH-4E00}",
    r"\N{CJK UNIFIED IDEOGRAPH-04E00}",
    r"\N{CJK UNIFIED IDEOGRAPH-004E00}",
    r"\N{CJK UNIFIED IDEOGRAPH-4E0}",
    r"\N{CJK UNIFIED IDEOGRAPH-4e00}",
    r"\N{cjk unified ideograph-4E00}",
    r"\N{CJK UNIFIED IDEOGRAPH-+4E00}",
    r"\N{CJK UNIFIED IDEOGRAPH- 4E00}",
    r"\N{CJK UNIFIED IDEOGRAPH-4E00 }",
    r"\N{CJK UNIFIED IDEOGRAPH-0041}",
    r"\N{CJK UNIFIED IDEOGRAPH-00041}",
    r"\N{CJK UNIFIED IDEOGRAPH-3400}",
    r"\N{CJK UNIFIED IDEOGRAPH-33FF}",
    r"\N{CJK UNIFIED IDEOGRAPH-9FFF}",
    r"\N{CJK UNIFIED IDEOGRAPH-A000}",
    r"\N{CJK UNIFIED IDEOGRAPH-2A6DF}",
    r"\N{CJK UNIFIED IDEOGRAPH-2A6E0}",
    r"\N{CJK UNIFIED IDEOGRAPH-2B738}",
    r"\N{CJK UNIFIED IDEOGRAPH-2B739}",
    r"\N{CJK UNIFIED IDEOGRAPH-3134A}",
    r"\N{CJK UNIFIED IDEOGRAPH-3134B}",
    r"\N{CJK UNIFIED IDEOGRAPH-F900}",
    r"\N{CJK UNIFIED IDEOGRAPH}",
    r"\N{CJK UNIFIED IDEOGRAPH-}",
    r"\N{CJK COMPATIBILITY IDEOGRAPH-F900}",
    r"\N{cjk compatibility ideograph-f900}",
    r"\N{CJK COMPATIBILITY IDEOGRAPH-0F900}",
    r"\N{CJK COMPATIBILITY IDEOGRAPH-2F800}",
    r"\N{TANGUT IDEOGRAPH-17000}",
    r"\N{TANGUT COMPONENT-001}",
    r"\N{KHITAN SMALL SCRIPT CHARACTER-18B00}",
    r"\N{NUSHU CHARACTER-1B170}",
    r"\N{HANGUL JUNGSEONG O-E}\N{HANGUL JUNGSEONG OE}",
    r"\N{TIBETAN MARK BKA- SHOG GI MGO RGYAN}",
    r"\N{TIBETAN MARK BKA-SHOG GI MGO RGYAN}",
    r"\N{LATIN CAPITAL LETTER GHA}\N{LATIN CAPITAL LETTER OI}",
    r"\N{BULLET}\x41\u00e9\101",
];

/// `dsl::parse` of `import "<body>"`: the decoded path's code points, or `None` (and the
/// message) when the string is refused.
fn ours(body: &str) -> Result<Vec<u32>, String> {
    match dsl::parse(&format!("import \"{body}\"\n")) {
        Ok(p) => Ok(p.imports[0].path.chars().map(u32::from).collect()),
        Err(e) => Err(e.to_string()),
    }
}

/// Loose spellings of `name`: what UAX #44 loose matching (or a typo) would make of it.
fn variants(name: &str) -> Vec<String> {
    let mut v = vec![
        name.to_lowercase(),
        name.replace(' ', "_"),
        name.replace(' ', "-"),
        name.replace(' ', ""),
        name.replace('-', " "),
        name.replace('-', ""),
        name.replace(' ', "  "),
        format!(" {name}"),
        format!("{name} "),
        format!("{name}\t"),
        format!("{name}S"),
        name[..name.len() - 1].to_string(),
    ];
    v.retain(|s| s != name && !s.is_empty());
    v
}

#[test]
fn named_escapes_are_pythons() {
    let table = unicode_names::table_entries();

    // the bodies Python decodes for us: each table entry, then the refusal candidates
    let mut bodies: Vec<String> = table.iter().map(|(n, _)| format!("\\N{{{n}}}")).collect();
    let n_table = bodies.len();
    let mut refusals: Vec<String> = Vec::new();
    for name in UNICODE_15.iter().chain(NAMED_SEQUENCES) {
        refusals.push(format!("\\N{{{name}}}"));
        refusals.push(format!("\\N{{{}}}", name.to_lowercase()));
    }
    let n_must_refuse = refusals.len();
    // loose variants of every 97th table entry (names and aliases, a spread of scripts)
    for (name, _) in table.iter().step_by(97) {
        refusals.extend(variants(name).iter().map(|v| format!("\\N{{{v}}}")));
    }
    for name in [
        "HANGUL SYLLABLE GAG",
        "HANGUL SYLLABLE PWILH",
        "CJK UNIFIED IDEOGRAPH-4E00",
    ] {
        refusals.extend(variants(name).iter().map(|v| format!("\\N{{{v}}}")));
    }
    bodies.extend(refusals.iter().cloned());
    bodies.extend(MALFORMED.iter().map(|s| s.to_string()));
    let theirs = run_python(SCRIPT, &json!(bodies).to_string());
    let decoded = theirs["decoded"].as_array().expect("a list");
    let names = theirs["names"].as_array().expect("a list");

    // 1. every named code point, in one file
    let mut text = String::new();
    let mut want = Vec::new();
    for entry in names {
        let name = entry[0].as_str().expect("a name");
        let code = entry[1].as_u64().expect("a code point") as u32;
        text.push_str(&format!("import \"\\N{{{name}}}\"\n"));
        want.push((name, code));
    }
    let program = dsl::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(program.imports.len(), want.len());
    let mut differ = Vec::new();
    for (import, (name, code)) in program.imports.iter().zip(&want) {
        if import.path.chars().map(u32::from).collect::<Vec<_>>() != [*code] {
            differ.push(format!("{name}: U+{code:04X}, ours {:?}", import.path));
        }
    }
    assert!(
        differ.is_empty(),
        "{} names differ: {:?}",
        differ.len(),
        &differ[..differ.len().min(20)]
    );
    assert!(names.len() > 138_000, "{} names", names.len());

    // 2. every entry of our table (names and aliases) is Python's, and the names of the
    //    table are the non-algorithmic names of Python's database
    let python_names: std::collections::HashSet<&str> =
        names.iter().map(|e| e[0].as_str().expect("a name")).collect();
    let text: String = table
        .iter()
        .map(|(name, _)| format!("import \"\\N{{{name}}}\"\n"))
        .collect();
    let program = dsl::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(program.imports.len(), n_table);
    let mut aliases = 0;
    for (((name, ch), py), import) in table.iter().zip(&decoded[..n_table]).zip(&program.imports) {
        assert_eq!(py, &json!([u32::from(*ch)]), "table entry {name}");
        assert_eq!(import.path, ch.to_string(), "{name}");
        if !python_names.contains(name.as_str()) {
            aliases += 1;
        }
    }
    let algorithmic = names
        .iter()
        .filter(|e| {
            let n = e[0].as_str().expect("a name");
            n.starts_with("HANGUL SYLLABLE ") || n.starts_with("CJK UNIFIED IDEOGRAPH-")
        })
        .count();
    assert_eq!(
        n_table - aliases,
        names.len() - algorithmic,
        "table names vs Python's"
    );
    assert_eq!(aliases, 470, "the aliases of Unicode 14.0");

    // 3. the refusal candidates and the brace cases: the same decision, the same result
    let mut refused = 0;
    let mut mismatches = Vec::new();
    for (body, py) in bodies[n_table..].iter().zip(&decoded[n_table..]) {
        let mine = ours(body);
        let same = match (&mine, py) {
            (Ok(cs), Value::Array(p)) => p
                .iter()
                .map(|v| v.as_u64())
                .eq(cs.iter().map(|&c| Some(c.into()))),
            (Err(msg), Value::Null) => {
                assert!(msg.contains("invalid string"), "{body}: {msg}");
                assert!(!msg.contains("Error"), "{body}: {msg}");
                refused += 1;
                true
            }
            _ => false,
        };
        if !same {
            mismatches.push(format!("{body:?}: ours {mine:?}, Python {py}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} differ: {:#?}",
        mismatches.len(),
        mismatches
    );
    // the later names and the named sequences are refused by Python (else they test nothing)
    for (body, py) in refusals[..n_must_refuse].iter().zip(&decoded[n_table..]) {
        assert!(py.is_null(), "Python accepts {body}");
    }
    assert!(refused > 300, "only {refused} refusals checked");
    eprintln!(
        "{} names, {} table entries ({aliases} aliases), {} other spellings ({refused} refused)",
        names.len(),
        n_table,
        bodies.len() - n_table
    );
}
