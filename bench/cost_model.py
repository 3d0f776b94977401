"""Cost per million transitions: our runtime on AWS against Step Functions.

    python3 bench/cost_model.py                       # the defaults below
    python3 bench/cost_model.py --item-bytes 2048 --lambda-ms 12 --emit-ratio 0.2

Inputs are the *measured* counts (DynamoDB calls and item sizes from the store's
call-counting interceptor, see README "Performance"), Lambda duration from the worker's
log lines, and AWS list prices for us-east-1 (on-demand, as published on the AWS pricing
pages; edit PRICES if they move). Prints a table; no network, no AWS account.

One transition = one event processed by the worker (load, step, commit). A fraction
`emit_ratio` of transitions also emits an event (a region's `Finished`, a `Returned`),
which costs the seq-counter update, the outbox put and delete, and one more SQS message.
"""

from __future__ import annotations

import argparse
import math

PRICES = {
    # DynamoDB on-demand (us-east-1, since the Nov 2024 price cut)
    "ddb_write_per_million_wru": 0.625,
    "ddb_read_per_million_rru": 0.125,
    # SQS: FIFO requests (per 64 KB chunk)
    "sqs_fifo_per_million": 0.50,
    # Lambda arm64
    "lambda_per_million_requests": 0.20,
    "lambda_arm_per_gb_second": 0.0000133334,
    # Step Functions
    "sfn_standard_per_thousand_transitions": 0.025,
    "sfn_express_per_million_requests": 1.00,
    "sfn_express_per_gb_second": 0.00001667,
}


def wru(item_bytes: int, transactional: bool) -> int:
    units = math.ceil(item_bytes / 1024)
    return units * (2 if transactional else 1)


def rru_strong(item_bytes: int) -> int:
    return math.ceil(item_bytes / 4096)


def ours_per_transition(a) -> dict:
    """Dollars per transition, by service."""
    # reads: load_for_event = one BatchGetItem of the execution + the dedupe mark (strong)
    rru = rru_strong(a.item_bytes) + 1
    # writes: the commit. Without side effects it is one conditional PutItem of the
    # execution plus the processed mark -> a 2-item transaction (2x WRU each).
    write_units = wru(a.item_bytes, True) + wru(100, True)
    # emits: counter ADD (1 WRU) + outbox put inside the transaction (2 WRU) + delete (1 WRU)
    write_units += a.emit_ratio * (1 + 2 + 1)
    if a.trace:
        # the trace put and the ring delete ride in the same transaction
        write_units += wru(a.trace_bytes, True) + 2
    ddb = write_units * PRICES["ddb_write_per_million_wru"] / 1e6 + rru * PRICES["ddb_read_per_million_rru"] / 1e6

    # SQS: the event's SendMessage, a share of ReceiveMessage and DeleteMessageBatch per
    # batch (the event source mapping), plus one more send for each emit
    sqs_requests = 1 + 2 / a.batch_size + a.emit_ratio * (1 + 2 / a.batch_size)
    sqs = sqs_requests * PRICES["sqs_fifo_per_million"] / 1e6

    # Lambda: one invocation per batch, billed by the millisecond
    invocations = 1 / a.batch_size
    gb_seconds = (a.memory_mb / 1024) * (a.lambda_ms / 1000)
    lam = invocations * PRICES["lambda_per_million_requests"] / 1e6 + gb_seconds * PRICES["lambda_arm_per_gb_second"]
    return {"DynamoDB": ddb, "SQS FIFO": sqs, "Lambda": lam}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--item-bytes", type=int, default=914, help="execution item size as DynamoDB counts it (measured: 914)")
    p.add_argument("--lambda-ms", type=float, default=8.0, help="worker billed ms per event")
    p.add_argument("--memory-mb", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=10)
    p.add_argument("--emit-ratio", type=float, default=0.1, help="share of transitions that emit")
    p.add_argument("--trace", action="store_true", help="trace on")
    p.add_argument("--trace-bytes", type=int, default=600)
    p.add_argument("--sfn-express-ms", type=float, default=100.0, help="Express duration per transition")
    a = p.parse_args()

    parts = ours_per_transition(a)
    ours = sum(parts.values()) * 1e6
    standard = PRICES["sfn_standard_per_thousand_transitions"] * 1000
    express = PRICES["sfn_express_per_million_requests"] + 1e6 * (64 / 1024) * (a.sfn_express_ms / 1000) * PRICES[
        "sfn_express_per_gb_second"
    ]
    print(f"cost per million transitions (us-east-1 list prices; item {a.item_bytes} B, "
          f"Lambda {a.lambda_ms} ms @ {a.memory_mb} MB, batch {a.batch_size}, emits {a.emit_ratio:.0%}, "
          f"trace {'on' if a.trace else 'off'})")
    print()
    print("| | $ per million transitions | vs ours |")
    print("|---|---:|---:|")
    for name, dollars in parts.items():
        print(f"| ours: {name} | {dollars * 1e6:.2f} | |")
    print(f"| **ours, total** | **{ours:.2f}** | 1x |")
    print(f"| Step Functions Standard | {standard:.2f} | {standard / ours:.1f}x |")
    print(f"| Step Functions Express (1 request per transition, {a.sfn_express_ms:.0f} ms, 64 MB) | {express:.2f} | {express / ours:.1f}x |")


if __name__ == "__main__":
    main()
