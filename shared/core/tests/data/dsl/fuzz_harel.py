"""Generate mutated `.stm` inputs and record what harel 0.9.0 does with each.

    "$STM_PYTHON" shared/core/tests/data/dsl/fuzz_harel.py OUT_DIR [SEED] [COUNT]
    STM_DSL_FUZZ=OUT_DIR cargo test -p stm-core --test dsl_parity -- --ignored

Each case is an `ok/*.stm` file with one to three random token- or character-level
edits (deletions, insertions of keywords/punctuation/values, duplicated tokens, a name
swapped for another name of the file), written to `OUT_DIR/cases/` (with a copy of
`ok/lib/` next to them, for imports). `OUT_DIR/cases_<SEED>.json` records harel's outcome per
case: `parse_error` / `load_error` with line and column, `crash`, or `ok` with the
Definition dump of `dump_harel.py`. The ignored test `fuzz_against_harel` in
`tests/dsl_parity.rs` checks ours against it.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import dump_harel
from harel.dsl import DslError, parse

HERE = Path(__file__).resolve().parent
TOKEN = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*'
    r"|\d+\.?\d*(?:[eE][+-]?\d+)?|==|!=|<=|>=|[{}()\[\],:|?=<>+\-*/]|\S"
)
WORDS = (
    "from to on where and or not in state final orthogonal initial invoke with use as set select choose "
    "when else join all any returns timeout context ttl outcome carry defer no history cancel_on_failure "
    "enter exit activity for machine fragment event guard bind import true false X Y context.x event.y "
    '1 -2 1.5 "s" { } ( ) [ ] , : | ? = == < + - * / -> @'
).split()
CHARS = list("abcxyz_019.-+\"' \n{}()[]=<>!|,:#/\\eE")


def mutate(src: str, rng: random.Random) -> str:
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if rng.random() < 0.3:  # a character-level edit
            k = rng.randrange(len(src))
            ch = rng.choice(CHARS) if rng.random() < 0.6 else ""
            src = src[:k] + ch + src[k + (0 if rng.random() < 0.5 else 1) :]
            continue
        toks = [(m.start(), m.end()) for m in TOKEN.finditer(src)]
        a, b = rng.choice(toks)
        op = rng.random()
        if op < 0.3:
            src = src[:a] + src[b:]
        elif op < 0.6:
            src = src[:a] + rng.choice(WORDS) + src[b:]
        elif op < 0.8:
            src = src[:a] + rng.choice(WORDS) + " " + src[a:]
        elif op < 0.9:
            src = src[:a] + src[a:b] + " " + src[a:]
        else:  # a name swapped for another name of the file (resolution errors)
            names = [src[x:y] for x, y in toks if re.match(r"[A-Za-z_]", src[x:y])]
            src = src[:a] + rng.choice(names) + src[b:]
    return src


def outcome(path: Path) -> dict:
    try:
        parse(path.read_text())
    except DslError as e:
        return {"outcome": "parse_error", "line": e.line, "column": e.column, "message": e.message}
    except Exception as e:  # noqa: BLE001
        return {"outcome": "crash", "message": f"{type(e).__name__}: {str(e)[:100]}"}
    try:
        return {"outcome": "ok", "dump": dump_harel.dump_file(path)}
    except DslError as e:
        return {"outcome": "load_error", "line": e.line, "column": e.column, "message": e.message}
    except Exception as e:  # noqa: BLE001 - RecursionError, ...
        return {"outcome": "crash", "message": f"{type(e).__name__}: {str(e)[:100]}"}


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    seed = int(argv[1]) if len(argv) > 1 else 1
    count = int(argv[2]) if len(argv) > 2 else 500
    rng = random.Random(seed)
    cases_dir = out / "cases"
    cases_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(HERE / "ok" / "lib", cases_dir / "lib", dirs_exist_ok=True)
    sources = sorted((HERE / "ok").glob("*.stm"))
    cases = []
    for i in range(count):
        path = cases_dir / f"c{seed}_{i}.stm"
        path.write_text(mutate(rng.choice(sources).read_text(), rng))
        cases.append({"path": str(path), **outcome(path)})
    (out / f"cases_{seed}.json").write_text(json.dumps(cases))
    print(Counter(c["outcome"] for c in cases))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
