//! Character names for `\N{NAME}` string escapes, resolved exactly as Python 3.11's
//! `unicode_escape` codec (CPython's `unicodedata` `_getcode`) resolves them, the codec
//! harel decodes string literals with:
//!
//! * a name of Unicode 14.0 (Python 3.11's database) or one of its formal aliases
//!   (`LINE FEED`, `LF`, `BYTE ORDER MARK`), matched ignoring ASCII case but otherwise
//!   exactly: no loose matching of spaces, hyphens or underscores; named sequences are not
//!   characters and are refused;
//! * `HANGUL SYLLABLE <jamo>` and `CJK UNIFIED IDEOGRAPH-<4 or 5 hex digits>`, decoded by
//!   rule; as in CPython these two must be written in capitals (`hangul syllable ga` and
//!   `CJK UNIFIED IDEOGRAPH-4e00` are refused) and the ideograph may carry one leading
//!   zero (`CJK UNIFIED IDEOGRAPH-04E00`).
//!
//! The names and aliases come from the `unicode_names2` crate, pinned to 1.3.0: the last
//! release that matches names and aliases exactly (ASCII case aside), as Python does. From
//! 2.0 on it matches loosely (UAX #44-LM2: spaces, underscores and medial hyphens ignored);
//! a loosely found name can be checked against the character's own name, but an alias
//! cannot, since the crate has no way to give an alias's spelling back. Its data is
//! Unicode 16.0, so what it knows beyond Python 3.11 is refused here: the characters added
//! after 14.0 ([`LATER_CHARACTERS`]) and the aliases added after 14.0 to older characters
//! ([`LATER_ALIASES`]). `tests/unicode_names_parity.rs` proves both lists, and the whole
//! lookup, against Python 3.11 itself.

use unicode_names2 as ucd;

const HANGUL_PREFIX: &str = "HANGUL SYLLABLE ";
const CJK_PREFIX: &str = "CJK UNIFIED IDEOGRAPH-";

/// The characters `unicode_names2` 1.3.0 names (Unicode 16.0) and Python 3.11 does not
/// (those of Unicode 15.0, 15.1 and 16.0), as sorted inclusive ranges of code points.
/// A range may span code points neither names, never one that Python names. Derived from
/// the crate's names against Python 3.11's `unicodedata`, checked by the parity test.
const LATER_CHARACTERS: &[(u32, u32)] = &[
    (0x0897, 0x0897),
    (0x0CF3, 0x0CF3),
    (0x0ECE, 0x0ECE),
    (0x1B4E, 0x1B4F),
    (0x1B7F, 0x1B7F),
    (0x1C89, 0x1C8A),
    (0x2427, 0x2429),
    (0x2FFC, 0x2FFF),
    (0x31E4, 0x31EF),
    (0xA7CB, 0xA7CD),
    (0xA7DA, 0xA7DC),
    (0x105C0, 0x105F3),
    (0x10D40, 0x10D8F),
    (0x10EC2, 0x10EFF),
    (0x1123F, 0x11241),
    (0x11380, 0x113E2),
    (0x116D0, 0x116E3),
    (0x11B00, 0x11BF9),
    (0x11F00, 0x11F5A),
    (0x1342F, 0x1342F),
    (0x13439, 0x143FA),
    (0x16100, 0x16139),
    (0x16D40, 0x16D79),
    (0x18CFF, 0x18CFF),
    (0x1B132, 0x1B132),
    (0x1B155, 0x1B155),
    (0x1CC00, 0x1CEB3),
    (0x1D2C0, 0x1D2D3),
    (0x1DF25, 0x1DF2A),
    (0x1E030, 0x1E08F),
    (0x1E4D0, 0x1E5FF),
    (0x1F6DC, 0x1F6DC),
    (0x1F774, 0x1F77F),
    (0x1F7D9, 0x1F7D9),
    (0x1F8B2, 0x1F8C1),
    (0x1FA75, 0x1FA77),
    (0x1FA87, 0x1FA8F),
    (0x1FAAD, 0x1FAAF),
    (0x1FABB, 0x1FABF),
    (0x1FAC6, 0x1FACF),
    (0x1FADA, 0x1FADF),
    (0x1FAE8, 0x1FAE9),
    (0x1FAF7, 0x1FAF8),
    (0x1FBCB, 0x1FBEF),
    (0x2B739, 0x2B739),
    (0x2EBF0, 0x2EE5D),
    (0x31350, 0x323AF),
];

