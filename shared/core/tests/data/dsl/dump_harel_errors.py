"""Record what harel 0.9.0 reports for each malformed `err/*.stm`.

    "$STM_PYTHON" shared/core/tests/data/dsl/dump_harel_errors.py [--check]

Writes `err/<stem>.json`: `{"outcome": "error", "message", "line", "column"}` for a
`DslError` (line/column null when harel gives no position), `{"outcome": "crash",
"exception", "message"}` when harel fails with another exception, or
`{"outcome": "ok"}` when harel accepts the file (the cases where we deliberately
report an error). `tests/dsl_errors.rs` asserts our line/column equal harel's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harel.dsl import DslError, definition_from_dsl_file

HERE = Path(__file__).resolve().parent


def outcome(path: Path) -> dict:
    try:
        sys.setrecursionlimit(400)
        definition_from_dsl_file(path, None)
    except DslError as e:
        return {"outcome": "error", "message": e.message, "line": e.line, "column": e.column}
    except Exception as e:  # noqa: BLE001 - harel crashing is what we record
        return {"outcome": "crash", "exception": type(e).__name__, "message": str(e).splitlines()[0][:200]}
    finally:
        sys.setrecursionlimit(1000)
    return {"outcome": "ok"}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    bad = 0
    for path in sorted((HERE / "err").glob("*.stm")):
        text = json.dumps(outcome(path), indent=1, ensure_ascii=True) + "\n"
        golden = path.with_suffix(".json")
        if check:
            if not golden.exists() or golden.read_text() != text:
                print(f"DIFFERS: {golden}")
                bad += 1
        else:
            golden.write_text(text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
