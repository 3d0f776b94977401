//! `\N{NAME}` string escapes against Python's own `unicode_escape` codec (the test venv's
//! Python 3.11, the one harel decodes string literals with), in both directions:
//! * every code point: the names `unicode_names2` gives, less the characters
//!   `unicode_names.rs` holds back as later than Unicode 14.0, are exactly the names of
//!   Python's database, and each decodes to Python's character; the held-back names are
//!   refused by both;
//! * every alias: each formal alias of the crate's NameAliases.txt (the only list of the
//!   aliases it finds) decodes as Python decodes it, the ones Python refuses being exactly
//!   the later ones `unicode_names.rs` lists;
//! * spellings Python refuses (loose variants, a name with a letter added, later Unicode
//!   names, named sequences, malformed braces) are refused.
//!
//! Each string goes through `dsl::parse` as `import "<string>"`, so the lexer's escape
//! decoder is what is tested.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{json, Value};
use stm_core::dsl;

// the lookup itself, for what it holds back (the later characters and aliases)
#[allow(dead_code)]
#[path = "../src/dsl/unicode_names.rs"]
mod unicode_names;

mod common;
use common::run_python;

/// Python's side: `names`, every `[name, code]` of `unicodedata.name`; `decoded`, for each
/// string literal body on stdin, the code points `unicode_escape` makes of it (`None`
/// where it refuses it).
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

/// The formal aliases of Unicode 14.0 (NameAliases-14.0.0.txt), all of which Python 3.11
/// accepts: aliases are never withdrawn, so they are the crate's (16.0) less the later ones.
const ALIASES_14: usize = 470;

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

/// The `[[package]]` version of `name` in the workspace's Cargo.lock.
fn locked_version(name: &str) -> String {
    let lock = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
    let text = std::fs::read_to_string(&lock).unwrap_or_else(|e| panic!("{}: {e}", lock.display()));
    let entry = format!("name = \"{name}\"\nversion = \"");
    let at = text
        .find(&entry)
        .unwrap_or_else(|| panic!("{name} is not in Cargo.lock"))
        + entry.len();
    text[at..].split('"').next().expect("a version").to_string()
}

/// The formal aliases the crate finds, `(alias, code point)`: its package's
/// NameAliases.txt, which its build script compiles in (the crate cannot list them). The
/// package is where cargo unpacks registry sources, under CARGO_HOME.
fn crate_aliases() -> Vec<(String, u32)> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME");
    let package = format!("unicode_names2-{}", locked_version("unicode_names2"));
    let registries = home.join("registry/src");
    let file = std::fs::read_dir(&registries)
        .unwrap_or_else(|e| panic!("{}: {e}", registries.display()))
        .filter_map(Result::ok)
        .map(|index| index.path().join(&package).join("data/NameAliases.txt"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("no {package}/data/NameAliases.txt under {}", registries.display()));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    assert!(
        text.starts_with("# NameAliases-16.0.0.txt"),
        "{}: not Unicode 16.0",
        file.display()
    );
    let mut aliases = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let mut fields = line.split(';');
        let code = fields.next().and_then(|c| u32::from_str_radix(c, 16).ok());
        let alias = fields.next();
        match (code, alias) {
            (Some(code), Some(alias)) => aliases.push((alias.to_string(), code)),
            _ => panic!("{}: bad line {line:?}", file.display()),
        }
    }
    aliases
}

/// Appends `items` to `bodies`: where they are.
fn group(bodies: &mut Vec<String>, items: Vec<String>) -> std::ops::Range<usize> {
    let at = bodies.len();
    bodies.extend(items);
    at..bodies.len()
}

fn is_algorithmic(name: &str) -> bool {
    name.starts_with("HANGUL SYLLABLE ") || name.starts_with("CJK UNIFIED IDEOGRAPH-")
}

