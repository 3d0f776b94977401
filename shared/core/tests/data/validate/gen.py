#!/usr/bin/env python3
"""Regenerate the golden data for `validate_golden.rs` and `render_golden.rs` from harel.

For every `cases/<name>.stm` this loads the machine with harel 0.9.0's DSL loader (the
machine named by an optional first-line `// machine: NAME` header, else the file's only
machine) and writes:

- `cases/<name>.expected.json`: harel's validation findings, in order, as
  `{"machine": NAME|null, "findings": [{"severity", "code", "path", "message", "text"}]}`
  (`text` is `str(issue)`, what `harel validate` prints);
- `cases/<name>.mmd`: harel's Mermaid rendering (`harel render --mermaid`), for every case
  harel can render (it asserts on unresolved targets; those get no `.mmd`);
- `cases/<name>.model.json`: harel's `Definition` itself, as JSON (nodes in index order,
  references as `full_path`s, flat `field__op` guards folded into the predicate tree).
  The Rust tests rebuild a `Definition` from it (`model.rs`), which checks the validator
  and the renderer apart from the `.stm` parser.

harel gathers the event fields a transition reads in a Python `set`, so the order of
several findings on one transition can depend on the string hash seed. The findings are
computed under two seeds and the script fails if they differ: keep each case free of
such ties.

Run with harel's interpreter:  "$STM_PYTHON" shared/core/tests/data/validate/gen.py
(`--cases DIR` works on another directory of `.stm` files; point the Rust tests at it
with `STM_VALIDATE_CASES=DIR`.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
if "--cases" in sys.argv:
    CASES = Path(sys.argv[sys.argv.index("--cases") + 1]).resolve()


def machine_name(path: Path) -> str | None:
    lines = path.read_text().splitlines()
    first = lines[0] if lines else ""
    prefix = "// machine:"
    return first[len(prefix) :].strip() if first.startswith(prefix) else None


def findings(path: Path) -> dict:
    from harel.definition.validate import validate
    from harel.dsl import definition_from_dsl_file

    name = machine_name(path)
    defn = definition_from_dsl_file(path, name)
    return {
        "machine": name,
        "findings": [
            {"severity": i.severity, "code": i.code, "path": i.path, "message": i.message, "text": str(i)}
            for i in validate(defn)
        ],
    }


def mermaid(path: Path) -> str | None:
    from harel.dsl import definition_from_dsl_file
    from harel.viz import mermaid as mm

    defn = definition_from_dsl_file(path, machine_name(path))
    try:
        return mm.render(defn)
    except AssertionError:
        return None


def _action(a) -> dict | None:
    if a is None:
        return None
    fn = a.function if isinstance(a.function, str) else a.function.__name__
    return {"function": fn, "inputs": a.inputs}


def _pred(p) -> dict:
    if p.node == "leaf":
        ref = p.value_ref
        return {
            "leaf": {
                "source": p.source,
                "field": p.field,
                "op": p.op or "eq",
                "value": p.value,
                "value_ref": [ref.source or "event", ref.field] if ref is not None else None,
            }
        }
    if p.node == "not":
        return {"not": _pred(p.children[0])}
    return {p.node: [_pred(c) for c in p.children]}


def _filter(ef) -> dict | None:
    if ef is None:
        return None
    leaves = []
    for key, value in ef.predicates.items():
        fld, op = key.split("__") if "__" in key else (key, "eq")
        leaves.append({"leaf": {"source": "event", "field": fld, "op": op, "value": value, "value_ref": None}})
    if ef.predicate is not None:
        leaves.append(_pred(ef.predicate))
    pred = None if not leaves else leaves[0] if len(leaves) == 1 else {"all": leaves}
    return {"kinds": [k.strip() for k in ef.kind.split("|")], "predicate": pred}


def _expr(e) -> dict:
    if e.kind == "ref":
        return {"ref": [e.source, e.field]}
    if e.kind == "lit":
        return {"lit": e.value}
    return {"arith": [e.op, _expr(e.left), _expr(e.right)]}


def _assigns(assigns) -> list:
    return [{"field": a.field, "expr": _expr(a.expr)} for a in assigns]


def _transition(t) -> dict:
    out: dict = {
        "source": t.source.full_path,
        "target": t.target.full_path if t.target is not None else None,
        "event_filter": _filter(t.event_filter),
        "assignments": _assigns(t.assignments),
        "selector": None,
        "choice": None,
    }
    if t.selector is not None:
        s = t.selector
        out["selector"] = {
            "action": _action(s.action),
            "mapper": s.mapper,
            "default": s.default,
            "enum": s.enum,
        }
    if t.choice is not None:
        c = t.choice
        out["choice"] = {
            "branches": [[_pred(g), n.full_path] for g, n in c.branches],
            "default": c.default.full_path if c.default is not None else None,
            "branch_assignments": [_assigns(a) for a in c.branch_assignments],
            "default_assignments": _assigns(c.default_assignments),
        }
    return out


_KINDS = {"State": "leaf", "CompositeState": "composite", "ParallelState": "parallel", "OrthogonalState": "orthogonal"}


def _field(spec) -> dict:
    return {"type": spec.type, "required": spec.required, "default": spec.default}


def _model(defn) -> dict:
    nodes = []
    for node in defn.index.values():
        nodes.append(
            {
                "name": node.name,
                "full_path": node.full_path,
                "kind": _KINDS[node.kind.value],
                "parent": node.parent.full_path if node.parent is not None else None,
                "on_enter": _action(node.on_enter),
                "on_activity": _action(node.on_activity),
                "on_exit": _action(node.on_exit),
                "timeout": node.timeout,
                "outcome": node.outcome,
                "carry": list(node.carry),
                "defer": sorted(node.defer),
                "invoke": node.invoke,
                "invoke_with": node.invoke_with,
                "invoke_each": list(node.invoke_each) if node.invoke_each is not None else None,
                "start_state": node.start_state,
                "allow_history": node.allow_history,
                "cancel_on_failure": node.cancel_on_failure,
                "transitions": [_transition(t) for t in node.transitions],
            }
        )
    return {
        "id": defn.id,
        "ttl": defn.ttl,
        "events": {n: {f: _field(s) for f, s in e.fields.items()} for n, e in defn.events.items()},
        "context_schema": {f: _field(s) for f, s in defn.context_schema.items()},
        "nodes": nodes,
    }


def model(path: Path) -> dict:
    from harel.dsl import definition_from_dsl_file

    return _model(definition_from_dsl_file(path, machine_name(path)))


def dump_all() -> dict:
    return {p.stem: findings(p) for p in sorted(CASES.glob("*.stm"))}


def main() -> int:
    if "--dump" in sys.argv:
        json.dump(dump_all(), sys.stdout)
        return 0
    runs = []
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, __file__, "--dump", "--cases", str(CASES)], env=env, check=True, capture_output=True, text=True
        ).stdout
        runs.append(json.loads(out))
    if runs[0] != runs[1]:
        unstable = [k for k in runs[0] if runs[0][k] != runs[1].get(k)]
        print(f"findings depend on the hash seed in: {unstable}", file=sys.stderr)
        return 1
    for stem, result in runs[0].items():
        (CASES / f"{stem}.expected.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        model_json = json.dumps(model(CASES / f"{stem}.stm"), indent=1, ensure_ascii=False)
        (CASES / f"{stem}.model.json").write_text(model_json + "\n")
        mmd = CASES / f"{stem}.mmd"
        text = mermaid(CASES / f"{stem}.stm")
        if text is None:
            mmd.unlink(missing_ok=True)
        else:
            mmd.write_text(text + "\n")
        n = len(result["findings"])
        print(f"{stem}: {n} finding(s){'' if text is not None else ', no mermaid'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
