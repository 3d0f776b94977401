"""Cost per million transitions: our runtime on AWS against Step Functions, by design.

    python3 bench/cost_model.py                       # the defaults below
    python3 bench/cost_model.py --burst 2             # every design coalescing bursts of 2
    python3 bench/cost_model.py --item-bytes 2048 --lambda-ms 12 --emit-ratio 0.2 --trace

One transition = one event processed by the worker (load, step, commit). Every event
reaches the worker as one SQS FIFO message, sent by whoever produced it: the producer (a
client's `SendMessage`), the worker's inline flush of an emitting commit (a region's
`Finished`, a `Returned`), or the sweeper (a `Timeout`). Of N transitions, `emit_ratio * N`
emit one event and `timer_ratio * N` arm a timer within SQS's 15-minute delay horizon that
fires (its `Timeout` is another transition, whose exit cancels the timer); the producer
sends the rest. The emitted and timed-out events are transitions counted in N, so their
sends are counted once, where they are made (the flush in "SQS", the `Timeout` in
"doorbells"), never twice. (Until 2026-12-02 this model charged an emit's message as one
more send on top of the N arrivals: 0.06 of the old $3.69.)

Counted per design (read from the code, 2026-12-02):

* worker load (`store.rs` `load_for_events`): harel-compatible layout, one strongly
  consistent `BatchGetItem` of the execution and one processed mark per event (each item
  billed on its own, a missing mark too); cheapest layout, one strongly consistent
  `GetItem` of the execution, whose item carries the last 10 event ids (8-byte hashes).
* worker commit (`commit.rs` `plan`): harel layout, always a `TransactWriteItems` (the
  execution + a mark per event: 2 WRU per KB each); cheapest layout, one conditional
  `PutItem` (1 WRU per KB) unless the commit also emits, arms or cancels a timer or traces,
  when it is a transaction. An emit adds the outbox put (in the transaction), the seq
  counter `ADD` (one per commit) and the outbox `DeleteItem` after the inline flush; a timer
  arm adds the timer put and its due-index (GSI) entry; the exit of a timed state a cancel
  (a transactional delete).
* coalescing (`--burst K`): K consecutive events of one execution in one SQS batch share
  one load and one commit.
* SQS: the arrival sends (`--send-batch N`: the producer's `SendMessageBatch` of N is one
  request per 64 KB), the flush's one request per emitting commit, the event source's
  `ReceiveMessage` and `DeleteMessageBatch` per batch.
* doorbells (`doorbell.rs`, `doorbell/sqs.rs`, `sweeper.rs` `fire_one`): per timer, the
  standard-queue send, its receive/delete, the sweeper's invocation and its billed wait
  until `fire_at` (SQS delays are whole seconds, rounded down: half a second on average),
  the consistent `GetItem` of the timer, the `load` of the execution, the `Timeout`
  `SendMessage` to the FIFO queue and the guarded `DeleteItem` (+ its GSI delete).
* fixed monthly costs, amortized over `--transitions-per-month`: the relay's scheduled
  consistent `Scan`s of the outbox and spawns tables and the sweeper's 16 due-index `Query`s
  (template.yaml: both every minute), the harel layout's full timer scan every 10 minutes
  (`due.rs`; the cheapest layout has no harel writer and sets the interval to `None`),
  those schedules' Lambda invocations and logs, and the event sources' idle long polls.
* storage: the processed marks until their TTL (harel layout), trace rows when trace is on.
* CloudWatch Logs: the platform's START/END/REPORT lines and the metrics line per
  invocation (a processed event writes no line at LogLevel=info: `--log-bytes-per-event`
  for a debug deployment). Until 2026-12-02 (second round) this model charged an info
  line of 280 bytes per event that the worker does not write: $0.14 of the old $1.61.
* CloudWatch metrics and alarms: the custom metrics the functions' EMF lines create (a
  zero count is not sent, so only those a mix makes non-zero) and the template's alarms.

Not counted (the same for every design, or not per transition): the execution items'
storage, spawns, the free tiers (1 M SQS requests, 1 M Lambda requests and 400,000 GB-s,
25 GB of DynamoDB storage, 5 GB of logs a month), data transfer (same region: none).
Prices are us-east-1 list prices; no network, no AWS account.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

# Every figure with where it was checked (2026-12-02, through the `search` tool's stored
# copies). The AWS pricing pages render their price tables client-side, so the stored
# copies of those pages carry the billing *rules* but not always the *figure*; where the
# figure was only found on a third-party copy, the comment says so.
PRICES = {
    # DynamoDB on-demand, standard table class, us-east-1. Rules (1 WRU per 1 KB written,
    # transactional writes 2 WRU; 1 RRU per 4 KB strongly consistent read, 0.5 eventually
    # consistent): https://aws.amazon.com/dynamodb/pricing/on-demand/ and
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html
    # (BatchGetItem bills each item rounded up to 4 KB on its own). FIGURES NOT CONFIRMED on
    # an AWS page (not in the stored copy): $0.625 / $0.125 per million as quoted by
    # https://airbyte.com/data-engineering-resources/dynamodb-pricing (the Nov 2024 cut).
    "ddb_write_per_million_wru": 0.625,
    "ddb_read_per_million_rru": 0.125,
    # Storage: FIGURE NOT CONFIRMED on an AWS page; $0.25 per GB-month, +100 bytes per item,
    # as used by AWS's own cost calculator script (aws/agent-toolkit-for-aws,
    # skills/.../amazon-dynamodb/scripts/calculate_costs.py). TTL deletes are free
    # ("free of charge", AWS re:Post answer citing
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html),
    # but expired items are billed until deleted, "typically within two days"
    # (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html).
    "ddb_storage_per_gb_month": 0.25,
    "ddb_storage_item_overhead_bytes": 100,
    # SQS, per request, each 64 KB chunk of a payload one request (rule:
    # https://aws.amazon.com/jp/sqs/features/). FIGURES NOT CONFIRMED on an AWS page: FIFO
    # $0.50, standard $0.40 per million (first 100 billion a month), as quoted by
    # https://cloudburn.io/blog/amazon-sqs-pricing (March 2026).
    "sqs_fifo_per_million": 0.50,
    "sqs_standard_per_million": 0.40,
    # Lambda arm64, first tier. $0.20 per million requests (quoted from
    # https://aws.amazon.com/lambda/pricing/ in api-evangelist/aws-lambda's transcription);
    # $0.0000133334 per GB-s FIGURE NOT CONFIRMED on an AWS page (the stored page has the
    # table client-rendered), as quoted by https://cloudchipr.com/blog/aws-lambda-pricing.
    "lambda_per_million_requests": 0.20,
    "lambda_arm_per_gb_second": 0.0000133334,
    # CloudWatch Logs standard ingestion, first tier: FIGURE NOT CONFIRMED on an AWS page,
    # $0.50 per GB as quoted by https://www.duckbillgroup.com/?p=9080 (Lambda log tiers).
    "logs_ingest_per_gb": 0.50,
    # Step Functions. Rules (Express: per request, duration rounded up to 100 ms, memory
    # billed in 64 MB chunks): https://aws.amazon.com/step-functions/pricing/. FIGURES NOT
    # CONFIRMED on an AWS page: $0.025 per 1,000 transitions, $1.00 per million requests,
    # $0.00001667 per GB-s, as quoted by https://www.wring.co/blog/aws-step-functions-pricing-guide.
    "sfn_standard_per_thousand_transitions": 0.025,
    "sfn_express_per_million_requests": 1.00,
    "sfn_express_per_gb_second": 0.00001667,
    # EventBridge rules on a schedule (SAM `Type: Schedule`): assumed free (not
    # EventBridge Scheduler, $1.00 per million after 14 M free per
    # https://cloudburn.io/blog/amazon-eventbridge-pricing). NOT CONFIRMED on an AWS page;
    # at 86,400 runs a month it would be at most $0.09 a month either way.
    "eventbridge_schedule_per_million": 0.0,
    # CloudWatch classic metrics: billed per metric (each name + dimension values) per
    # month (rule: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/metrics-otel-pricing.html,
    # "Classic Metrics ... Per metric per month"), prorated by the hour in which a metric
    # receives data, and EMF metrics are custom metrics. FIGURES NOT CONFIRMED on an AWS
    # page: $0.30 per metric-month (first 10,000) and $0.10 per metric of a
    # standard-resolution alarm, as quoted by https://c3x.dev/blog/aws-cloudwatch-metrics-cost/.
    "cloudwatch_metric_per_month": 0.30,
    "cloudwatch_alarm_metric_per_month": 0.10,
}

# Not prices: the counts and sizes the model assumes, with where they come from.
MINUTES_PER_MONTH = 30 * 24 * 60  # a 30-day month
SQS_MAX_CHUNK = 64 * 1024
TIMER_SHARDS = 16  # shared/store/src/dynamodb/schema.rs
FULL_SCAN_MINUTES = 10  # due.rs DEFAULT_TIMER_FULL_SCAN_INTERVAL (harel layout only)
# Lambda's SQS pollers long-poll (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html:
# five concurrent batches at low traffic, "as few as 2" except with maximum concurrency
# set, which the worker's event source sets). How many pollers a FIFO source keeps idle
# and how long each waits are not documented: ASSUMED 5 (worker, FIFO) and 2 (doorbells,
# standard), each a 20 s long poll (SQS's longest), i.e. 3 empty receives a minute.
LONG_POLL_SECONDS = 20
# template.yaml's alarms, counted by the metrics each one reads: DeadLetter 1,
# OldestMessage 1, WorkerErrors 1, ScheduledErrors 2 (relay, sweeper), Throttles 3
ALARM_METRICS = 8
# the functions' EMF counts (metrics.rs, worker.rs, relay.rs, sweeper.rs): worker 6, relay 3,
# sweeper 3, each with its one `Function` dimension
FUNCTION_METRICS = 12


def wru(item_bytes: float, transactional: bool = False) -> int:
    """Write units of one item write (a delete of a missing item still costs 1)."""
    units = max(1, math.ceil(item_bytes / 1024))
    return units * (2 if transactional else 1)


def rru_strong(item_bytes: float) -> int:
    """Read units of one strongly consistent item read (a missing item still costs 1)."""
    return max(1, math.ceil(item_bytes / 4096))


def fifo_chunks(messages: int, message_bytes: int) -> int:
    return max(1, math.ceil(messages * message_bytes / SQS_MAX_CHUNK))


@dataclass(frozen=True)
class Design:
    name: str
    layout: str  # "harel" or "cheap"
    burst: int = 1
    send_batch: int = 1


def exe_bytes(a, layout: str) -> int:
    """The execution item as DynamoDB counts it: + the dedupe ids in the cheapest layout."""
    return a.item_bytes + (a.dedupe_bytes if layout == "cheap" else 0)


def worker_units(a, layout: str, burst: int, emit: float, timer: float, trace: bool) -> tuple[float, float]:
    """(RRU, WRU) per event of the worker's load and commit, expected over the burst.

    Events of a burst are independent: each emits with probability `emit`, carries a timer
    op (the arm, or the cancel on leaving the timed state) with probability 2 * `timer`.
    """
    k = burst
    exe = exe_bytes(a, layout)
    # load
    if layout == "harel":
        rru = rru_strong(exe) + k * rru_strong(a.mark_bytes)  # BatchGetItem: each item alone
    else:
        rru = rru_strong(exe)  # GetItem
    # commit: what makes it a transaction, and what the events add to it
    q = min(1.0, 2 * timer)
    p_tx = 1.0 if (layout == "harel" or trace) else 1 - ((1 - emit) * (1 - q)) ** k
    p_emit = 1 - (1 - emit) ** k
    w = p_tx * wru(exe, True) + (1 - p_tx) * wru(exe, False)
    if layout == "harel":
        w += k * wru(a.mark_bytes, True)  # one processed mark per event
    per_event = (
        emit * (wru(a.message_bytes, True) + wru(8))  # outbox put (tx) + delete after the flush
        + timer * (wru(a.timer_bytes, True) + wru(a.timer_bytes))  # timer put (tx) + its GSI entry
        + timer * wru(a.timer_bytes, True)  # the cancel on exit (tx delete; already fired: no GSI)
    )
    if trace:
        per_event += wru(a.trace_bytes, True) + wru(a.trace_bytes, True)  # trace put + ring delete
    w += k * per_event + p_emit * wru(16)  # the seq counter ADD, once per emitting commit
    return rru / k, w / k


def per_transition(a, d: Design, emit: float, timer: float) -> dict:
    """Dollars per transition, by row, and the unit counts behind them."""
    P = PRICES
    k = d.burst
    trace = a.trace
    rru, w = worker_units(a, d.layout, k, emit, timer, trace)
    p_emit = 1 - (1 - emit) ** k

    # SQS FIFO: arrivals (the producer's share; emits and Timeouts are sent elsewhere),
    # the flush's one request per emitting commit, receive + delete per batch
    producer = max(0.0, 1 - emit - timer)
    fifo = (
        producer * fifo_chunks(d.send_batch, a.message_bytes) / d.send_batch
        + p_emit / k
        + 2 / a.batch_size
    )

    # Lambda: the worker, one invocation per batch, billed by the millisecond
    gbs = (a.memory_mb / 1024) * (a.lambda_ms / 1000)
    lam = (1 / a.batch_size) * P["lambda_per_million_requests"] / 1e6 + gbs * P["lambda_arm_per_gb_second"]

    # CloudWatch Logs of the worker
    log_bytes = a.log_bytes_per_event + a.log_bytes_per_invocation / a.batch_size
    logs = log_bytes / 1e9 * P["logs_ingest_per_gb"]

    # doorbells: everything a near timer costs outside the worker's commit
    exe = exe_bytes(a, d.layout)
    db_std = 1 + 2 / a.doorbell_batch  # send + receive/delete share (standard queue)
    db_fifo = 1  # the Timeout's SendMessage
    db_rru = rru_strong(a.timer_bytes) + rru_strong(exe)  # armed_timer GetItem + load of the execution
    db_wru = wru(a.timer_bytes) + wru(a.timer_bytes)  # guarded DeleteItem + its GSI delete
    db_inv = 1 / a.doorbell_batch
    db_gbs = (128 / 1024) * ((a.doorbell_wait_ms + a.sweeper_ms) / 1000) / a.doorbell_batch
    db_log = a.log_bytes_per_invocation / a.doorbell_batch + 200  # + its "timer doorbells" line
    doorbell = timer * (
        db_std * P["sqs_standard_per_million"] / 1e6
        + db_fifo * P["sqs_fifo_per_million"] / 1e6
        + db_rru * P["ddb_read_per_million_rru"] / 1e6
        + db_wru * P["ddb_write_per_million_wru"] / 1e6
        + db_inv * P["lambda_per_million_requests"] / 1e6
        + db_gbs * P["lambda_arm_per_gb_second"]
        + db_log / 1e9 * P["logs_ingest_per_gb"]
    )

    fixed = fixed_monthly(a, d.layout, emit, timer)["total"] / a.transitions_per_month

    # storage: the marks until their TTL (+ the TTL's lag), trace rows for --trace-days
    gb_month = 0.0
    if d.layout == "harel":
        gb_month += (a.mark_bytes + P["ddb_storage_item_overhead_bytes"]) / 1e9 * (
            (a.processed_ttl_days + a.ttl_lag_days) / (MINUTES_PER_MONTH / 1440)
        )
    if trace:
        gb_month += (a.trace_bytes + P["ddb_storage_item_overhead_bytes"]) / 1e9 * (
            a.trace_days / (MINUTES_PER_MONTH / 1440)
        )

    rows = {
        "DynamoDB reads": rru * P["ddb_read_per_million_rru"] / 1e6,
        "DynamoDB writes": w * P["ddb_write_per_million_wru"] / 1e6,
        "SQS FIFO": fifo * P["sqs_fifo_per_million"] / 1e6,
        "Lambda (worker)": lam,
        "CloudWatch Logs (worker)": logs,
        "doorbells (near timers)": doorbell,
        "fixed: schedules, idle polls, metrics, alarms": fixed,
        "storage": gb_month * P["ddb_storage_per_gb_month"],
    }
    units = {
        "exe_bytes": exe,
        "rru": rru,
        "wru": w,
        "fifo": fifo,
        "doorbell_rru": timer * db_rru,
        "doorbell_wru": timer * db_wru,
        "doorbell_requests": timer * (db_std + db_fifo),
    }
    return {"rows": rows, "units": units, "total": sum(rows.values())}


def fixed_monthly(a, layout: str, emit: float = 0.0, timer: float = 0.0) -> dict:
    """Dollars a month that do not depend on the volume (at a volume that sends some
    data every hour). `emit` and `timer`, the mix's shares, decide which custom metrics
    are sent at all: a zero count is not sent (`MetricSet::count`), so a metric
    that stays zero costs nothing."""
    P = PRICES
    relay_runs = MINUTES_PER_MONTH / a.relay_period_min
    sweep_runs = MINUTES_PER_MONTH / a.sweeper_period_min
    gb = 128 / 1024  # template.yaml: relay and sweeper MemorySize 128
    lam = (relay_runs + sweep_runs) * (
        P["lambda_per_million_requests"] / 1e6 + P["eventbridge_schedule_per_million"] / 1e6
    ) + (relay_runs * a.relay_ms + sweep_runs * a.sweeper_ms) / 1000 * gb * P["lambda_arm_per_gb_second"]
    logs = (relay_runs + sweep_runs) * a.log_bytes_per_invocation / 1e9 * P["logs_ingest_per_gb"]
    # relay: consistent Scan of outbox and spawns, near-empty (the inline flush acks them)
    rru = relay_runs * 2 * 1
    # sweeper: 16 eventually consistent Queries of the due index, 0.5 RRU each at least
    rru += sweep_runs * TIMER_SHARDS * 0.5
    wru_ = 0.0
    if layout == "harel":
        scans = MINUTES_PER_MONTH / FULL_SCAN_MINUTES
        rru += scans * rru_strong(a.pending_timers * a.timer_bytes)  # consistent full Scan
        wru_ += scans * 1  # the claim's conditional UpdateItem on the counters item
    ddb = rru * P["ddb_read_per_million_rru"] / 1e6 + wru_ * P["ddb_write_per_million_wru"] / 1e6
    polls_per_month = MINUTES_PER_MONTH * 60 / LONG_POLL_SECONDS
    idle = polls_per_month * (
        a.fifo_pollers * P["sqs_fifo_per_million"] + a.doorbell_pollers * P["sqs_standard_per_million"]
    ) / 1e6
    # the worker's EventsProcessed every hour; its RelayForwarded (the inline flush) with
    # emits, the sweeper's TimersFired with timers; the counts that stay zero (conflicts,
    # failures, skipped, parked, the relay's own, which the inline flush leaves nothing)
    # are not sent
    metrics = 1 + (emit > 0) + (timer > 0)
    monitoring = metrics * P["cloudwatch_metric_per_month"] + ALARM_METRICS * P["cloudwatch_alarm_metric_per_month"]
    parts = {
        "schedules: Lambda": lam,
        "schedules: logs": logs,
        "schedules: DynamoDB": ddb,
        "idle long polls": idle,
        "metrics and alarms": monitoring,
    }
    parts["total"] = sum(parts.values())
    return parts


def express_per_million(a) -> float:
    billed_ms = math.ceil(a.sfn_express_ms / 100) * 100
    return PRICES["sfn_express_per_million_requests"] + 1e6 * (64 / 1024) * (billed_ms / 1000) * PRICES[
        "sfn_express_per_gb_second"
    ]


def designs(a) -> list[Design]:
    k = a.burst
    tag = f", bursts of {k}" if k > 1 else ""
    out = [
        Design("harel-compatible" + (" (today)" if k == 1 else tag), "harel", k),
        Design("cheapest layout" + tag, "cheap", k),
    ]
    out += [Design(f"cheapest + coalescing {b}", "cheap", b) for b in (2, 5, 10)]
    out.append(Design(f"cheapest + producer batches of {a.send_batch}{tag}", "cheap", k, a.send_batch))
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--item-bytes", type=int, default=914, help="execution item size as DynamoDB counts it (measured: 914)")
    p.add_argument("--lambda-ms", type=float, default=8.0, help="worker billed ms per event")
    p.add_argument("--memory-mb", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=10, help="SQS records per worker invocation")
    p.add_argument("--emit-ratio", type=float, default=0.1, help="share of transitions that emit")
    p.add_argument("--timer-ratio", type=float, default=0.1, help="share of transitions that arm a near timer (<15 min) which fires")
    p.add_argument("--trace", action="store_true", help="trace on")
    p.add_argument("--trace-bytes", type=int, default=600)
    p.add_argument("--trace-days", type=float, default=30, help="days a trace row is stored (ASSUMED; the ring and FinishedRetentionDays decide)")
    p.add_argument("--sfn-express-ms", type=float, default=100.0, help="Express duration per transition")
    p.add_argument("--burst", type=int, default=1, help="coalesce K consecutive events of one execution (the first two designs and producer batching)")
    p.add_argument("--send-batch", type=int, default=10, help="the producer's SendMessageBatch size (the last design)")
    p.add_argument("--transitions-per-month", type=float, default=10e6, help="volume the fixed monthly costs are spread over")
    p.add_argument("--message-bytes", type=int, default=500, help="an event's SQS message (and outbox item) size")
    p.add_argument("--dedupe-bytes", type=int, default=87, help="cheapest layout: the `recent` attribute, its name and a flag byte and the last 10 event ids as 8-byte hashes (measured: 914 B -> 1,001 B)")
    p.add_argument("--mark-bytes", type=int, default=100, help="harel layout: a processed mark item")
    p.add_argument("--processed-ttl-days", type=float, default=30, help="template.yaml ProcessedRetentionDays")
    p.add_argument("--ttl-lag-days", type=float, default=2, help="TTL deletes 'typically within two days'")
    p.add_argument("--timer-bytes", type=int, default=150, help="a timer item")
    p.add_argument("--pending-timers", type=int, default=0, help="harel layout: timers the 10-minute full scan reads (0: the empty case)")
    p.add_argument("--doorbell-batch", type=int, default=1, help="doorbells per sweeper invocation (spread in time: 1)")
    p.add_argument("--doorbell-wait-ms", type=float, default=500, help="the sweeper's billed wait until fire_at (delays round down to whole seconds)")
    p.add_argument("--sweeper-ms", type=float, default=20, help="sweeper billed ms per run, beyond any wait (ASSUMED)")
    p.add_argument("--relay-ms", type=float, default=20, help="relay billed ms per run (ASSUMED)")
    p.add_argument("--relay-period-min", type=float, default=1, help="template.yaml RelaySchedule")
    p.add_argument("--sweeper-period-min", type=float, default=1, help="template.yaml SweeperSchedule")
    p.add_argument("--fifo-pollers", type=int, default=5, help="idle long pollers of the worker's event source (ASSUMED)")
    p.add_argument("--doorbell-pollers", type=int, default=2, help="idle long pollers of the doorbell queue's event source (ASSUMED)")
    p.add_argument("--log-bytes-per-event", type=float, default=0, help="log bytes the worker writes per processed event: none at LogLevel=info (its info lines are for dropped events, unknown executions and parking: worker.rs); set it for a debug deployment")
    p.add_argument("--log-bytes-per-invocation", type=float, default=700, help="START/END/REPORT + the metrics line (ESTIMATED)")
    return p


def defaults(**overrides):
    """The default assumptions (as parsed from no flags), with `overrides` applied."""
    a = parser().parse_args([])
    for key, value in overrides.items():
        setattr(a, key, value)
    return a


def main(argv=None) -> None:
    a = parser().parse_args(argv)

    ds = designs(a)
    mix = [per_transition(a, d, a.emit_ratio, a.timer_ratio) for d in ds]
    standard = PRICES["sfn_standard_per_thousand_transitions"] * 1000
    express = express_per_million(a)

    print(
        f"cost per million transitions (us-east-1 list prices; item {a.item_bytes} B, Lambda {a.lambda_ms:g} ms "
        f"@ {a.memory_mb} MB arm64, batch {a.batch_size}, emits {a.emit_ratio:.0%}, near timers {a.timer_ratio:.0%}, "
        f"trace {'on' if a.trace else 'off'}, {a.transitions_per_month / 1e6:g} M transitions a month)"
    )
    print()
    print("(1) where the money goes, $ per million transitions")
    print()
    print("| | " + " | ".join(d.name for d in ds) + " |")
    print("|---|" + "---:|" * len(ds))
    for row in mix[0]["rows"]:
        print(f"| {row} | " + " | ".join(f"{m['rows'][row] * 1e6:.3f}" for m in mix) + " |")
    print("| **total** | " + " | ".join(f"**{m['total'] * 1e6:.2f}**" for m in mix) + " |")
    print()
    print("counts per transition behind the table:")
    print()
    print("| | " + " | ".join(d.name for d in ds) + " |")
    print("|---|" + "---:|" * len(ds))
    labels = {
        "exe_bytes": "execution item, bytes",
        "rru": "worker RRU (load)",
        "wru": "worker WRU (commit, flush ack)",
        "fifo": "SQS FIFO requests (arrivals, flush, receive/delete)",
        "doorbell_rru": "doorbell RRU",
        "doorbell_wru": "doorbell WRU",
        "doorbell_requests": "doorbell SQS requests",
    }
    for key, label in labels.items():
        fmt = "{:.0f}" if key == "exe_bytes" else "{:.3f}"
        print(f"| {label} | " + " | ".join(fmt.format(m["units"][key]) for m in mix) + " |")
    print()
    for layout in ("harel", "cheap"):
        f = fixed_monthly(a, layout)
        print(
            f"fixed a month ({'harel' if layout == 'harel' else 'cheapest'} layout): ${f['total']:.2f} "
            f"(idle long polls ${f['idle long polls']:.2f}, schedules' Lambda ${f['schedules: Lambda']:.2f}, "
            f"logs ${f['schedules: logs']:.2f}, DynamoDB ${f['schedules: DynamoDB']:.3f}, "
            f"metrics and alarms ${f['metrics and alarms']:.2f} for a plain mix)"
        )
    print()
    print("(2) totals against Step Functions, $ per million transitions")
    print()
    print("| | ours | Standard $%.2f is | Express $%.2f is |" % (standard, express))
    print("|---|---:|---:|---:|")
    for d, m in zip(ds, mix):
        t = m["total"] * 1e6
        print(f"| {d.name} | {t:.2f} | {standard / t:.1f}x ours | {express / t:.2f}x ours |")
    print(f"| Step Functions Standard | {standard:.2f} | | |")
    print(f"| Step Functions Express (1 request per transition, {a.sfn_express_ms:.0f} ms, 64 MB) | {express:.2f} | | |")
    print()

    # (3) the verdict
    target = express
    cases = [
        ("a plain transition (no emits, no timers)", 0.0, 0.0),
        (f"with {a.emit_ratio:.0%} emits", a.emit_ratio, 0.0),
        (f"with {a.emit_ratio:.0%} emits and {a.timer_ratio:.0%} near timers", a.emit_ratio, a.timer_ratio),
    ]
    print(f"(3) at or under Express's ${target:.2f}:")
    for label, e, t in cases:
        totals = [(d, per_transition(a, d, e, t)["total"] * 1e6) for d in ds]
        under = [f"{d.name} ${x:.2f}" for d, x in totals if x <= target + 1e-9]
        over = [f"{d.name} ${x:.2f}" for d, x in totals if x > target + 1e-9]
        print(f"- {label}: " + ("; ".join(under) if under else "none") + ("  (over: " + "; ".join(over) + ")" if over else ""))
    # the floor: one FIFO request per send, plus the receive/delete share, nothing else
    floor_send = PRICES["sqs_fifo_per_million"]
    floor_rx = 2 / a.batch_size * PRICES["sqs_fifo_per_million"]
    print(
        f"- the floor: SQS FIFO's one request per send is ${floor_send:.2f} per million transitions on its own, "
        f"${floor_send + floor_rx:.2f} with the event source's receive/delete share (batches of {a.batch_size}), "
        f"before any DynamoDB; only producer batching goes under it "
        f"(${fifo_chunks(a.send_batch, a.message_bytes) / a.send_batch * floor_send + floor_rx:.2f} at batches of {a.send_batch})."
    )
    floor_write = PRICES["ddb_write_per_million_wru"]  # one durable write of an item under 1 KB
    print(
        f"- with the one durable write a transition needs (1 WRU, ${floor_write:.3f}), a transition sent alone and "
        f"committed alone costs at least ${floor_send + floor_rx + floor_write:.3f} per million at on-demand prices: "
        + ("over" if floor_send + floor_rx + floor_write > target else "under")
        + f" ${target:.2f} before the read, Lambda or anything else; only sharing a send (producer batching) or a "
        "write (coalescing) goes under it."
    )
    plain_fixed = fixed_monthly(a, "cheap")
    every = FUNCTION_METRICS * PRICES["cloudwatch_metric_per_month"] + ALARM_METRICS * PRICES["cloudwatch_alarm_metric_per_month"]
    print(
        f"- metrics and alarms: ${plain_fixed['metrics and alarms']:.2f} a month for a plain mix "
        f"(${plain_fixed['metrics and alarms'] / a.transitions_per_month * 1e6:.3f} per million at this volume); "
        f"sending the zero counts too would bill all {FUNCTION_METRICS} of the functions' metrics: ${every:.2f} a month."
    )
    plain = {d.name: per_transition(a, d, 0.0, 0.0)["total"] * 1e6 for d in ds}
    alone = Design("cheapest layout alone", "cheap")  # no coalescing, no producer batching
    alone_plain = per_transition(a, alone, 0.0, 0.0)["total"] * 1e6
    helped = [d.name for d in ds if plain[d.name] <= target + 1e-9]
    if alone_plain > target + 1e-9:
        print(
            f"- plainly: the cheapest layout alone (no coalescing, no producer batching) costs ${alone_plain:.2f} "
            f"for a plain transition, over ${target:.2f}: at these assumptions $1.10 needs coalescing or "
            "producer batching" + (f" ({', '.join(helped)})." if helped else ", and even those do not reach it.")
        )
    else:
        print(f"- the cheapest layout alone reaches it: ${alone_plain:.2f} for a plain transition.")
    # what one emit and one near timer add (cheapest layout, no coalescing)
    # marginal, between two small shares: at a share of 1 the arm and the cancel would
    # share a commit, and from 0 the first emit or timer also starts sending a metric
    def marginal(e: float, t: float) -> float:
        return (per_transition(a, alone, 2 * e, 2 * t)["total"] - per_transition(a, alone, e, t)["total"]) / 0.01

    per_emit = marginal(0.01, 0.0)
    per_timer = marginal(0.0, 0.01)
    print(
        f"- what the extras add (cheapest layout): an emit ${per_emit * 1e6:.2f} per million emits (the transaction, "
        f"the outbox put and delete, the seq counter, the flush's send, less the producer's send it replaces); "
        f"a near timer ${per_timer * 1e6:.2f} per million timers (arm and cancel in transactions, the GSI, "
        "the doorbell and the sweeper's billed wait)."
    )
    if a.log_bytes_per_event:
        saved = a.log_bytes_per_event / 1e9 * PRICES["logs_ingest_per_gb"] * 1e6
        quiet = parser().parse_args(argv)
        quiet.log_bytes_per_event = 0.0
        for label, e, t in cases[:2]:
            under = [
                f"{d.name} ${per_transition(quiet, d, e, t)['total'] * 1e6:.2f}"
                for d in designs(quiet)
                if per_transition(quiet, d, e, t)["total"] * 1e6 <= target + 1e-9
            ]
            print(
                f"- at LogLevel=info (without the {a.log_bytes_per_event:g} B logged per event, ${saved:.3f} less everywhere), {label}: "
                + ("; ".join(under) if under else "none")
            )

if __name__ == "__main__":
    main()