/// The formal aliases of the crate's NameAliases.txt (16.0) that Python 3.11 refuses:
/// those added after 14.0 to characters 14.0 already has (an alias of a later character
/// is refused with its character). Aliases are never changed or withdrawn once published,
/// so every other alias of the file is one of Unicode 14.0.
pub(crate) const LATER_ALIASES: &[&str] = &[
    "EM",
    "ARABIC SMALL HIGH LIGATURE ALEF WITH YEH BARREE",
    "SUNDANESE LETTER ARCHAIC I",
    "CUNEIFORM SIGN KALAM",
    "BAMUM LETTER PHASE-A MAEMGBIEE",
    "MENDE KIKAKUI SYLLABLE M172 MBO",
    "MENDE KIKAKUI SYLLABLE M174 MBOO",
];

/// The character `\N{name}` stands for in Python 3.11, or `None` where Python refuses it.
pub(crate) fn lookup(name: &str) -> Option<char> {
    // CPython tests these two prefixes case-sensitively, and does not fall back to the
    // name table when one matches (it holds no such name in any case)
    if name.starts_with(HANGUL_PREFIX) {
        // CPython reads the jamo (longest match of L, then V, then T) in capitals only,
        // which accepts exactly the syllables' names, L and T being consonants and V
        // vowels (W and Y included); the crate reads them in any case, hence the check
        let ch = ucd::character(name)?;
        return (rest_after_name(ch, name) == Some("")).then_some(ch);
    }
    if let Some(hex) = name.strip_prefix(CJK_PREFIX) {
        return cjk_unified(hex);
    }
    if !name.is_ascii() {
        return None;
    }
    let key = name.to_ascii_uppercase();
    if key.starts_with(HANGUL_PREFIX) || key.starts_with(CJK_PREFIX) {
        return None;
    }
    let ch = ucd::character(&key).filter(|&ch| in_unicode_14(ch))?;
    match rest_after_name(ch, &key) {
        Some("") => Some(ch),
        // the crate checks that the key starts with the name it hashes to, not that it
        // ends there (`BULLETS` finds BULLET); no alias of 14.0 extends its character's
        // own name, so this is never an alias
        Some(_) => None,
        // not the character's name: the crate found the key among the aliases, spelled
        // exactly
        None => (!LATER_ALIASES.contains(&key.as_str())).then_some(ch),
    }
}

/// `CJK UNIFIED IDEOGRAPH-` + four or five hex digits in capitals, naming a unified
/// ideograph of Unicode 14.0.
fn cjk_unified(hex: &str) -> Option<char> {
    if !(hex.len() == 4 || hex.len() == 5) || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'A'..=b'F')) {
        return None;
    }
    let ch = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
    // the crate names every unified ideograph of its version so, and nothing else
    let canonical = format!("{CJK_PREFIX}{:04X}", u32::from(ch));
    (in_unicode_14(ch) && rest_after_name(ch, &canonical) == Some("")).then_some(ch)
}

/// What is left of `key` after the crate's name of `ch`, or `None` when `key` does not
/// start with that name (or `ch` has none).
fn rest_after_name(ch: char, key: &str) -> Option<&str> {
    let mut rest = key;
    // the name comes in words, spaces and hyphens that spell it whole
    for part in ucd::name(ch)? {
        rest = rest.strip_prefix(part)?;
    }
    Some(rest)
}

