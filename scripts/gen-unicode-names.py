"""Write shared/core/src/dsl/unicode_names_data.rs: the character names that Python's
`unicode_escape` codec accepts in `\\N{NAME}` escapes (what harel decodes string literals
with), from the running Python's Unicode database. Run it with the Python harel runs on
(the test venv's 3.11, Unicode 14.0.0), giving it a NameAliases.txt:

    apt-get install unicode-data   # Debian's copy of the UCD, /usr/share/unicode
    .venv/bin/python scripts/gen-unicode-names.py [/usr/share/unicode/NameAliases.txt]

What goes in, all checked against Python's own decoder before it is written:
* every name `unicodedata.name()` gives (Unicode 14.0 here), except the two algorithmic
  families CPython decodes by rule rather than by table: `HANGUL SYLLABLE <jamo>` (the
  jamo short names are written out, derived from the syllable names) and
  `CJK UNIFIED IDEOGRAPH-<hex>` (its code point ranges are written out);
* the formal name aliases. Python 3.11 has no way to list them (only to look one up), so
  they are read from a NameAliases.txt and kept when `\\N{alias}` decodes, in Python, to the
  alias's own character. Aliases are immutable once published (Unicode's stability
  policy), so a newer file (Debian 12's unicode-data is 15.0.0) holds every 14.0 alias and
  the filter drops exactly the later ones (15.0.0 adds three: `EM`, two corrections).
  The 470 kept were also checked, once, against the alias table of the PyPI sdist
  `unicodedata2==14.0.0` (`unicodename_db.h`, `name_aliases[]`): the same 470 characters in
  the same order. An alias Python decodes to a different character aborts the run.

Named sequences (NamedSequences.txt) are not accepted by `\\N{...}` and are left out.

The table, one entry per line, sorted by name, in blocks of BLOCK entries:
    <prefix><suffix>;<hex>
where <prefix> is chr(0x30 + k) for the k leading characters shared with the previous
entry's name (0 at a block start), <suffix> the rest of the name and <hex> the code point
(lowercase hex) at a block start, else the zigzag-coded difference to the previous entry's.
"""
import pathlib
import sys
import unicodedata

BLOCK = 64
NAME_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -")
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
CJK_PREFIX = "CJK UNIFIED IDEOGRAPH-"
HANGUL_PREFIX = "HANGUL SYLLABLE "


def escape_decodes(name):
    """What Python's `unicode_escape` makes of `\\N{name}`, or None when it refuses it."""
    try:
        return ("\\N{%s}" % name).encode("utf-8").decode("unicode_escape")
    except UnicodeDecodeError:
        return None


# -- names ---------------------------------------------------------------------------
names = {}
cjk_ranges = []
for c in range(0x110000):
    name = unicodedata.name(chr(c), None)
    if name is None:
        continue
    assert escape_decodes(name) == chr(c), (hex(c), name)
    if HANGUL_FIRST <= c <= HANGUL_LAST:
        assert name.startswith(HANGUL_PREFIX), (hex(c), name)
        continue
    if name.startswith(CJK_PREFIX):
        assert name == CJK_PREFIX + "%04X" % c, (hex(c), name)
        if cjk_ranges and cjk_ranges[-1][1] == c - 1:
            cjk_ranges[-1][1] = c
        else:
            cjk_ranges.append([c, c])
        continue
    names[name] = c
n_names = len(names)

# Hangul jamo short names, as CPython's table: L (19) x V (21) x T (28) syllables from U+AC00
def syllable(l, v, t):
    return unicodedata.name(chr(HANGUL_FIRST + (l * 21 + v) * 28 + t))[len(HANGUL_PREFIX):]

IEUNG = 11  # the silent initial, whose short name is empty
assert syllable(IEUNG, 0, 0) == "A"
jamo_l = [syllable(l, 0, 0)[:-1] for l in range(19)]
jamo_v = [syllable(IEUNG, v, 0) for v in range(21)]
jamo_t = [syllable(IEUNG, 0, t)[1:] for t in range(28)]
for l in range(19):
    for v in range(21):
        for t in range(28):
            assert syllable(l, v, t) == jamo_l[l] + jamo_v[v] + jamo_t[t]

