#!/usr/bin/env python3
"""The shape of the code at a revision: the figures the architecture is held to.

    python3 scripts/code-shape.py            # the work tree's tracked files
    python3 scripts/code-shape.py 6551e9f    # any revision, read from git

Prints one table: the workspace's crates, the hand-written Rust files over 800 lines,
the `pub` and `pub(crate)` items of stm-runtime and stm-store, the error variants with a
`String` field, and the lines of every `main.rs`. Generated files are those whose first
line says so.
"""

import re
import subprocess
import sys

LIMIT = 800
ITEM = r"(?:async fn|fn|struct|enum|trait|const|static|type|mod|use)\b"


def git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def files(rev):
    if rev is None:
        return git("ls-files", "-z").split("\0")
    return git("ls-tree", "-r", "-z", "--name-only", rev).split("\0")


def read(rev, path):
    if rev is None:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except (FileNotFoundError, UnicodeDecodeError):
            return ""
    try:
        return git("show", f"{rev}:{path}")
    except (subprocess.CalledProcessError, UnicodeDecodeError):
        return ""


def members(rev):
    manifest = read(rev, "Cargo.toml")
    block = re.search(r"members\s*=\s*\[(.*?)\]", manifest, re.S)
    return re.findall(r'"([^"]+)"', block.group(1)) if block else []


def error_variants_with_string(text):
    """Variants of `#[derive(.. Error ..)]` enums that hold a `String` field."""
    found = []
    for derive in re.finditer(r"#\[derive\([^)]*Error[^)]*\)\]", text):
        enum = re.compile(r"\s*(?:#\[[^\]]*\]\s*|///[^\n]*\n\s*)*pub(?:\([^)]*\))? enum (\w+)\s*\{")
        head = enum.match(text, derive.end())
        if not head:
            continue
        depth, i = 1, head.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        body = text[head.end() : i - 1]
        # top-level variants only: a variant starts a line at the body's indentation
        for variant in re.finditer(r"^    (\w+)\s*(\((?:[^()]|\([^()]*\))*\)|\{[^}]*\})?", body, re.M):
            fields = variant.group(2) or ""
            if re.search(r"\bString\b", fields):
                # a lone `(String)` is a formatted message; a named field is data (an id)
                lone = re.fullmatch(r"\(\s*String\s*\)", fields) is not None
                found.append((f"{head.group(1)}::{variant.group(1)}", lone))
    return found


def shape(rev):
    rust = [p for p in files(rev) if p.endswith(".rs")]
    texts = {p: read(rev, p) for p in rust}
    generated = {p for p, t in texts.items() if t.split("\n", 1)[0].lower().find("generated") >= 0}
    long = sorted(
        (t.count("\n"), p) for p, t in texts.items() if p not in generated and t.count("\n") > LIMIT
    )
    visibility = {}
    for crate in ("shared/runtime/src/", "shared/store/src/"):
        public = crate_only = 0
        for p, t in texts.items():
            if p.startswith(crate):
                public += len(re.findall(rf"^\s*pub {ITEM}", t, re.M))
                crate_only += len(re.findall(rf"^\s*pub\((?:crate|super)\) {ITEM}", t, re.M))
        visibility[crate] = (public, crate_only)
    strings = []
    for p, t in texts.items():
        if "/src/" in p and "/tests/" not in p:
            strings += [(f"{v} ({p})", lone) for v, lone in error_variants_with_string(t)]
    mains = {p: texts[p].count("\n") for p in rust if p.endswith("/main.rs")}
    return {
        "crates": members(rev),
        "long": long,
        "generated": sorted((texts[p].count("\n"), p) for p in generated),
        "visibility": visibility,
        "strings": sorted(strings),
        "mains": mains,
    }


def main():
    rev = sys.argv[1] if len(sys.argv) > 1 else None
    s = shape(rev)
    print(f"revision: {rev or 'work tree'}")
    print(f"{'crates':<48}{len(s['crates'])}")
    print(f"{'hand-written .rs files over ' + str(LIMIT) + ' lines':<48}{len(s['long'])}")
    for lines, path in s["long"]:
        print(f"    {lines:>6}  {path}")
    print(f"{'generated .rs files in the tree':<48}{len(s['generated'])}")
    for lines, path in s["generated"]:
        print(f"    {lines:>6}  {path}")
    for crate, (public, crate_only) in s["visibility"].items():
        print(f"{crate + ' pub / pub(crate|super)':<48}{public} / {crate_only}")
    lone = [v for v, only in s["strings"] if only]
    print(f"{'error variants with a String field':<48}{len(s['strings'])}")
    print(f"{'  of which a lone (String) message':<48}{len(lone)}")
    for v, only in s["strings"]:
        print(f"    {'(String) ' if only else '         '}{v}")
    print(f"{'main.rs lines':<48}{sum(s['mains'].values())}")
    for path, lines in sorted(s["mains"].items()):
        print(f"    {lines:>6}  {path}")


if __name__ == "__main__":
    main()
