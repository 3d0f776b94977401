"""Dump the Definitions harel 0.9.0 builds from `ok/*.stm` as canonical JSON.

    "$STM_PYTHON" shared/core/tests/data/dsl/dump_harel.py [--check] [FILE.stm ...]

Writes `ok/<stem>.json` next to each `.stm` (every machine of the file, each loaded
with `definition_from_dsl_file(path, name)`); `--check` compares instead of writing.
`tests/dsl_parity.rs` builds the same dump from our Definition and asserts equality.

The dump (see `dump_definition`) keeps every field of the model; order-sensitive maps
are lists of pairs. Three normalizations make harel's model comparable with ours:

* a node's kind is harel's `NodeKind` value, except that a non-root `ParallelState`
  (a composite region harel's parser promotes under an `orthogonal` state) is dumped
  as `CompositeState`: it behaves as one everywhere in harel, and our model has a
  single composite kind (its `Root` kind is harel's root `ParallelState`);
* an event filter's flat `field__op` predicates and its predicate tree (harel keeps
  both, AND-ed) are one predicate: the flat leaves, then the tree, in an `all` when
  there is more than one;
* a literal `timeout` is a float of seconds.

Positions (`pos`) are not on harel's model: they are read from the expanded config
(`__pos__`) harel builds the Definition from.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harel.definition.model import Definition, Expr, Node, NodeKind, Predicate
from harel.dsl import definition_from_dsl_file, parse
from harel.dsl.loader import _resolve_cfg

HERE = Path(__file__).resolve().parent


def dump_value(v):
    return v


def dump_pred(p: Predicate):
    if p.node == "leaf":
        return {
            "leaf": {
                "source": p.source,
                "field": p.field,
                "op": p.op,
                "value": p.value,
                "value_ref": [p.value_ref.source, p.value_ref.field] if p.value_ref is not None else None,
            }
        }
    if p.node == "not":
        assert len(p.children) == 1
        return {"not": dump_pred(p.children[0])}
    return {p.node: [dump_pred(c) for c in p.children]}


def dump_filter(ef):
    if ef is None:
        return None
    parts = []
    for key, value in ef.predicates.items():
        field, op = key.rsplit("__", 1) if "__" in key else (key, "eq")
        parts.append(
            {"leaf": {"source": "event", "field": field, "op": op, "value": value, "value_ref": None}}
        )
    if ef.predicate is not None:
        parts.append(dump_pred(ef.predicate))
    pred = None if not parts else parts[0] if len(parts) == 1 else {"all": parts}
    return {"kinds": [k.strip() for k in ef.kind.split("|")], "predicate": pred}


def dump_expr(e: Expr):
    if e.kind == "ref":
        return {"ref": [e.source, e.field]}
    if e.kind == "lit":
        return {"lit": e.value}
    return {"arith": [e.op, dump_expr(e.left), dump_expr(e.right)]}


def dump_assigns(assigns):
    return [{"field": a.field, "expr": dump_expr(a.expr)} for a in assigns]


def dump_action(a):
    if a is None:
        return None
    assert isinstance(a.function, str) and a.package is None
    return {"function": a.function, "inputs": [[k, v] for k, v in a.inputs.items()]}


def dump_timeout(t):
    if t is None:
        return None
    if isinstance(t, dict):
        assert list(t) == ["context"], t
        return {"context": t["context"]}
    assert isinstance(t, (int, float)) and not isinstance(t, bool), t
    return {"seconds": float(t)}


def dump_transition(t, pos):
    sel = t.selector
    ch = t.choice
    return {
        "source": t.source.full_path,
        "target": t.target.full_path if t.target is not None else None,
        "event": dump_filter(t.event_filter),
        "selector": None
        if sel is None
        else {
            "action": dump_action(sel.action),
            "mapper": [[k, v] for k, v in sel.mapper.items()],
            "default": sel.default,
            "enum": sel.enum,
        },
        "choice": None
        if ch is None
        else {
            "branches": [
                {"guard": dump_pred(g), "target": n.full_path, "set": dump_assigns(a)}
                for (g, n), a in zip(ch.branches, ch.branch_assignments)
            ],
            "default": ch.default.full_path if ch.default is not None else None,
            "default_set": dump_assigns(ch.default_assignments),
        },
        "set": dump_assigns(t.assignments),
        "pos": list(pos) if pos else None,
    }


def kind_name(node: Node) -> str:
    if node.kind is NodeKind.PARALLEL and node.parent is not None:
        return "CompositeState"
    return node.kind.value


def dump_node(node: Node, cfg):
    tcfgs = (cfg or {}).get("transitions", []) if node.children else []
    assert len(tcfgs) == len(node.transitions), (node, tcfgs)
    pos = (cfg or {}).get("__pos__")
    return {
        "name": node.name,
        "full_path": node.full_path,
        "kind": kind_name(node),
        "parent": node.parent.full_path if node.parent is not None else None,
        "children": [c.name for c in node.children],
        "on_enter": dump_action(node.on_enter),
        "on_exit": dump_action(node.on_exit),
        "on_activity": dump_action(node.on_activity),
        "timeout": dump_timeout(node.timeout),
        "outcome": node.outcome,
        "carry": list(node.carry),
        "defer": sorted(node.defer),
        "invoke": node.invoke,
        "invoke_with": [[k, v] for k, v in node.invoke_with.items()],
        "invoke_each": list(node.invoke_each) if node.invoke_each is not None else None,
        "start_state": node.start_state,
        "allow_history": node.allow_history,
        "cancel_on_failure": node.cancel_on_failure,
        "pos": list(pos) if pos else None,
        "transitions": [dump_transition(t, tc.get("__pos__")) for t, tc in zip(node.transitions, tcfgs)],
    }


def field_specs(fields):
    return [[name, f.type, f.required, f.default] for name, f in fields.items()]


def inline_cfgs(mach_name: str, cfg: dict, out: dict) -> None:
    """The config of every inline `invoke` body under `cfg`, by its synthetic id."""

    def walk(c: dict, path: str) -> None:
        if "invoke_inline" in c:
            syn = f"{mach_name}#{path}"
            out[syn] = c["invoke_inline"]
            inline_cfgs(syn, c["invoke_inline"], out)
        for name, st in (c.get("states") or {}).items():
            walk(st, f"{path}.{name}" if path else name)

    walk(cfg, "")


def imported_cfgs(text: str, base: Path, seen: set, out: dict) -> None:
    """The configs of the machines harel registers from imports (as `_imported_machines`)."""
    prog = parse(text)
    for path, alias, _pos in prog.imports:
        resolved = (base / path).resolve()
        if resolved in seen or not resolved.exists():
            continue
        seen.add(resolved)
        itext = resolved.read_text()
        for mname in parse(itext).machines:
            fqn = f"{alias}.{mname}" if alias else mname
            try:
                cfg, _, _ = _resolve_cfg(itext, mname, resolved.parent, None, None)
            except Exception:
                continue
            out.setdefault(fqn, cfg)
            inline_cfgs(mname, cfg, out)
        nested: dict = {}
        imported_cfgs(itext, resolved.parent, seen, nested)
        for k, v in nested.items():
            out.setdefault(f"{alias}.{k}" if alias else k, v)
            if "#" in k:  # an inline body keeps its unprefixed id inside its own machine
                out.setdefault(k, v)


def dump_definition(d: Definition, cfg, cfgs: dict):
    nodes = []

    def walk(node: Node, ncfg):
        nodes.append(dump_node(node, ncfg))
        for child in node.children:
            walk(child, ((ncfg or {}).get("states") or {}).get(child.name))

    walk(d.root, cfg)
    return {
        "id": d.id,
        "ttl": d.ttl,
        "events": [[name, field_specs(e.fields)] for name, e in d.events.items()],
        "context_schema": field_specs(d.context_schema),
        "nodes": nodes,
        "submachines": [[key, dump_definition(sub, cfgs.get(key), cfgs)] for key, sub in d.submachines.items()],
    }


def dump_file(path: Path):
    text = path.read_text()
    out = {}
    for name in parse(text).machines:
        d = definition_from_dsl_file(path, name)
        cfg, _, _ = _resolve_cfg(text, name, path.parent, None, None)
        cfgs: dict = {}
        inline_cfgs(name, cfg, cfgs)
        imported_cfgs(text, path.parent, set(), cfgs)
        out[name] = dump_definition(d, cfg, cfgs)
    return {"machines": out}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    files = [Path(a) for a in argv if not a.startswith("--")] or sorted((HERE / "ok").glob("*.stm"))
    bad = 0
    for path in files:
        try:
            text = json.dumps(dump_file(path), indent=1, ensure_ascii=True) + "\n"
        except Exception as exc:
            print(f"FAILED: {path}: {exc}")
            bad += 1
            continue
        golden = path.with_suffix(".json")
        if check:
            if not golden.exists() or golden.read_text() != text:
                print(f"DIFFERS: {golden}")
                bad += 1
        else:
            golden.write_text(text)
            print(f"wrote {golden.relative_to(HERE)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
