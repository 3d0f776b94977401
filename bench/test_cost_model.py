"""Hand-counted checks of bench/cost_model.py, so the model cannot drift silently.

    python3 bench/test_cost_model.py      # exits non-zero on the first failure

No pytest: plain asserts, run in order.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cost_model as cm  # noqa: E402


def close(x: float, y: float, tol: float = 1e-9) -> bool:
    return abs(x - y) <= tol


def check(name: str, ok: bool, got=None) -> None:
    if not ok:
        print(f"FAIL {name}: got {got!r}")
        sys.exit(1)
    print(f"ok   {name}")


def main() -> None:
    a = cm.defaults()

    # the unit rules
    check("914 B: 1 WRU, 2 transactional", cm.wru(914) == 1 and cm.wru(914, True) == 2)
    check("1025 B: 2 WRU", cm.wru(1025) == 2)
    check("a strong read of 914 B or of nothing: 1 RRU", cm.rru_strong(914) == 1 and cm.rru_strong(0) == 1)

    # harel layout, plain transition: BatchGetItem of execution + mark (1 + 1 RRU), a
    # transaction of execution + mark (2 + 2 WRU)
    got = cm.worker_units(a, "harel", 1, 0.0, 0.0, False)
    check("harel plain: 2 RRU + 4 WRU at 914 B", got == (2, 4), got)

    # cheapest layout, plain transition: one GetItem, one conditional PutItem of 914 + 80 B
    check("cheapest item: 1,001 B (the measured item with its `recent` attribute)", cm.exe_bytes(a, "cheap") == 1001, cm.exe_bytes(a, "cheap"))
    got = cm.worker_units(a, "cheap", 1, 0.0, 0.0, False)
    check("cheapest plain: 1 RRU + 1 WRU", got == (1, 1), got)

    # ... which crosses 1 KB once the item does
    big = cm.defaults(item_bytes=950)
    got = cm.worker_units(big, "cheap", 1, 0.0, 0.0, False)
    check("cheapest plain at 950 + 80 B: 2 WRU", got == (1, 2), got)

    # coalescing: a burst of 10 shares one load and one commit
    rru, w = cm.worker_units(a, "cheap", 10, 0.0, 0.0, False)
    check("cheapest burst of 10: 0.1 RRU + 0.1 WRU per event", close(rru, 0.1) and close(w, 0.1), (rru, w))
    rru, w = cm.worker_units(a, "harel", 10, 0.0, 0.0, False)
    # BatchGetItem of 1 + 10 items; a transaction of 1 + 10 items
    check("harel burst of 10: 1.1 RRU + 2.2 WRU per event", close(rru, 1.1) and close(w, 2.2), (rru, w))

    # an emitting commit in the cheapest layout: execution (tx) 2 + outbox put (tx) 2 +
    # counter ADD 1 + outbox delete after the flush 1
    _, w = cm.worker_units(a, "cheap", 1, 1.0, 0.0, False)
    check("cheapest emitting commit: 6 WRU", close(w, 6), w)
    _, w = cm.worker_units(a, "harel", 1, 1.0, 0.0, False)
    check("harel emitting commit: 8 WRU", close(w, 8), w)

    # SQS FIFO for a plain transition: one send, (receive + delete) / 10
    plain = cm.per_transition(a, cm.Design("c", "cheap"), 0.0, 0.0)
    check("plain: 1.2 FIFO requests", close(plain["units"]["fifo"], 1.2), plain["units"]["fifo"])
    batched = cm.per_transition(a, cm.Design("b", "cheap", 1, 10), 0.0, 0.0)
    check("producer batches of 10: 0.3 FIFO requests", close(batched["units"]["fifo"], 0.3), batched["units"]["fifo"])

    # the dollar rows of the cheapest plain transition: 1 WRU, 1 RRU, 1.2 FIFO requests
    rows = plain["rows"]
    check("cheapest plain writes $0.625 per million", close(rows["DynamoDB writes"] * 1e6, 0.625), rows["DynamoDB writes"])
    check("cheapest plain reads $0.125 per million", close(rows["DynamoDB reads"] * 1e6, 0.125), rows["DynamoDB reads"])
    check("cheapest plain SQS $0.60 per million", close(rows["SQS FIFO"] * 1e6, 0.60), rows["SQS FIFO"])
    check("cheapest layout stores no marks", rows["storage"] == 0.0, rows["storage"])

    # a doorbell: 1 timer GetItem + 1 execution load; guarded delete + its GSI delete
    one = cm.per_transition(a, cm.Design("c", "cheap"), 0.0, 1.0)["units"]
    check("doorbell: 2 RRU + 2 WRU", close(one["doorbell_rru"], 2) and close(one["doorbell_wru"], 2), one)

    # fixed: 5 FIFO + 2 standard idle pollers, 3 empty receives a minute, 30 days
    idle = cm.fixed_monthly(a, "cheap")["idle long polls"]
    check("idle long polls $0.43 a month", close(idle, 129600 * (5 * 0.5 + 2 * 0.4) / 1e6), idle)

    # metrics and alarms: the worker's EventsProcessed alone for a plain mix (zeros are not
    # sent), + the flush's RelayForwarded with emits and TimersFired with timers; 8 alarm
    # metrics (template.yaml: 1 + 1 + 1 + 2 + 3)
    plain_m = cm.fixed_monthly(a, "cheap")["metrics and alarms"]
    check("metrics and alarms, plain mix: $0.30 + 8 x $0.10", close(plain_m, 0.30 + 0.80), plain_m)
    mixed_m = cm.fixed_monthly(a, "cheap", 0.1, 0.1)["metrics and alarms"]
    check("metrics and alarms, emits and timers: 3 metrics", close(mixed_m, 0.90 + 0.80), mixed_m)

    # logs: no line per processed event at LogLevel=info, the invocation's lines over 10 records
    logs = plain["rows"]["CloudWatch Logs (worker)"]
    check("worker logs: 700 B per invocation of 10", close(logs, 70 / 1e9 * 0.50), logs)

    # Step Functions at the README's assumptions
    check("Express $1.10 at 100 ms, 64 MB", close(round(cm.express_per_million(a), 2), 1.10), cm.express_per_million(a))

    # the output says plainly what $1.10 needs at the defaults
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cm.main([])
    text = out.getvalue()
    check("output names what $1.10 needs", "needs coalescing or producer batching" in text, text[-400:])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cm.main(["--trace", "--emit-ratio", "0.5", "--burst", "2", "--item-bytes", "2048", "--lambda-ms", "12"])
    check("the old flags still run", "**total**" in out.getvalue())
    print("all checks passed")


if __name__ == "__main__":
    main()
