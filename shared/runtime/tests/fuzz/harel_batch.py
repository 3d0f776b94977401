#!/usr/bin/env python
"""The harel side of the differential fuzzer (`tests/differential_fuzz.rs`).

    "$STM_PYTHON" harel_batch.py < cases.jsonl > results.jsonl

Reads one case per line (the conformance case shape: `name`, `machine` — an absolute
path here —, `machine_name`, `seed`, `steps`), runs each through harel 0.9.0 with the
conformance suite's own `generate.run_case` (so both suites run harel the same way), and
prints one JSON line per case, in input order:

    {"name": ..., "expected": {<run_case's block>, "context_json": {id: json.dumps(ctx)}}}
    {"name": ..., "error": "Type: message", "where": "load" | "run" | "timeout"}

`context_json` is the exact `json.dumps` of each stored execution's context (uuids
normalised like the rest), which the Rust side compares byte for byte with
`stm_core::pyjson::dumps`. Output uses Python's `json.dumps` (so `Infinity`, `NaN` and
big ints appear as Python writes them).

One process serves a whole batch: harel's Earley parser is the cost (~0.3 ms a character),
so it is paid once per machine — `harel.dsl.loader` parses each text twice (once for the
machine, once more looking for imports), and the second parse is served from a cache
(a deep copy of the first result; same text, same grammar, same tree).
"""

from __future__ import annotations

import copy
import json
import logging
import signal
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "conformance"))

import generate  # noqa: E402  (also puts conf_actions on sys.path)
from harel.dsl import loader as _loader  # noqa: E402

CASE_SECONDS = 20

_parse = _loader.parse
_parsed: dict[str, object] = {}


def _cached_parse(text: str):
    hit = _parsed.get(text)
    if hit is None:
        hit = _parse(text)  # a DslError propagates (and nothing is cached)
        if len(_parsed) > 64:
            _parsed.clear()
        _parsed[text] = hit
    return copy.deepcopy(hit)


_loader.parse = _cached_parse

_dump = generate._dump


_contexts: dict[str, str] = {}


def _dump_with_contexts(store) -> dict:
    """generate._dump, also keeping `json.dumps` of every context (its strings' uuids
    normalised first, so a 32-digit int is not mistaken for one)."""
    _contexts.clear()
    ids = ([generate.ROOT_ID] if generate.ROOT_ID in store._by_id else []) + sorted(
        i for i in store._by_id if i != generate.ROOT_ID
    )
    for i in ids:
        _contexts[i] = json.dumps(generate._normalize(store.load(i).context))
    return _dump(store)


generate._dump = _dump_with_contexts


class _DeadlineOrderStore(generate.DictStore):
    """DictStore as harel's durable stores behave. Due timers come earliest deadline first
    (ties in arming order), as
    harel's DynamoDBStore does (`sorted(..., key=fire_at)`) and our stores do. Plain
    DictStore returns them in arming order: the one deliberate difference of the
    conformance suite (`timers_fire_in_arming_order`), which random machines with a timer
    on a composite and another inside it would otherwise hit again and again."""

    def due_timers(self, now: float):
        return sorted(super().due_timers(now), key=lambda t: t[2])

    def load(self, execution_id: str):
        """A copy, as every serializing store of harel's returns: plain DictStore hands out
        the live object, so a step that raises half-way (an unrouted `float()` ValueError
        on entering a `timeout context` state) leaves its uncommitted changes visible to
        the next `process`. harel's DynamoDBStore reloads the committed item instead, and
        so do our stores."""
        exe = super().load(execution_id)
        return exe.model_copy(deep=True) if exe is not None else None


if "--arming-order" not in sys.argv:
    generate.DictStore = _DeadlineOrderStore


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise _Timeout(f"harel took more than {CASE_SECONDS}s")


def run(case: dict) -> dict:
    from harel.dsl import definition_from_dsl_file

    name = case.get("name")
    try:
        definition_from_dsl_file(Path(case["machine"]), case.get("machine_name"))
    except Exception as exc:  # noqa: BLE001 - a refused machine is a result
        return {"name": name, "where": "load", "error": generate._err(exc)}
    signal.alarm(CASE_SECONDS)
    try:
        _contexts.clear()
        expected = generate.run_case(case)
        expected["context_json"] = dict(_contexts)
        return {"name": name, "expected": expected}
    except _Timeout as exc:
        return {"name": name, "where": "timeout", "error": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - harel itself crashed (RecursionError, ...)
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"name": name, "where": "run", "error": generate._err(exc)}
    finally:
        signal.alarm(0)


def main() -> int:
    logging.getLogger("harel").setLevel(logging.CRITICAL)
    logging.getLogger().setLevel(logging.CRITICAL)
    signal.signal(signal.SIGALRM, _alarm)
    out = sys.stdout
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        result = run(json.loads(line))
        out.write(json.dumps(result) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