#[test]
fn named_escapes_are_pythons() {
    // the crate's side: the name of every code point, split at Unicode 14.0
    let mut crate_14: BTreeMap<u32, String> = BTreeMap::new();
    let mut later: Vec<String> = Vec::new();
    for ch in (0..=0x10FFFF).filter_map(char::from_u32) {
        if let Some(name) = unicode_names2::name(ch) {
            if unicode_names::in_unicode_14(ch) {
                crate_14.insert(u32::from(ch), name.to_string());
            } else {
                later.push(name.to_string());
            }
        }
    }
    let aliases = crate_aliases();

    // the bodies Python decodes for us, in groups
    let mut bodies: Vec<String> = Vec::new();
    let alias_bodies = group(
        &mut bodies,
        aliases
            .iter()
            .flat_map(|(a, _)| [format!("\\N{{{a}}}"), format!("\\N{{{}}}", a.to_lowercase())])
            .collect(),
    );
    let later_bodies = group(&mut bodies, later.iter().map(|n| format!("\\N{{{n}}}")).collect());
    let mut must_refuse = Vec::new();
    for name in UNICODE_15.iter().chain(NAMED_SEQUENCES) {
        must_refuse.push(format!("\\N{{{name}}}"));
        must_refuse.push(format!("\\N{{{}}}", name.to_lowercase()));
    }
    let must_refuse_bodies = group(&mut bodies, must_refuse);
    // a letter more: the crate takes any key that starts with the name it hashes to
    let mut others: Vec<String> = crate_14
        .values()
        .filter(|n| !is_algorithmic(n))
        .map(|n| format!("\\N{{{n}S}}"))
        .collect();
    // loose variants of every 97th name (a spread of scripts) and of every alias
    let sample = crate_14.values().filter(|n| !is_algorithmic(n)).step_by(97);
    for name in sample.chain(aliases.iter().map(|(a, _)| a)) {
        others.extend(variants(name).iter().map(|v| format!("\\N{{{v}}}")));
    }
    for name in [
        "HANGUL SYLLABLE GAG",
        "HANGUL SYLLABLE PWILH",
        "CJK UNIFIED IDEOGRAPH-4E00",
        "CJK UNIFIED IDEOGRAPH-3134A",
    ] {
        others.extend(variants(name).iter().map(|v| format!("\\N{{{v}}}")));
    }
    others.extend(MALFORMED.iter().map(|s| s.to_string()));
    let other_bodies = group(&mut bodies, others);

    let theirs = run_python(SCRIPT, &json!(bodies).to_string());
    let decoded = theirs["decoded"].as_array().expect("a list");
    let names = theirs["names"].as_array().expect("a list");
    assert_eq!(decoded.len(), bodies.len());
    let python: BTreeMap<u32, String> = names
        .iter()
        .map(|e| {
            let code = e[1].as_u64().expect("a code point") as u32;
            (code, e[0].as_str().expect("a name").to_string())
        })
        .collect();
    assert!(python.len() > 138_000, "{} names", python.len());

    // 1. every code point: the crate's names up to 14.0 are Python's names, both ways
    let differ: Vec<String> = python
        .keys()
        .chain(crate_14.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|code| python.get(code) != crate_14.get(code))
        .map(|code| {
            format!(
                "U+{code:04X}: Python {:?}, crate {:?}",
                python.get(code),
                crate_14.get(code)
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "{} code points differ: {:?}",
        differ.len(),
        &differ[..differ.len().min(20)]
    );

    // 2. every name of Python's decodes to its character, in one file
    let text: String = python
        .values()
        .map(|name| format!("import \"\\N{{{name}}}\"\n"))
        .collect();
    let program = dsl::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(program.imports.len(), python.len());
    let differ: Vec<String> = program
        .imports
        .iter()
        .zip(&python)
        .filter(|(import, (code, _))| import.path.chars().map(u32::from).ne([**code]))
        .map(|(import, (code, name))| format!("{name}: U+{code:04X}, ours {:?}", import.path))
        .collect();
    assert!(
        differ.is_empty(),
        "{} names differ: {:?}",
        differ.len(),
        &differ[..differ.len().min(20)]
    );

    // 3. every body: our decision and result are Python's
    let mut refused = 0;
    let mut mismatches = Vec::new();
    for (body, py) in bodies.iter().zip(decoded) {
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
        &mismatches.len(),
        &mismatches[..mismatches.len().min(40)]
    );

    // 4. the aliases: each decodes to the character the file gives it, or Python refuses
    //    it; those refused are the later ones, and the rest Unicode 14.0's
    let mut accepted = 0;
    let mut refused_aliases = BTreeSet::new();
    for ((alias, code), py) in aliases.iter().zip(decoded[alias_bodies].chunks(2)) {
        assert_eq!(py[0], py[1], "{alias} in capitals and in small letters");
        if py[0].is_null() {
            refused_aliases.insert(alias.as_str());
        } else {
            assert_eq!(py[0], json!([code]), "{alias}");
            accepted += 1;
        }
    }
    assert_eq!(
        refused_aliases,
        unicode_names::LATER_ALIASES.iter().copied().collect(),
        "the aliases Python 3.11 refuses"
    );
    assert_eq!(accepted, ALIASES_14, "the aliases of Unicode 14.0");

    // 5. what must be refused is refused by Python (else it tests nothing)
    for range in [later_bodies, must_refuse_bodies] {
        for (body, py) in bodies[range.clone()].iter().zip(&decoded[range]) {
            assert!(py.is_null(), "Python accepts {body}");
        }
    }
    assert!(later.len() > 10_000, "{} later names", later.len());
    assert!(refused > 20_000, "only {refused} refusals checked");
    eprintln!(
        "{} names, {} later names, {} aliases ({accepted} of 14.0), {} other spellings; {refused} refused",
        python.len(),
        later.len(),
        aliases.len(),
        other_bodies.len()
    );
}