# -- aliases -------------------------------------------------------------------------
alias_file = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/unicode/NameAliases.txt")
alias_text = alias_file.read_text()
alias_version = alias_text.splitlines()[0].lstrip("# ").strip()
n_aliases = 0
dropped = []
for line in alias_text.splitlines():
    line = line.split("#")[0].strip()
    if not line:
        continue
    code, alias, kind = line.split(";")
    code = int(code, 16)
    got = escape_decodes(alias)
    if got is None:
        dropped.append(f"{alias} (U+{code:04X}, {kind})")
        continue
    assert got == chr(code), f"{alias}: Python gives U+{ord(got):04X}, the file U+{code:04X}"
    assert alias not in names, alias
    names[alias] = code
    n_aliases += 1

for name in names:
    assert set(name) <= NAME_CHARS, name
    assert not name.upper().startswith((CJK_PREFIX, HANGUL_PREFIX)), name
    assert "  " not in name and name == name.strip(), name

# -- the table -----------------------------------------------------------------------
lines = []
block_starts = []
offset = 1  # the literal starts with a newline
prev_name, prev_code = "", 0
for i, name in enumerate(sorted(names)):
    code = names[name]
    if i % BLOCK == 0:
        block_starts.append(offset)
        k, value = 0, code
    else:
        k = 0
        while k < min(len(name), len(prev_name)) and name[k] == prev_name[k]:
            k += 1
        delta = code - prev_code
        value = delta * 2 if delta >= 0 else -delta * 2 - 1
    assert k <= 0x7E - 0x30
    line = f"{chr(0x30 + k)}{name[k:]};{value:x}"
    lines.append(line)
    offset += len(line) + 1
    prev_name, prev_code = name, code
blob = "\n" + "\n".join(lines) + "\n"
assert '"#' not in blob and blob.isascii()
assert len(blob) == offset

def rust_strs(items):
    return ", ".join(f'"{s}"' for s in items)

out_lines = [
    "// The names Python's `unicode_escape` accepts in `\\N{NAME}`: generated by",
    f"// `scripts/gen-unicode-names.py` from Python {sys.version.split()[0]}'s Unicode "
    f"{unicodedata.unidata_version} database",
    f"// ({n_names} names) and the aliases of {alias_version} that it accepts ({n_aliases}); do not edit.",
    "// The format is described in the script; `unicode_names.rs` reads it.",
    "",
    "/// The `CJK UNIFIED IDEOGRAPH-XXXX` code points, as sorted inclusive ranges.",
    "const CJK_UNIFIED: &[(u32, u32)] = &[",
]
out_lines += [f"    (0x{a:04X}, 0x{b:04X})," for a, b in cjk_ranges]
out_lines += [
    "];",
    "",
    "/// The short names of the Hangul jamo: leading consonants, vowels, trailing consonants.",
    f"const JAMO_L: [&str; 19] = [{rust_strs(jamo_l)}];",
    f"const JAMO_V: [&str; 21] = [{rust_strs(jamo_v)}];",
    f"const JAMO_T: [&str; 28] = [{rust_strs(jamo_t)}];",
    "",
    "/// The longest name in the table.",
    f"const MAX_NAME_LEN: usize = {max(len(n) for n in names)};",
    "",
    "/// Entries per block; each block starts with a whole name and an absolute code point.",
    f"const BLOCK: usize = {BLOCK};",
    "",
    f"/// The number of entries in `NAMES` ({n_names} names + {n_aliases} aliases).",
    f"#[allow(dead_code)]\nconst ENTRIES: usize = {len(names)};",
    "",
    "/// The byte offset in `NAMES` of each block's first entry.",
    "const BLOCK_STARTS: &[u32] = &[",
]
for i in range(0, len(block_starts), 10):
    out_lines.append("    " + " ".join(f"{o}," for o in block_starts[i : i + 10]))
out_lines += [
    "];",
    "",
    "/// Every name and alias, sorted, front-coded, one per line.",
    f'const NAMES: &str = r#"{blob}"#;',
]
out = pathlib.Path(__file__).resolve().parent.parent / "shared/core/src/dsl/unicode_names_data.rs"
out.write_text("\n".join(out_lines) + "\n")
print(f"{out}: {n_names} names, {n_aliases} aliases, {len(cjk_ranges)} CJK ranges, "
      f"{len(block_starts)} blocks, {len(blob)} bytes of names")
print(f"aliases of {alias_version} that Python {sys.version.split()[0]} refuses: {', '.join(dropped) or 'none'}")
