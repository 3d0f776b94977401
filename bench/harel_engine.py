"""harel's side of the engine benchmark: DurableRunner over DictStore, the same machine
and the same events as the Rust side. Prints one JSON line: {"events": N, "seconds": S}.

    python harel_engine.py MACHINE COUNT [background|inline]

`background` is DurableRunner's default execution model (a shared event loop); `inline`
runs in the caller's thread and is harel's fastest embedded path."""
import json
import sys
import time
from pathlib import Path

from harel.dsl import definition_from_dsl_file
from harel.engine.durable import DurableRunner
from harel.engine.store import DictStore
from harel.spec.states import Event

machine, count = Path(sys.argv[1]), int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "background"
defn = definition_from_dsl_file(machine, None)
runner = DurableRunner(DictStore(), {defn.id: defn}, execution=mode)
exe = runner.create(defn.id, execution_id="bench")
events = [Event(kind="Go" if i % 2 == 0 else "Back", id=f"e{i}") for i in range(count)]
t0 = time.perf_counter()
for ev in events:
    runner.process("bench", ev)
elapsed = time.perf_counter() - t0
final = runner.store.load("bench")
assert final.processed_events == count, final.processed_events
print(json.dumps({"events": count, "seconds": elapsed}))