/// Whether `ch` is not one of the crate's characters that came after Unicode 14.0.
pub(crate) fn in_unicode_14(ch: char) -> bool {
    let code = u32::from(ch);
    let after = LATER_CHARACTERS.partition_point(|&(_, last)| last < code);
    LATER_CHARACTERS.get(after).is_none_or(|&(first, _)| code < first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_aliases_and_algorithmic_names() {
        assert_eq!(lookup("BULLET"), Some('\u{2022}'));
        assert_eq!(lookup("bullet"), Some('\u{2022}'));
        assert_eq!(lookup("LINE FEED"), Some('\n'));
        assert_eq!(lookup("lf"), Some('\n'));
        assert_eq!(lookup("BYTE ORDER MARK"), Some('\u{feff}'));
        assert_eq!(lookup("LATIN CAPITAL LETTER GHA"), Some('\u{1a2}'));
        assert_eq!(lookup("LATIN CAPITAL LETTER OI"), Some('\u{1a2}'));
        assert_eq!(lookup("HANGUL SYLLABLE GA"), Some('\u{ac00}'));
        assert_eq!(lookup("HANGUL SYLLABLE HIH"), Some('\u{d7a3}'));
        assert_eq!(lookup("CJK UNIFIED IDEOGRAPH-4E00"), Some('\u{4e00}'));
        assert_eq!(lookup("CJK UNIFIED IDEOGRAPH-04E00"), Some('\u{4e00}'));
        assert_eq!(lookup("CJK UNIFIED IDEOGRAPH-3134A"), Some('\u{3134a}'));
        assert_eq!(lookup("cjk compatibility ideograph-f900"), Some('\u{f900}'));
        assert_eq!(lookup("TANGUT COMPONENT-001"), Some('\u{18800}'));
        assert_eq!(lookup("HANGUL JUNGSEONG O-E"), Some('\u{1180}'));
        assert_eq!(lookup("HANGUL JUNGSEONG OE"), Some('\u{116c}'));
        // the first and the last character of Unicode 14.0 that has a name
        assert_eq!(lookup("SPACE"), Some(' '));
        assert_eq!(lookup("VARIATION SELECTOR-256"), Some('\u{e01ef}'));
        assert_eq!(lookup("VS256"), Some('\u{e01ef}'));
    }

    #[test]
    fn refused_like_python() {
        for name in [
            "",
            "BULLET ",
            " BULLET",
            "BUL LET",
            "BULLETS",
            "BULLET\t",
            "LATIN SMALL LETTER  A",
            "LATIN_SMALL_LETTER_A",
            "LATIN-SMALL-LETTER-A",
            "LATINSMALLLETTERA",
            "LINEFEED",
            "LINE_FEED",
            "hangul syllable GA",
            "Hangul Syllable GA",
            "HANGUL SYLLABLE ga",
            "HANGUL SYLLABLE ",
            "HANGUL SYLLABLE GAX",
            "HANGUL SYLLABLE G A",
            "CJK UNIFIED IDEOGRAPH-4e00",
            "cjk unified ideograph-4E00",
            "CJK UNIFIED IDEOGRAPH-004E00",
            "CJK UNIFIED IDEOGRAPH-0041",
            "CJK UNIFIED IDEOGRAPH-2B739",
            "CJK UNIFIED IDEOGRAPH-31350",
            "CJK UNIFIED IDEOGRAPH-2EBF0",
            "TANGUT IDEOGRAPH-17000",
            "KEYCAP NUMBER SIGN",
            "LATIN CAPITAL LETTER A WITH MACRON AND GRAVE",
            "GINGER ROOT",
            "KAWI SIGN REPHA",
            "EM",
            "em",
            "SUNDANESE LETTER ARCHAIC I",
            "MENDE KIKAKUI SYLLABLE M174 MBOO",
            "BULLET\0",
            "\u{2022}",
        ] {
            assert_eq!(lookup(name), None, "{name:?}");
        }
    }

    #[test]
    fn later_characters_are_sorted_named_ranges() {
        assert!(LATER_CHARACTERS.windows(2).all(|w| w[0].1 < w[1].0));
        for &(first, last) in LATER_CHARACTERS {
            assert!(first <= last);
            for code in [first, last] {
                let ch = char::from_u32(code).expect("a char");
                assert!(ucd::name(ch).is_some(), "U+{code:04X} has no name");
                assert!(!in_unicode_14(ch), "U+{code:04X}");
            }
            for code in [first - 1, last + 1] {
                let ch = char::from_u32(code).expect("a char");
                assert!(in_unicode_14(ch), "U+{code:04X}");
            }
        }
    }
}
