#!/usr/bin/env python
"""Regenerate the `expected` block of every conformance case from harel itself.

    "$STM_PYTHON" generate.py            # rewrite every cases/*.json
    "$STM_PYTHON" generate.py NAME ...   # only these cases (file stem or path)
    "$STM_PYTHON" generate.py --check    # exit 1 if any file would change
    "$STM_PYTHON" generate.py --check --execution=background
                                                 # cross-check with harel's default runner

Each case names a machine (`machine`, `machine_name`), an initial context (`seed`) and a
list of `steps`; this script runs them against harel (which must be 0.9.0) exactly as
described in README.md, and writes the observed result back as `expected`. The output is
deterministic (fixed clock, fixed ids, uuids normalised), so running it twice gives
byte-identical files.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
HAREL_VERSION = "0.9.0"

# conf_actions must import as a top-level module (machines bind `conf_actions.log`, ...)
sys.path.insert(0, str(HERE))

from harel.dsl import definition_from_dsl_file  # noqa: E402
from harel.engine.durable import DurableRunner  # noqa: E402
from harel.engine.store import DictStore  # noqa: E402
from harel.spec.states import Event  # noqa: E402

_UUID = re.compile(r"(?<![0-9a-fA-F])[0-9a-fA-F]{32}(?![0-9a-fA-F])")
START_CLOCK = 1000.0
ROOT_ID = "exe"
# how DurableRunner runs the flows: "inline" (the caller's thread, what the goldens are made
# with) or "background" (harel's default event loop; `--execution=background --check` is a
# cross-check that both give the same results)
EXECUTION = "inline"


def _normalize(value: Any) -> Any:
    """Replace every 32-hex-digit uuid inside any string (keys included) with "<uuid>"."""
    if isinstance(value, str):
        return _UUID.sub("<uuid>", value)
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    if isinstance(value, dict):
        return {_normalize(k): _normalize(v) for k, v in value.items()}
    return value


def _err(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def run_case(case: dict) -> dict:
    """Run one case against harel and return its `expected` block (normalised)."""
    from importlib.metadata import version

    if version("harel") != HAREL_VERSION:
        raise SystemExit(f"harel {HAREL_VERSION} is required, found {version('harel')}")

    defn = definition_from_dsl_file(HERE / case["machine"], case.get("machine_name"))
    now = [START_CLOCK]

    def clock() -> float:
        return now[0]

    store = DictStore()
    runner = DurableRunner(store, {defn.id: defn}, clock=clock, trace=True, execution=EXECUTION)

    expected: dict = {
        "create_error": None,
        "transcript": [],
        "step_errors": [],
        "root": None,
        "children": [],
        "traces": {},
    }
    try:
        exe = runner.create(defn.id, context=case.get("seed"), execution_id=ROOT_ID)
    except Exception as exc:  # noqa: BLE001 - recorded, no steps run
        expected["create_error"] = _err(exc)
        expected.update(_dump(store))  # whatever the failed create left in the store (often nothing)
        return _normalize(expected)

    transcript = [f"{'(start)':<20} -> {exe.active_path}"]
    step_errors: list[Optional[str]] = []
    for step in case["steps"]:
        try:
            if "send" in step:
                spec = step["send"]
                if not spec.get("id"):
                    raise SystemExit(f"{case['name']}: every sent event needs an explicit id")
                event = Event(kind=spec["kind"], data=spec.get("data") or {}, id=spec["id"])
                label = event.kind
                exe = runner.process(ROOT_ID, event)
            elif "advance" in step:
                seconds = step["advance"]
                label = "(advance " + format(seconds, "g") + "s)"
                now[0] += seconds
                runner.fire_due_timers()
                exe = store.load(ROOT_ID)
            else:
                raise SystemExit(f"{case['name']}: unknown step {step!r}")
        except SystemExit:
            raise
        except Exception as exc:  # noqa: BLE001 - recorded, the next step runs
            step_errors.append(_err(exc))
            transcript.append(f"error: {type(exc).__name__}")
            exe = store.load(ROOT_ID)
            continue
        step_errors.append(None)
        transcript.append(f"{label:<20} -> {exe.active_path}")
    transcript.append(f"status: {exe.status.name}  outcome: {exe.outcome}")

    expected["transcript"] = transcript
    expected["step_errors"] = step_errors
    expected.update(_dump(store))
    return _normalize(expected)


def _dump(store: DictStore) -> dict:
    """The root, every other execution (sorted by id) and every trace. DictStore keeps all
    executions — root, orthogonal regions, invoked machines — in its `_by_id` dict."""
    others = sorted(i for i in store._by_id if i != ROOT_ID)
    root = store.load(ROOT_ID)
    traces = {ROOT_ID: store.read_trace(ROOT_ID)} if root is not None else {}
    traces.update({i: store.read_trace(i) for i in others})
    return {
        "root": root.model_dump(mode="json") if root is not None else None,
        "children": [store.load(i).model_dump(mode="json") for i in others],
        "traces": traces,
    }


_KEY_ORDER = ("name", "description", "features", "machine", "machine_name", "seed", "steps", "expected")


def render(case: dict) -> str:
    ordered = {k: case[k] for k in _KEY_ORDER if k in case}
    ordered.update({k: v for k, v in case.items() if k not in ordered})
    return json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    # harel logs every dead-lettered execution with a traceback; the cases record those
    # failures in `expected`, so keep the console quiet
    logging.getLogger("harel").setLevel(logging.CRITICAL)
    global EXECUTION
    check = "--check" in argv
    for arg in argv:
        if arg.startswith("--execution="):
            EXECUTION = arg.split("=", 1)[1]
    names = [a for a in argv if not a.startswith("--")]
    paths = sorted(CASES.glob("*.json"))
    if names:
        wanted = {Path(n).stem for n in names}
        paths = [p for p in paths if p.stem in wanted]
    changed = []
    for path in paths:
        case = json.loads(path.read_text())
        if case.get("name") != path.stem:
            raise SystemExit(f"{path.name}: `name` must equal the file stem")
        case["expected"] = run_case(case)
        text = render(case)
        if path.read_text() != text:
            changed.append(path.name)
            if not check:
                path.write_text(text)
    verb = "would change" if check else "rewrote"
    print(f"{len(paths)} cases ({EXECUTION}), {verb} {len(changed)}" + (": " + ", ".join(changed) if changed else ""))
    return 1 if (check and changed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
