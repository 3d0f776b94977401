"""Cost per million transitions: our runtime on AWS against Step Functions, by design.

    python3 bench/cost_model.py                       # the defaults below
    python3 bench/cost_model.py --burst 2             # every design coalescing bursts of 2
    python3 bench/cost_model.py --item-bytes 2048 --lambda-ms 12 --emit-ratio 0.2 --trace
    python3 bench/cost_model.py --template my-template.yaml   # another deployment's template

Where the inputs come from: AWS's list prices are the constants in PRICES (each with its
source); what the model takes from the code (item sizes, the sweep's constants, the
functions' metrics) is bench/cost_inputs.json, which the Rust test `cost_inputs_match_the_code`
(`cargo test -p stm-store --test measures`) measures on the items the store writes and
bench/test_cost_model.py checks against the functions' code; what it takes from the
deployment (the functions' memory, architecture, batch size and schedules, the event
sources, the alarms and their metrics, the retention, the defaults of DedupeMarks, Trace,
LogLevel, XRayTracing and XRaySampleRatio) is read from template.yaml at run time
(`--template`). The rest (Lambda's billed time, the message size, the mix, the pollers)
are assumptions, flags, marked so.

One transition = one event processed by the worker (load, step, commit). Every event
reaches the worker as one SQS FIFO message, sent by whoever produced it: the producer (a
client's `SendMessage`), the worker's inline flush of an emitting commit (a region's
`Finished`, a `Returned`), or the sweeper (a `Timeout`). Of N transitions, `emit_ratio * N`
emit one event and `timer_ratio * N` arm a timer within SQS's 15-minute delay horizon that
fires (its `Timeout` is another transition, which leaves the timed state); the producer
sends the rest. The emitted and timed-out events are transitions counted in N, so their
sends are counted once, where they are made (the flush in "SQS", the `Timeout` in
"doorbells"), never twice. (Until 2026-12-02 this model charged an emit's message as one
more send on top of the N arrivals: 0.06 of the old $3.69.)

Counted per design (read from the code, 2026-12-02):

* worker load (`dynamodb/load.rs` `load_for_events`): harel-compatible layout, one strongly
  consistent `BatchGetItem` of the execution and one processed mark per event (each item
  billed on its own, a missing mark too); cheapest layout, one strongly consistent
  `GetItem` of the execution, whose item carries the last 10 event ids (8-byte hashes).
* worker commit (`dynamodb/commit/plan.rs` `plan`): harel layout, always a `TransactWriteItems` (the
  execution + a mark per event: 2 WRU per KB each); cheapest layout, one conditional
  `PutItem` (1 WRU per KB) unless the commit also emits, arms or cancels a timer or traces,
  when it is a transaction. An emit adds the outbox put (in the transaction; its seq
  comes from no counter) and the outbox `DeleteItem` after the inline flush; a timer
  arm adds the timer put and its due-index (GSI) entry. A fired timer's `Timeout` claims
  its row first (`driver/step.rs` `check_timeout`, `dynamodb/timers.rs` `claim_timer_at`:
  a consistent `GetItem`, and the conditional `DeleteItem` only when the row is still
  armed, which it is not once the sweeper deleted it); its step's exit of the timed state
  then cancels nothing (the row is gone: `drop_void_cancels`), so its commit stays a plain
  `PutItem`. Until 2026-12-07 that exit was a transactional delete of the gone row, which
  also made its commit a transaction (3 WRU), and this model left the claim out; later
  that day the claim was the conditional `DeleteItem` alone, refused and billed a write
  unit all the same ("If the expression evaluates to false, DynamoDB still consumes write
  capacity units", the DynamoDB Developer Guide).
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
  consistent `Scan`s of the outbox and spawns tables and the sweeper's due-index `Query`s, one
  per shard (both on template.yaml's schedules), the full timer scan (`due.rs`, every 10
  minutes, claimed with a conditional `UpdateItem` on the counters item; in every layout: the
  functions take `CreateOptions`' default interval whatever STM_DEDUPE_MARKS says; until
  2026-12-03 this model counted it for the harel layout only; `--no-due-index`, a timers table
  without the index, harel's reused with ExistingTables=true: every sweep is the full scan),
  those schedules' Lambda invocations and logs, the event sources' idle long polls, and the
  KMS requests of the tables' encryption (below).
* storage: the processed marks until their TTL (harel layout), trace rows when trace is on;
  and point-in-time recovery on the same bytes (every table has it: billed per GB-month of
  the table's size).
* encryption: the tables' `SSESpecification: {SSEEnabled: true}` is an AWS managed KMS key
  (`aws/dynamodb`), so DynamoDB's `Decrypt` of each table key is a billed KMS request: one per
  connection and table when it opens, and again after five minutes without use; counted as
  one per 5 minutes for every (function, table it reads or writes items of) pair, per warm
  instance (`--kms-instances`): an upper bound for a connection in steady use, which decrypts
  once. The queues' `SqsManagedSseEnabled` (SSE-SQS) uses SQS-owned keys: no KMS request.
* CloudWatch Logs: the platform's START/END/REPORT lines and the metrics line per
  invocation (a processed event writes no line at LogLevel=info: `--log-bytes-per-event`
  for a debug deployment). Until 2026-12-02 (second round) this model charged an info
  line of 280 bytes per event that the worker does not write: $0.14 of the old $1.61.
* CloudWatch metrics and alarms: the custom metrics the functions' EMF lines create (a
  zero count is not sent, so only those a mix makes non-zero) and the template's alarms.
* X-Ray (section 5, `xray_monthly`; since 2026-12-07), priced on its own and in no total
  nor in the last line: an observability option, which the cheapest layout the cost line
  prices runs without (XRayTracing=PassThrough, $0). With XRayTracing=Active, Lambda records
  the invocations X-Ray's default sampling rule picks (its reservoir of 1 a second for the
  account, then 5% of the rest) and the functions send their spans into the executions'
  traces whose ids fall in XRaySampleRatio (`--xray-tracing`, `--xray-sample-ratio`).
* what the goals leave for a near timer (section 6, `goal_budget`; since 2026-12-07): each
  goal of issue 47 less a plain transition and the mix's emits at their marginal cost, per
  million timers, set against a timer carried on the execution item, a design not built
  whose one assumption is the entry's size on the item (`--timer-entry-bytes`).

Not counted (the same for every design, or not per transition): the execution items'
storage (and its point-in-time recovery), spawns, the free tiers (1 M SQS requests, 1 M
Lambda requests and 400,000 GB-s, 25 GB of DynamoDB storage, 5 GB of logs, 20,000 KMS
requests, 100,000 X-Ray traces recorded a month), X-Ray's traces retrieved or scanned (the
operator's reads, not the traffic's), data transfer (same region: none).
Prices are us-east-1 list prices; no network, no AWS account.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TEMPLATE = os.path.join(os.path.dirname(HERE), "template.yaml")
DEFAULT_INPUTS = os.path.join(HERE, "cost_inputs.json")

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
    # DynamoDB provisioned capacity (CapacityMode=provisioned), standard table class,
    # us-east-1, per capacity unit-hour, billed whether used or not. Rules (a WCU is one
    # 1 KB write a second, transactional writes 2; an RCU one strongly consistent 4 KB read
    # a second, eventually consistent half): https://aws.amazon.com/dynamodb/pricing/provisioned/.
    # FIGURES NOT CONFIRMED on an AWS page (the stored copy has the table client-rendered):
    # $0.00065 per WCU-hour and $0.00013 per RCU-hour, the long-standing list prices.
    "ddb_provisioned_wcu_hour": 0.00065,
    "ddb_provisioned_rcu_hour": 0.00013,
    # Storage: FIGURE NOT CONFIRMED on an AWS page; $0.25 per GB-month, +100 bytes per item,
    # as used by AWS's own cost calculator script (aws/agent-toolkit-for-aws,
    # skills/.../amazon-dynamodb/scripts/calculate_costs.py). TTL deletes are free
    # ("free of charge", AWS re:Post answer citing
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/howitworks-ttl.html),
    # but expired items are billed until deleted, "typically within two days"
    # (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_UpdateTimeToLive.html).
    "ddb_storage_per_gb_month": 0.25,
    "ddb_storage_item_overhead_bytes": 100,
    # Point-in-time recovery (the template's `PointInTimeRecoveryEnabled: true` on every
    # table): billed on "the size of each DynamoDB table, including table data and local
    # secondary indexes", whatever the recovery period
    # (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/PointInTimeRecovery_Howitworks.html).
    # FIGURE NOT CONFIRMED on an AWS page: $0.20 per GB-month, as quoted by
    # https://finops.com.py/services/dynamodb/backups.
    "ddb_pitr_per_gb_month": 0.20,
    # KMS, for the tables' encryption at rest. `SSEEnabled: true` without a key: "server-side
    # encryption type is set to KMS and an AWS managed key is used (AWS KMS charges apply)";
    # false or absent: an AWS owned key, no KMS charge
    # (https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_SSESpecification.html).
    # DynamoDB "caches the plaintext table keys for each connection in memory. If DynamoDB
    # gets a request for the cached table key after five minutes of inactivity, it sends a
    # new request to AWS KMS to decrypt the table key"
    # (https://docs.aws.amazon.com/kms/latest/developerguide/services-dynamodb.html). An AWS
    # managed key has no monthly fee ("can exist in your account for free":
    # https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html); its requests are
    # billed. FIGURE NOT CONFIRMED on an AWS page (https://aws.amazon.com/kms/pricing/ renders
    # it client-side): $0.03 per 10,000 requests, as quoted by
    # https://gist.github.com/dasgoll/b88d5be05dcc0deb052ad40446c2fb40.
    "kms_per_10k_requests": 0.03,
    # The queues: `SqsManagedSseEnabled: true` is SSE-SQS, "SQS-owned encryption keys"
    # (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-server-side-encryption.html),
    # not KMS: no KMS request, no charge. (SSE-KMS, `KmsMasterKeyId`, would bill KMS requests
    # per data key reuse period: the model refuses a template with it.)
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
    # X-Ray, us-east-1 (checked 2026-12-07): billed per trace, a trace being one request to
    # the application whatever data points (segments) it holds (they are not billed on their
    # own): $5.00 per million traces recorded, $0.50 per million traces retrieved or
    # scanned; the first 100,000 recorded and the first 1,000,000 retrieved or scanned a month
    # free, left out like every free tier here (they would take $0.50 a month off).
    # https://aws.amazon.com/xray/pricing/: FIGURES CONFIRMED on AWS's own page, in the
    # stored copies of its German and Chinese versions (https://aws.amazon.com/de/xray/pricing/:
    # "5 USD pro Million ... (0,000005 USD pro Ablaufverfolgung)", "0,50 USD pro Million").
    # Retrieval and scans are the operator's reads (the console, the trace queries), not the
    # traffic's: not counted, named in section 5.
    "xray_traces_recorded_per_million": 5.00,
    "xray_traces_retrieved_per_million": 0.50,
}

# Not prices: the counts and sizes the model assumes, with where they come from. What comes
# from the code is in bench/cost_inputs.json, what comes from the deployment in
# template.yaml (both below); these are conventions and AWS's rules.
MINUTES_PER_MONTH = 30 * 24 * 60  # a 30-day month
HOURS_PER_MONTH = MINUTES_PER_MONTH / 60
SQS_MAX_CHUNK = 64 * 1024  # one SQS request per 64 KB of payload (AWS's rule, above)
# Lambda's SQS pollers long-poll (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html:
# five concurrent batches at low traffic, "as few as 2" except with maximum concurrency
# set, which the worker's event source sets). How many pollers a FIFO source keeps idle
# and how long each waits are not documented: ASSUMED 5 (worker, FIFO) and 2 (doorbells,
# standard), each a 20 s long poll (SQS's longest), i.e. 3 empty receives a minute.
LONG_POLL_SECONDS = 20
# DynamoDB decrypts a table key again after this long without use (the KMS rule, above).
KMS_TABLE_KEY_IDLE_MINUTES = 5
# X-Ray's default sampling rule, the one Lambda applies to a function with Tracing: Active
# (X-Ray developer guide, https://docs.aws.amazon.com/xray/latest/devguide/xray-console-sampling.html):
# a reservoir of 1 request a second, then a fixed rate of 5% of the requests beyond it. The
# reservoir "applies to all services using the rule collectively"
# (https://docs.aws.amazon.com/xray/latest/api/API_SamplingRule.html, ReservoirSize): one for
# the account, shared by the three functions. Each sampled invocation is one trace, distinct
# from the executions' traces the functions send their spans to (XRaySampleRatio).
XRAY_RESERVOIR_PER_SECOND = 1
XRAY_DEFAULT_FIXED_RATE = 0.05


# ---------------------------------------------------------------- inputs from the code

def load_code_inputs(path: str = DEFAULT_INPUTS) -> dict:
    """bench/cost_inputs.json: `code` (sizes as DynamoDB counts them, the sweep's
    constants; measured by `cost_inputs_match_the_code`) and `function_metrics` (the EMF
    counts each function sends, each with its one `Function` dimension; counted in the
    runtime's code by bench/test_cost_model.py)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    out = dict(data["code"])
    out["function_metrics"] = dict(data["function_metrics"])
    return out


# ---------------------------------------------------------------- inputs from the template

def load_template(path: str = DEFAULT_TEMPLATE) -> dict:
    """template.yaml as data, CloudFormation's short forms as their long forms
    (`!Ref X` -> {"Ref": "X"}, `!GetAtt A.B` -> {"Fn::GetAtt": ["A", "B"]}, `!Sub s` ->
    {"Fn::Sub": s}, ...), as cfn-lint's decoder reads them."""
    try:
        import yaml
    except ImportError:  # PyYAML: in the project's venv (cfn-lint brings it)
        raise SystemExit(
            "bench/cost_model.py reads template.yaml with PyYAML: run it with .venv/bin/python "
            "(bash .ci/setup.sh) or `pip install pyyaml`"
        )

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's when there
        pass

    def short_form(loader, suffix, node):
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        if suffix == "Ref":
            return {"Ref": value}
        if suffix == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
        return {"Fn::" + suffix: value}

    Loader.add_multi_constructor("!", short_form)
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=Loader)
    except OSError as e:
        raise SystemExit(f"bench/cost_model.py: the template: {e}")


def resolve(template: dict, value):
    """A property's value as deployed with the parameters' defaults: `Ref` of a parameter
    is its `Default`; a list is resolved element by element; anything else is as written."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        param = template.get("Parameters", {}).get(value["Ref"])
        if param is None:
            return value  # a resource or a pseudo parameter
        return param.get("Default")
    if isinstance(value, list):
        return [resolve(template, v) for v in value]
    return value


def condition(template: dict, name: str) -> bool:
    """A template condition's value with the parameters' defaults: `Fn::Equals`, `Fn::Not`,
    `Fn::And`, `Fn::Or` and `Condition` over parameters and literals; anything else (a
    `Fn::Join`, a pseudo parameter) is refused rather than guessed."""

    def value(node):
        v = resolve(template, node)
        if isinstance(v, (dict, list)):
            raise SystemExit(f"template.yaml: the condition {name} compares {node!r}, which the model cannot resolve")
        return str(v)

    def ev(node) -> bool:
        if isinstance(node, dict) and len(node) == 1:
            ((key, args),) = node.items()
            if key == "Condition":
                return condition(template, args)
            if key == "Fn::Equals":
                return value(args[0]) == value(args[1])
            if key == "Fn::Not":
                return not ev(args[0])
            if key == "Fn::And":
                return all(ev(n) for n in args)
            if key == "Fn::Or":
                return any(ev(n) for n in args)
        raise SystemExit(f"template.yaml: the condition {name} ({node!r}) is not one the model evaluates")

    conditions = template.get("Conditions", {})
    if name not in conditions:
        raise SystemExit(f"template.yaml: no condition {name}")
    return ev(conditions[name])


def resolve_if(template: dict, value):
    """`resolve`, with `Fn::If` decided by its condition at the parameters' defaults."""
    while isinstance(value, dict) and set(value) == {"Fn::If"}:
        name, yes, no = value["Fn::If"]
        value = yes if condition(template, name) else no
    return resolve(template, value)


def rate_minutes(expression: str) -> float:
    """An EventBridge `rate(N unit)` schedule's period in minutes."""
    m = re.fullmatch(r"\s*rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)\s*", str(expression))
    if not m:
        raise SystemExit(f"template.yaml: the schedule {expression!r} is not a rate(...) the model understands")
    return int(m.group(1)) * {"minute": 1, "hour": 60, "day": 1440}[m.group(2).rstrip("s")]


def alarm_metric_count(props: dict) -> int:
    """The metrics an alarm is billed for: its `MetricName`, or each `MetricStat` of its
    metric math (an expression is not a metric)."""
    if "MetricName" in props:
        return 1
    return sum(1 for q in props.get("Metrics", []) if "MetricStat" in q)


def table_of(template: dict, value) -> str | None:
    """The store's name of the table a policy resource or a `TableName` names (`executions`
    for `!Sub ${Prefix}_executions`, for `!Sub arn:...:table/${Prefix}_executions[/index/X]`
    and for `!GetAtt ExecutionsTable.Arn`), else None."""
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        target = template.get("Resources", {}).get(value["Fn::GetAtt"][0], {})
        if target.get("Type") != "AWS::DynamoDB::Table":
            return None
        value = target.get("Properties", {}).get("TableName")
    if isinstance(value, dict) and "Fn::Sub" in value and isinstance(value["Fn::Sub"], str):
        m = re.search(r"(?:^|table/)\$\{Prefix\}_([a-z_]+?)(?:/index/.*)?$", value["Fn::Sub"])
        return m.group(1) if m else None
    return None


def template_inputs(path: str = DEFAULT_TEMPLATE) -> dict:
    """What the model takes from the deployment, read from template.yaml (the parameters at
    their defaults). The functions are the template's `Worker`, `Relay` and `Sweeper`."""
    t = load_template(path)
    resources = t.get("Resources", {})
    params = t.get("Parameters", {})
    globals_fn = t.get("Globals", {}).get("Function", {})

    def function(name: str) -> dict:
        r = resources.get(name)
        if not r or r.get("Type") != "AWS::Serverless::Function":
            raise SystemExit(f"{path}: no AWS::Serverless::Function {name}")
        return r.get("Properties", {})

    def prop(fn: dict, key: str, default=None):
        # a function's own, else the template's Globals, else Lambda's default
        return resolve(t, fn.get(key, globals_fn.get(key, default)))

    def event(fn: dict, kind: str) -> list:
        return [e.get("Properties", {}) for e in fn.get("Events", {}).values() if e.get("Type") == kind]

    def queue(source: dict) -> dict:
        ref = source.get("Queue", {}).get("Fn::GetAtt", [None])[0]
        r = resources.get(ref, {})
        if r.get("Type") != "AWS::SQS::Queue":
            raise SystemExit(f"{path}: an SQS event source on {source.get('Queue')!r}, not a queue of this template")
        return r.get("Properties", {})

    fns = {name: function(name) for name in ("Worker", "Relay", "Sweeper")}
    architectures = {name: prop(fn, "Architectures", ["x86_64"]) for name, fn in fns.items()}
    (worker_queue,) = event(fns["Worker"], "SQS")
    (relay_schedule,) = event(fns["Relay"], "Schedule")
    (sweeper_schedule,) = event(fns["Sweeper"], "Schedule")
    (doorbells,) = event(fns["Sweeper"], "SQS")
    sqs_sources = [
        (name, "fifo" if str(queue(src).get("FifoQueue", "false")).lower() == "true" else "standard")
        for name, fn in fns.items()
        for src in event(fn, "SQS")
    ]
    # CapacityMode=provisioned: the scalable targets, by dimension (read or write)
    scaled = [
        str(r.get("Properties", {}).get("ScalableDimension", ""))
        for r in resources.values()
        if r.get("Type") == "AWS::ApplicationAutoScaling::ScalableTarget"
    ]
    alarms = {
        name: alarm_metric_count(r.get("Properties", {}))
        for name, r in resources.items()
        if r.get("Type") == "AWS::CloudWatch::Alarm"
    }
    # the tables' encryption and point-in-time recovery, by the store's table name
    tables = {
        table_of(t, r.get("Properties", {}).get("TableName")): r.get("Properties", {})
        for r in resources.values()
        if r.get("Type") == "AWS::DynamoDB::Table"
    }

    def sse(props: dict) -> str:
        spec = props.get("SSESpecification", {})
        if str(resolve(t, spec.get("SSEEnabled", False))).lower() != "true":
            return "aws-owned"
        if spec.get("KMSMasterKeyId"):
            raise SystemExit(f"{path}: a table with a customer managed KMS key; the model prices AWS owned and AWS managed keys only")
        return "aws-managed"

    sse_tables = {name: sse(props) for name, props in tables.items()}
    pitr_tables = sorted(
        name
        for name, props in tables.items()
        if str(resolve(t, props.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled", False))).lower() == "true"
    )
    for name, r in resources.items():
        if r.get("Type") == "AWS::SQS::Queue" and r.get("Properties", {}).get("KmsMasterKeyId"):
            raise SystemExit(f"{path}: {name} is encrypted with a KMS key (SSE-KMS); the model prices SSE-SQS only")

    # (function, table) pairs whose table key a function's connections decrypt: the tables
    # its role lets it read or write items of (DescribeTable reads no item)
    def role_tables(fn: dict) -> set:
        role = resources.get((fn.get("Role") or {}).get("Fn::GetAtt", [None])[0], {})
        out = set()
        for policy in role.get("Properties", {}).get("Policies", []):
            for s in policy.get("PolicyDocument", {}).get("Statement", []):
                actions = s.get("Action", [])
                actions = [actions] if isinstance(actions, str) else actions
                if not any(a.startswith("dynamodb:") and a != "dynamodb:DescribeTable" for a in actions):
                    continue
                res = s.get("Resource", [])
                for r in res if isinstance(res, list) else [res]:
                    name = table_of(t, r)
                    if name:
                        out.add(name)
        return out

    item_tables = {name: sorted(role_tables(fn)) for name, fn in fns.items()}

    def default(name: str):
        return params[name]["Default"]

    # X-Ray: each function's tracing mode (its own, else the Globals', else Lambda's default,
    # PassThrough) and the share of the executions' traces its spans go to: its
    # STM_XRAY_SAMPLE_RATIO as deployed with the defaults (the Globals' variables under its
    # own, as SAM merges them; absent: none)
    xray_by_function = {name: str(prop(fn, "Tracing", "PassThrough")) for name, fn in fns.items()}
    if len(set(xray_by_function.values())) != 1:
        raise SystemExit(f"{path}: the functions' tracing modes differ ({xray_by_function}); the model prices one for all three")
    globals_env = (globals_fn.get("Environment") or {}).get("Variables") or {}

    def env_ratio(fn: dict) -> float:
        variables = {**globals_env, **((fn.get("Environment") or {}).get("Variables") or {})}
        return float(resolve_if(t, variables.get("STM_XRAY_SAMPLE_RATIO", 0)))

    return {
        "path": path,
        "architectures": architectures,
        "worker_memory_mb": int(prop(fns["Worker"], "MemorySize", 128)),
        "relay_memory_mb": int(prop(fns["Relay"], "MemorySize", 128)),
        "sweeper_memory_mb": int(prop(fns["Sweeper"], "MemorySize", 128)),
        "worker_batch_size": int(resolve(t, worker_queue.get("BatchSize", 10))),
        "doorbell_batch_size": int(resolve(t, doorbells.get("BatchSize", 10))),
        "relay_period_min": rate_minutes(resolve(t, relay_schedule["Schedule"])),
        "sweeper_period_min": rate_minutes(resolve(t, sweeper_schedule["Schedule"])),
        "sqs_sources": sqs_sources,
        "alarms": alarms,
        "alarm_metrics": sum(alarms.values()),
        "processed_retention_days": float(default("ProcessedRetentionDays")),
        "dedupe_marks": default("DedupeMarks"),
        "trace": str(default("Trace")).lower() == "true",
        "state_index": str(default("StateIndex")).lower() == "true",
        "log_level": default("LogLevel"),
        "capacity_mode": default("CapacityMode"),
        "provisioned_min_units": float(default("ProvisionedMinUnits")),
        "provisioned_target_utilization": float(default("ProvisionedTargetUtilization")),
        "scaled_read_targets": sum(1 for d in scaled if d.endswith(":ReadCapacityUnits")),
        "scaled_write_targets": sum(1 for d in scaled if d.endswith(":WriteCapacityUnits")),
        "sse_tables": sse_tables,
        "pitr_tables": pitr_tables,
        "item_tables": item_tables,
        # the (function, table) pairs whose table key is an AWS managed KMS key
        "kms_pairs": sum(1 for fn in item_tables.values() for n in fn if sse_tables.get(n) == "aws-managed"),
        # X-Ray: the mode (XRayTracing through the Globals' Tracing) and XRaySampleRatio's
        # default (what the functions get with Active; 0 for a template without it), and
        # each function's STM_XRAY_SAMPLE_RATIO at the defaults (0 unless Active)
        "xray_tracing": xray_by_function["Worker"],
        "xray_sample_ratio": float(params["XRaySampleRatio"]["Default"]) if "XRaySampleRatio" in params else 0.0,
        "xray_env_ratio": {name: env_ratio(fn) for name, fn in fns.items()},
    }


def check_architecture(tpl: dict) -> None:
    """The model prices arm64 Lambda only."""
    other = {n: a for n, a in tpl["architectures"].items() if a != ["arm64"]}
    if other:
        raise SystemExit(f"{tpl['path']}: the model has arm64's Lambda price only, the template deploys {other}")


def wru(item_bytes: float, transactional: bool = False) -> int:
    """Write units of one item write (a delete of a missing item still costs 1)."""
    units = max(1, math.ceil(item_bytes / 1024))
    return units * (2 if transactional else 1)


def rru_strong(item_bytes: float) -> int:
    """Read units of one strongly consistent item read (a missing item still costs 1)."""
    return max(1, math.ceil(item_bytes / 4096))


def unit_prices(a) -> tuple[float, float]:
    """Dollars per read unit and per write unit consumed. On-demand: the request price.
    Provisioned: the unit-hour's price spread over the unit-seconds it serves at the
    target utilization (auto scaling keeps the capacity that much above the use)."""
    P = PRICES
    if a.capacity_mode == "provisioned":
        use = a.target_utilization / 100
        return P["ddb_provisioned_rcu_hour"] / 3600 / use, P["ddb_provisioned_wcu_hour"] / 3600 / use
    return P["ddb_read_per_million_rru"] / 1e6, P["ddb_write_per_million_wru"] / 1e6


def fifo_chunks(messages: int, message_bytes: int) -> int:
    return max(1, math.ceil(messages * message_bytes / SQS_MAX_CHUNK))


@dataclass(frozen=True)
class Design:
    name: str
    layout: str  # "harel" or "cheap"
    burst: int = 1
    send_batch: int = 1


def exe_bytes(a, layout: str) -> int:
    """The execution item as DynamoDB counts it: + the dedupe ids in the cheapest layout,
    + the state entry with StateIndex=true."""
    state = a.state_entry_bytes if a.state_index else 0
    return a.item_bytes + (a.dedupe_bytes if layout == "cheap" else 0) + state


def worker_units(a, layout: str, burst: int, emit: float, timer: float, trace: bool) -> tuple[float, float]:
    """(RRU, WRU) per event of the worker's load and commit, expected over the burst.

    Events of a burst are independent: each emits with probability `emit`, arms a timer
    with probability `timer`, and is a fired timer's `Timeout` with probability `timer`
    (its claim's read; its commit cancels nothing).
    """
    k = burst
    exe = exe_bytes(a, layout)
    # load
    if layout == "harel":
        rru = rru_strong(exe) + k * rru_strong(a.mark_bytes)  # BatchGetItem: each item alone
    else:
        rru = rru_strong(exe)  # GetItem
    # commit: what makes it a transaction, and what the events add to it
    q = min(1.0, timer)  # the arm; a Timeout's commit is no transaction for its timer
    p_tx = 1.0 if (layout == "harel" or trace) else 1 - ((1 - emit) * (1 - q)) ** k
    w = p_tx * wru(exe, True) + (1 - p_tx) * wru(exe, False)
    if layout == "harel":
        w += k * wru(a.mark_bytes, True)  # one processed mark per event
    per_event = (
        # outbox put (tx) + its delete after the flush (a delete bills the deleted item's size)
        emit * (wru(a.outbox_bytes, True) + wru(a.outbox_bytes))
        + timer * (wru(a.timer_bytes, True) + wru(a.timer_bytes))  # timer put (tx) + its GSI entry
    )
    # the Timeout's claim: a consistent GetItem of its timer, which the sweeper deleted
    # already (a Timeout before the sweeper's delete also deletes it: rare, not counted)
    rru += k * timer * rru_strong(a.timer_bytes)
    if trace:
        per_event += wru(a.trace_bytes, True) + wru(a.trace_bytes, True)  # trace put + ring delete
    if a.state_index:
        # a move to another state: the state_index entry's delete and its put (a KEYS_ONLY
        # entry, under 1 KB: one plain write each, in a transaction too); a coalesced burst
        # moves it once, from its first state to its last
        per_event += 2 * a.state_moves / k
    w += k * per_event
    return rru / k, w / k


def per_transition(a, d: Design, emit: float, timer: float) -> dict:
    """Dollars per transition, by row, and the unit counts behind them."""
    P = PRICES
    read_unit, write_unit = unit_prices(a)
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
    db_gbs = (a.sweeper_memory_mb / 1024) * ((a.doorbell_wait_ms + a.sweeper_ms) / 1000) / a.doorbell_batch
    db_log = a.log_bytes_per_invocation / a.doorbell_batch + 200  # + its "timer doorbells" line
    doorbell = timer * (
        db_std * P["sqs_standard_per_million"] / 1e6
        + db_fifo * P["sqs_fifo_per_million"] / 1e6
        + db_rru * read_unit
        + db_wru * write_unit
        + db_inv * P["lambda_per_million_requests"] / 1e6
        + db_gbs * P["lambda_arm_per_gb_second"]
        + db_log / 1e9 * P["logs_ingest_per_gb"]
    )

    fixed = fixed_monthly(a, d.layout, emit, timer)["total"] / a.transitions_per_month

    # storage: the marks until their TTL (+ the TTL's lag), trace rows for --trace-days;
    # point-in-time recovery bills the same bytes again on the tables that have it
    stored = {"processed": 0.0, "trace": 0.0}
    if d.layout == "harel":
        stored["processed"] = (a.mark_bytes + P["ddb_storage_item_overhead_bytes"]) / 1e9 * (
            (a.processed_ttl_days + a.ttl_lag_days) / (MINUTES_PER_MONTH / 1440)
        )
    if trace:
        stored["trace"] = (a.trace_bytes + P["ddb_storage_item_overhead_bytes"]) / 1e9 * (
            a.trace_days / (MINUTES_PER_MONTH / 1440)
        )
    gb_month = sum(stored.values())
    pitr_gb_month = sum(gb for table, gb in stored.items() if table in a.pitr_tables)

    rows = {
        "DynamoDB reads": rru * read_unit,
        "DynamoDB writes": w * write_unit,
        "SQS FIFO": fifo * P["sqs_fifo_per_million"] / 1e6,
        "Lambda (worker)": lam,
        "CloudWatch Logs (worker)": logs,
        "doorbells (near timers)": doorbell,
        "fixed: schedules, idle polls, KMS, metrics, alarms": fixed,
        "storage": gb_month * P["ddb_storage_per_gb_month"],
        "point-in-time recovery": pitr_gb_month * P["ddb_pitr_per_gb_month"],
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
    lam = (relay_runs + sweep_runs) * (
        P["lambda_per_million_requests"] / 1e6 + P["eventbridge_schedule_per_million"] / 1e6
    ) + (
        relay_runs * a.relay_ms / 1000 * a.relay_memory_mb / 1024
        + sweep_runs * a.sweeper_ms / 1000 * a.sweeper_memory_mb / 1024
    ) * P["lambda_arm_per_gb_second"]
    logs = (relay_runs + sweep_runs) * a.log_bytes_per_invocation / 1e9 * P["logs_ingest_per_gb"]
    # relay: consistent Scan of outbox and spawns, near-empty (the inline flush acks them)
    rru = relay_runs * 2 * 1
    # the timer full scan (`due.rs`), in every layout (the functions take CreateOptions'
    # default interval whatever the dedupe marks): a consistent Scan of every pending timer
    wru_ = 0.0
    scan = rru_strong(a.pending_timers * a.timer_bytes)
    if a.no_due_index:
        # a timers table without the due index (harel's, ExistingTables=true): every sweep
        # is the full scan, and no claim is taken
        rru += sweep_runs * scan
    else:
        # sweeper: one eventually consistent Query per shard of the due index, 0.5 RRU each
        # at least; every 10 minutes the claimed full scan instead
        scans = MINUTES_PER_MONTH / a.full_scan_minutes
        rru += (sweep_runs - scans) * a.timer_shards * 0.5 + scans * scan
        wru_ += scans * 1  # the claim's conditional UpdateItem on the counters item
    read_unit, write_unit = unit_prices(a)
    ddb = rru * read_unit + wru_ * write_unit
    # the aliases' routes (`rollout.rs`): each process that creates executions reads the
    # routes item (one consistent GetItem, 1 RRU) at most once a second, whatever its rate;
    # with RollbackFailureRate set, each scheduled sweep reads it too
    routes_reads = a.creating_processes * MINUTES_PER_MONTH * 60 + (sweep_runs if a.rollback else 0)
    routes = routes_reads * read_unit
    # KMS: each (function, table) pair's connection decrypts its table key again after five
    # idle minutes; counted every five minutes for each warm instance
    kms_requests = a.kms_pairs * a.kms_instances * MINUTES_PER_MONTH / KMS_TABLE_KEY_IDLE_MINUTES
    kms = kms_requests * P["kms_per_10k_requests"] / 1e4
    # provisioned: each scalable target's minimum, billed by the hour used or not. Counted
    # in full on top of the traffic's units: an upper bound, since a busy table's minimum
    # is part of the capacity its traffic pays for.
    floor = 0.0
    if a.capacity_mode == "provisioned":
        floor = a.min_units * HOURS_PER_MONTH * (
            a.scaled_read_targets * P["ddb_provisioned_rcu_hour"]
            + a.scaled_write_targets * P["ddb_provisioned_wcu_hour"]
        )
    polls_per_month = MINUTES_PER_MONTH * 60 / LONG_POLL_SECONDS
    # each SQS event source of the template: the worker's on the FIFO queue, the sweeper's
    # doorbells on the standard one
    idle = polls_per_month * sum(
        a.fifo_pollers * P["sqs_fifo_per_million"] if kind == "fifo" else a.doorbell_pollers * P["sqs_standard_per_million"]
        for _, kind in a.sqs_sources
    ) / 1e6
    # the worker's EventsProcessed every hour; its RelayForwarded (the inline flush) with
    # emits, the sweeper's TimersFired with timers; the counts that stay zero (conflicts,
    # failures, skipped, parked, the relay's own, which the inline flush leaves nothing)
    # are not sent
    metrics = 1 + (emit > 0) + (timer > 0)
    monitoring = metrics * P["cloudwatch_metric_per_month"] + a.alarm_metrics * P["cloudwatch_alarm_metric_per_month"]
    parts = {
        "schedules: Lambda": lam,
        "schedules: logs": logs,
        "schedules: DynamoDB": ddb,
        "provisioned minimum": floor,
        "idle long polls": idle,
        "KMS (table keys)": kms,
        "metrics and alarms": monitoring,
        "routes read": routes,
    }
    parts["total"] = sum(parts.values())
    return parts


def xray_ratio(a) -> float:
    """The share of the executions' traces the functions send their spans to: XRaySampleRatio
    with Active, else 0 (the template's `!If [TracesToXRay, !Ref XRaySampleRatio, "0"]`)."""
    return a.xray_sample_ratio if a.xray_tracing == "Active" else 0.0


def xray_invocations(a, volume: float, timer: float) -> dict:
    """The functions' Lambda invocations a month at `volume` transitions, as the rest of the
    model counts them: the worker's one per batch of the event source, the sweeper's one per
    doorbell batch (`timer` of the transitions), and the relay's and the sweeper's scheduled
    runs (template.yaml's schedules)."""
    return {
        "worker": volume / a.batch_size,
        "doorbells": volume * timer / a.doorbell_batch,
        "scheduled": MINUTES_PER_MONTH / a.relay_period_min + MINUTES_PER_MONTH / a.sweeper_period_min,
    }


def xray_monthly(a, volume: float, timer: float) -> dict:
    """X-Ray's traces recorded a month at `volume` transitions, and their dollars (free tier
    left out). With Active: Lambda's invocation traces by the default rule, its reservoir
    (1 a second, as long as some invocation comes each second) and 5% of the invocations
    beyond it; and the functions' own traces, XRaySampleRatio of the executions' traces,
    each transition counted as its own client-started trace (an upper bound: the steps,
    timers, children and joins of one piece of work continue one trace). PassThrough: none."""
    active = a.xray_tracing == "Active"
    invocations = sum(xray_invocations(a, volume, timer).values())
    reservoir = min(invocations, XRAY_RESERVOIR_PER_SECOND * MINUTES_PER_MONTH * 60) if active else 0.0
    traces = {
        "lambda": XRAY_DEFAULT_FIXED_RATE * (invocations - reservoir) if active else 0.0,
        "ours": xray_ratio(a) * volume,
        "reservoir": reservoir,
    }
    price = PRICES["xray_traces_recorded_per_million"] / 1e6
    dollars = {k: n * price for k, n in traces.items()}
    return {"invocations": invocations, "traces": traces, "dollars": dollars, "total": sum(dollars.values())}


def express_per_million(a) -> float:
    billed_ms = math.ceil(a.sfn_express_ms / 100) * 100
    return PRICES["sfn_express_per_million_requests"] + 1e6 * (64 / 1024) * (billed_ms / 1000) * PRICES[
        "sfn_express_per_gb_second"
    ]


def designs(a) -> list[Design]:
    k = a.burst
    tag = f", bursts of {k}" if k > 1 else ""
    # "(today)": the layout template.yaml deploys by default (its DedupeMarks)
    today = {"table": "harel", "item": "cheap"}[a.dedupe_marks]
    label = {layout: (" (today)" if k == 1 and layout == today else tag) for layout in ("harel", "cheap")}
    out = [
        Design("harel-compatible" + label["harel"], "harel", k),
        Design("cheapest layout" + label["cheap"], "cheap", k),
    ]
    out += [Design(f"cheapest + coalescing {b}", "cheap", b) for b in (2, 5, 10)]
    out.append(Design(f"cheapest + producer batches of {a.send_batch}{tag}", "cheap", k, a.send_batch))
    return out


def parser(template: str = DEFAULT_TEMPLATE, inputs: str = DEFAULT_INPUTS) -> argparse.ArgumentParser:
    """The flags, their defaults from `template` (template.yaml) and `inputs`
    (bench/cost_inputs.json) where those say them."""
    tpl = template_inputs(template)
    check_architecture(tpl)
    code = load_code_inputs(inputs)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--template", default=template, help="the SAM template the deployment's figures are read from (default: the repo's template.yaml)")
    p.add_argument("--inputs", default=inputs, help="the figures taken from the code (default: bench/cost_inputs.json, checked by `cargo test -p stm-store --test measures`)")
    # not flags: the rest of what the template and the code say
    p.set_defaults(
        template_inputs=tpl,
        timer_shards=code["timer_shards"],
        full_scan_minutes=code["timer_full_scan_minutes"],
        function_metrics=code["function_metrics"],
        alarm_metrics=tpl["alarm_metrics"],
        relay_memory_mb=tpl["relay_memory_mb"],
        sweeper_memory_mb=tpl["sweeper_memory_mb"],
        sqs_sources=tpl["sqs_sources"],
        dedupe_marks=tpl["dedupe_marks"],
        scaled_read_targets=tpl["scaled_read_targets"],
        scaled_write_targets=tpl["scaled_write_targets"],
        pitr_tables=tpl["pitr_tables"],
        kms_pairs=tpl["kms_pairs"],
    )
    p.add_argument("--item-bytes", type=int, default=code["execution_item_bytes"], help="execution item size as DynamoDB counts it (default: measured, cost_inputs.json)")
    p.add_argument("--lambda-ms", type=float, default=8.0, help="worker billed ms per event")
    p.add_argument("--memory-mb", type=int, default=tpl["worker_memory_mb"], help="the worker's memory (default: template.yaml's)")
    p.add_argument("--batch-size", type=int, default=tpl["worker_batch_size"], help="SQS records per worker invocation (default: template.yaml's)")
    p.add_argument("--emit-ratio", type=float, default=0.1, help="share of transitions that emit")
    p.add_argument("--timer-ratio", type=float, default=0.1, help="share of transitions that arm a near timer (<15 min) which fires")
    p.add_argument("--trace", action=argparse.BooleanOptionalAction, default=tpl["trace"], help="trace on (default: template.yaml's Trace)")
    p.add_argument("--trace-bytes", type=int, default=code["trace_item_bytes"], help="a trace row (default: measured, cost_inputs.json)")
    p.add_argument("--trace-days", type=float, default=30, help="days a trace row is stored (ASSUMED; the ring and FinishedRetentionDays decide)")
    p.add_argument("--sfn-express-ms", type=float, default=100.0, help="Express duration per transition")
    p.add_argument("--burst", type=int, default=1, help="coalesce K consecutive events of one execution (the first two designs and producer batching)")
    p.add_argument("--send-batch", type=int, default=10, help="the producer's SendMessageBatch size (the last design)")
    p.add_argument("--transitions-per-month", type=float, default=10e6, help="volume the fixed monthly costs are spread over")
    p.add_argument("--message-bytes", type=int, default=500, help="an event's SQS message size (ASSUMED; it only decides the 64 KB chunks of a producer's batch)")
    p.add_argument("--outbox-bytes", type=int, default=code["outbox_item_bytes"], help="an emitted event's outbox item (default: measured, cost_inputs.json)")
    p.add_argument("--state-index", action=argparse.BooleanOptionalAction, default=tpl["state_index"], help="the worker writes each execution's state entry (default: template.yaml's StateIndex)")
    p.add_argument("--state-entry-bytes", type=int, default=code["state_entry_bytes"], help="StateIndex=true: the state entry on the execution item (default: measured, cost_inputs.json)")
    p.add_argument("--state-moves", type=float, default=1.0, help="StateIndex=true: the share of transitions that move an execution to another state, each one the index entry's delete and put (ASSUMED: all)")
    p.add_argument("--dedupe-bytes", type=int, default=code["dedupe_window_bytes"], help="cheapest layout: the `recent` attribute, its name and a flag byte and the last 10 event ids as 8-byte hashes (default: measured, cost_inputs.json)")
    p.add_argument("--mark-bytes", type=int, default=code["processed_mark_bytes"], help="harel layout: a processed mark item (default: measured, cost_inputs.json)")
    p.add_argument("--processed-ttl-days", type=float, default=tpl["processed_retention_days"], help="days a mark is kept (default: template.yaml's ProcessedRetentionDays)")
    p.add_argument("--ttl-lag-days", type=float, default=2, help="TTL deletes 'typically within two days'")
    p.add_argument("--timer-entry-bytes", type=int, default=40, help="ASSUMED: a timer carried on the execution item (section 6, not built): its timers-map entry and due-index key")
    p.add_argument("--timer-bytes", type=int, default=code["timer_item_bytes"], help="a timer item (default: measured, cost_inputs.json)")
    p.add_argument("--pending-timers", type=int, default=0, help="timers the 10-minute full scan reads, every layout's (0: the empty case)")
    p.add_argument("--no-due-index", action="store_true", help="a timers table without the due index (harel's, reused with ExistingTables=true): every sweep is the full scan")
    p.add_argument("--creating-processes", type=int, default=1, help="processes that create executions (the routes item is read at most once a second by each) (ASSUMED)")
    p.add_argument("--rollback", action=argparse.BooleanOptionalAction, default=False, help="RollbackFailureRate set: each scheduled sweep reads the routes (the canaries' tallies are left out: only while a canary runs)")
    p.add_argument("--kms-instances", type=int, default=1, help="warm instances of each function, each with its connections decrypting its tables' keys every 5 minutes (ASSUMED)")
    p.add_argument("--doorbell-batch", type=int, default=1, help="doorbells per sweeper invocation (ASSUMED spread in time: 1; at most the template's BatchSize)")
    p.add_argument("--doorbell-wait-ms", type=float, default=500, help="the sweeper's billed wait until fire_at (delays round down to whole seconds)")
    p.add_argument("--sweeper-ms", type=float, default=20, help="sweeper billed ms per run, beyond any wait (ASSUMED)")
    p.add_argument("--relay-ms", type=float, default=20, help="relay billed ms per run (ASSUMED)")
    p.add_argument("--relay-period-min", type=float, default=tpl["relay_period_min"], help="default: template.yaml's RelaySchedule")
    p.add_argument("--sweeper-period-min", type=float, default=tpl["sweeper_period_min"], help="default: template.yaml's SweeperSchedule")
    p.add_argument("--fifo-pollers", type=int, default=5, help="idle long pollers of each event source on a FIFO queue, the worker's (ASSUMED)")
    p.add_argument("--doorbell-pollers", type=int, default=2, help="idle long pollers of each event source on a standard queue, the doorbells' (ASSUMED)")
    p.add_argument("--log-bytes-per-event", type=float, default=0, help="log bytes the worker writes per processed event: none at LogLevel=info (its info lines are for dropped events, unknown executions and parking: worker.rs); set it for a debug deployment")
    p.add_argument("--capacity-mode", choices=["on-demand", "provisioned"], default=tpl["capacity_mode"], help="the tables' capacity mode (default: template.yaml's CapacityMode)")
    p.add_argument("--target-utilization", type=float, default=tpl["provisioned_target_utilization"], help="provisioned: the share of its capacity auto scaling keeps a table at, percent (default: template.yaml's ProvisionedTargetUtilization)")
    p.add_argument("--min-units", type=float, default=tpl["provisioned_min_units"], help="provisioned: each scalable target's minimum units (default: template.yaml's ProvisionedMinUnits)")
    p.add_argument("--log-bytes-per-invocation", type=float, default=700, help="START/END/REPORT + the metrics line (ESTIMATED)")
    p.add_argument("--xray-tracing", choices=["Active", "PassThrough"], default=tpl["xray_tracing"], help="the functions' X-Ray tracing mode, priced in section 5 and in no total (default: template.yaml's XRayTracing)")
    p.add_argument("--xray-sample-ratio", type=share, default=tpl["xray_sample_ratio"], help="with Active, the share of the executions' traces the functions send their spans to, 0 to 1 (default: template.yaml's XRaySampleRatio)")
    return p


def share(text: str) -> float:
    """A ratio flag's value: a number from 0 to 1."""
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value


def defaults(template: str = DEFAULT_TEMPLATE, inputs: str = DEFAULT_INPUTS, **overrides):
    """The default assumptions (as parsed from no flags, for `template` and `inputs`), with
    `overrides` applied."""
    a = parser(template, inputs).parse_args([])
    for key, value in overrides.items():
        setattr(a, key, value)
    return a


def parse(argv=None) -> argparse.Namespace:
    """The flags, after reading the template and the inputs they name (their defaults)."""
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--template", default=DEFAULT_TEMPLATE)
    first.add_argument("--inputs", default=DEFAULT_INPUTS)
    paths, _ = first.parse_known_args(argv)
    return parser(paths.template, paths.inputs).parse_args(argv)


def main(argv=None) -> None:
    a = parse(argv)

    ds = designs(a)
    mix = [per_transition(a, d, a.emit_ratio, a.timer_ratio) for d in ds]
    standard = PRICES["sfn_standard_per_thousand_transitions"] * 1000
    express = express_per_million(a)

    print(
        f"cost per million transitions (us-east-1 list prices; item {a.item_bytes} B, Lambda {a.lambda_ms:g} ms "
        f"@ {a.memory_mb} MB arm64, batch {a.batch_size}, emits {a.emit_ratio:.0%}, near timers {a.timer_ratio:.0%}, "
        f"trace {'on' if a.trace else 'off'}, {a.transitions_per_month / 1e6:g} M transitions a month, "
        + (
            f"provisioned tables at {a.target_utilization:g}% utilization, {a.min_units:g} units at least)"
            if a.capacity_mode == "provisioned"
            else "on-demand tables)"
        )
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
        "rru": "worker RRU (load, a Timeout's claim)",
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
            f"KMS ${f['KMS (table keys)']:.2f}, metrics and alarms ${f['metrics and alarms']:.2f} for a plain mix, "
            f"the routes read by {a.creating_processes} creating process{'es' if a.creating_processes != 1 else ''} "
            f"${f['routes read']:.2f})"
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
    function_metrics = sum(a.function_metrics.values())
    every = function_metrics * PRICES["cloudwatch_metric_per_month"] + a.alarm_metrics * PRICES["cloudwatch_alarm_metric_per_month"]
    print(
        f"- metrics and alarms: ${plain_fixed['metrics and alarms']:.2f} a month for a plain mix "
        f"(${plain_fixed['metrics and alarms'] / a.transitions_per_month * 1e6:.3f} per million at this volume); "
        f"sending the zero counts too would bill all {function_metrics} of the functions' metrics: ${every:.2f} a month."
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
        f"the outbox put and delete, the flush's send, less the producer's send it replaces); "
        f"a near timer ${per_timer * 1e6:.2f} per million timers (the arm in a transaction, the GSI, the Timeout's claim, "
        "the doorbell and the sweeper's billed wait)."
    )
    if a.log_bytes_per_event:
        saved = a.log_bytes_per_event / 1e9 * PRICES["logs_ingest_per_gb"] * 1e6
        quiet = parse(argv)
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

    print()
    capacity_modes(a)
    print()
    xray_section(a)
    print()
    budget_section(a)
    print()
    print(cost_line(a))


def cost_line(a) -> str:
    """The run's one-line summary: the realistic mix (emits and near timers at their
    ratios) for the cheapest layout, without coalescing or producer batching, on-demand at
    100 M transitions a month and provisioned at 1,000 M, and the harel-compatible layout's
    cost against it (on-demand at 100 M)."""
    cheap = mix_total(a, "cheap", "on-demand", 100e6)
    provisioned = mix_total(a, "cheap", "provisioned", 1e9)
    harel = mix_total(a, "harel", "on-demand", 100e6)
    return (
        f"cost: mix ${cheap:.2f} on-demand at 100 M, ${provisioned:.2f} provisioned at 1,000 M; "
        f"harel layout {harel / cheap:.2f} times the cheapest"
    )


def mix_total(a, layout: str, mode: str, volume: float) -> float:
    """$ per million transitions of the realistic mix (emits and near timers at their ratios),
    without coalescing or producer batching, in `layout` and capacity `mode` at `volume`
    transitions a month: the cost line's figures (no X-Ray in them)."""
    x = argparse.Namespace(**vars(a))
    x.capacity_mode, x.transitions_per_month = mode, volume
    return per_transition(x, Design(layout, layout), a.emit_ratio, a.timer_ratio)["total"] * 1e6


def xray_section(a) -> None:
    """(5) X-Ray: its price at the template's (or the flags') XRayTracing and
    XRaySampleRatio, at 100 M and 1,000 M transitions a month, the realistic mix. Priced on
    its own: an observability option, in no total above and not in the cost line, whose
    cheapest layout runs PassThrough."""
    volumes = (100e6, 1e9)
    t = a.timer_ratio
    price = PRICES["xray_traces_recorded_per_million"]
    tpl = a.template_inputs
    source = (
        "template.yaml's"
        if (a.xray_tracing, a.xray_sample_ratio) == (tpl["xray_tracing"], tpl["xray_sample_ratio"])
        else "the flags'"
    )
    x = [xray_monthly(a, v, t) for v in volumes]
    inv = xray_invocations(a, 1.0, t)  # per transition, without the scheduled runs
    scheduled = xray_invocations(a, 0.0, t)["scheduled"]
    seconds = MINUTES_PER_MONTH * 60
    print(
        f"(5) X-Ray, $ per million transitions (XRayTracing={a.xray_tracing}, XRaySampleRatio {a.xray_sample_ratio:g}: "
        f"{source}; the mix of {a.emit_ratio:.0%} emits and {t:.0%} near timers, batches of {a.batch_size}; "
        f"${price:.2f} per million traces recorded)"
    )
    print()
    print("| | " + " | ".join(f"{v / 1e6:g} M a month" for v in volumes) + " |")
    print("|---|" + "---:|" * len(volumes))
    rows = {
        "lambda": f"(a) Lambda's invocation traces, the default rule's {XRAY_DEFAULT_FIXED_RATE:.0%} of the invocations "
        f"beyond its reservoir ({inv['worker'] + inv['doorbells']:.3f} invocations a transition: worker {inv['worker']:.3f}, "
        f"doorbells {inv['doorbells']:.3f}; + {scheduled:,.0f} scheduled a month)",
        "ours": f"(b) our spans' traces, {xray_ratio(a):g} of the executions' traces, each transition counted as its own trace (an upper bound)",
        "reservoir": f"(c) the default rule's reservoir, {XRAY_RESERVOIR_PER_SECOND} trace a second: "
        f"{XRAY_RESERVOIR_PER_SECOND * seconds:,.0f} a month, ${XRAY_RESERVOIR_PER_SECOND * seconds * price / 1e6:.2f} "
        "spread over the volume",
    }
    for key, label in rows.items():
        print(f"| {label} | " + " | ".join(f"{m['dollars'][key] / (v / 1e6):.3f}" for m, v in zip(x, volumes)) + " |")
    print(f"| **X-Ray, XRayTracing={a.xray_tracing}** | " + " | ".join(f"**{m['total'] / (v / 1e6):.2f}**" for m, v in zip(x, volumes)) + " |")
    print("| X-Ray, XRayTracing=PassThrough (no trace recorded) | " + " | ".join("0.00" for _ in volumes) + " |")
    print()
    on_demand, provisioned = mix_total(a, "cheap", "on-demand", 100e6), mix_total(a, "cheap", "provisioned", 1e9)
    print(
        "- in no total: X-Ray is an observability option priced on its own, not in the tables above nor in the cost "
        "line below, whose cheapest layout runs XRayTracing=PassThrough ($0); "
        f"{a.xray_tracing} at these settings would add ${x[0]['total'] / 100:.2f} to the mix's ${on_demand:.2f} "
        f"(on-demand, 100 M) and ${x[1]['total'] / 1000:.2f} to its ${provisioned:.2f} (provisioned, 1,000 M)."
    )
    print(
        f"- the ratio sets (b) alone: ${price:.2f} x XRaySampleRatio per million transitions (${price * 0.01:.2f} at 0.01, "
        f"${price * 0.05:.2f} at 0.05, ${price:.2f} at 1); (a) and (c) are X-Ray's default sampling rule, not the "
        f"template's, and (c) assumes an invocation every second ({x[0]['invocations'] / seconds:.1f} a second at 100 M)."
    )
    print(
        "- not counted, as every free tier here: X-Ray's first 100,000 traces recorded a month "
        f"(${100_000 * price / 1e6:.2f}); nor traces retrieved or scanned "
        f"(${PRICES['xray_traces_retrieved_per_million']:.2f} per million, the first 1,000,000 a month free), "
        "which the operator's reads make (the console, the trace queries), not the traffic."
    )


def goal_budget(a) -> dict:
    """What the cost line's goals leave for near timers, and what a timer carried on the
    execution item (a design not built) would cost against it: the budget, computed from
    the model's own totals. The goals (issue 47): on-demand at 100 M a month, 1.5 times the
    floor of a lone plain transition (one FIFO send, its receive/delete share, one write
    unit); provisioned at 1,000 M, Express's price. A timer's budget is what is left of the
    goal after a plain transition and the mix's emits, per million timers."""
    alone = Design("cheapest layout", "cheap")
    floor = PRICES["sqs_fifo_per_million"] * (1 + 2 / a.batch_size) + PRICES["ddb_write_per_million_wru"]
    goals = {
        "on-demand": ("on-demand", 100e6, 1.5 * floor),
        "provisioned": ("provisioned", 1e9, express_per_million(a)),
    }
    out = {"floor": floor, "entry_bytes": a.timer_entry_bytes}
    for key, (mode, volume, goal) in goals.items():
        x = argparse.Namespace(**vars(a))
        x.capacity_mode, x.transitions_per_month = mode, volume

        def total(e: float, t: float) -> float:
            return per_transition(x, alone, e, t)["total"] * 1e6

        # marginal, between two small shares, as section (3)'s
        per_emit = (total(0.02, 0.0) - total(0.01, 0.0)) / 0.01
        per_timer = (total(0.0, 0.02) - total(0.0, 0.01)) / 0.01
        plain = total(0.0, 0.0)
        timer_budget = (goal - plain - a.emit_ratio * per_emit) / a.timer_ratio
        write = unit_prices(x)[1] * 1e6  # $ per million write units
        exe = exe_bytes(x, "cheap")
        # on the item: the arm's and the Timeout's commits write the item with the entry
        # (a write bills the larger of the item before and after), and the due index's
        # entry is put and deleted (a KEYS_ONLY entry: one unit each)
        units = lambda item: 2 * (wru(item + a.timer_entry_bytes) - wru(item)) + 2
        out[key] = {
            "goal": goal,
            "plain": plain,
            "per_emit": per_emit,
            "per_timer": per_timer,
            "timer_budget": timer_budget,
            "write": write,
            "budget_units": timer_budget / write,
            "item": exe,
            "on_item_units": units(exe),
            "on_item_units_inside": units(1024 - a.timer_entry_bytes),
        }
    return out


def budget_section(a) -> None:
    """(6): [`goal_budget`] printed."""
    b = goal_budget(a)
    print(
        f"(6) what the goals leave for a near timer, cheapest layout, {a.emit_ratio:.0%} emits and "
        f"{a.timer_ratio:.0%} near timers; each row's unit in its label, the rest $ per million timers"
    )
    print()
    print("| | on-demand, 100 M a month | provisioned, 1,000 M a month |")
    print("|---|---:|---:|")
    od, pr = b["on-demand"], b["provisioned"]
    rows = [
        ("the goal, per million transitions", "goal", "{:.2f}"),
        ("a plain transition, per million transitions", "plain", "{:.2f}"),
        ("an emit, per million emits", "per_emit", "{:.2f}"),
        ("**left for a near timer**", "timer_budget", "**{:.2f}**"),
        ("a near timer today", "per_timer", "{:.2f}"),
        ("the budget in write units, nothing else counted", "budget_units", "{:.1f}"),
    ]
    for label, key, fmt in rows:
        print(f"| {label} | {fmt.format(od[key])} | {fmt.format(pr[key])} |")
    on_item = [m["on_item_units"] * m["write"] for m in (od, pr)]
    inside = [m["on_item_units_inside"] * m["write"] for m in (od, pr)]
    print(
        f"| a timer on the execution item (not built), the measured {od['item']:,} B item: "
        f"{od['on_item_units']} write units | {on_item[0]:.2f} | {on_item[1]:.2f} |"
    )
    print(
        f"| the same, an item that leaves room for the entry under 1 KB: {od['on_item_units_inside']} write units "
        f"| {inside[0]:.2f} | {inside[1]:.2f} |"
    )
    print()
    print(
        f"- the on-demand goal is 1.5 times the floor (${b['floor']:.3f}); the provisioned one is Express's price. "
        "A timer's budget is what is left after a plain transition and the mix's emits, divided by the timers' share."
    )
    print(
        f"- a timer on the execution item (assumed {b['entry_bytes']} B on the item: its entry in the timers map and "
        "the due index's key): the arm's and the Timeout's commits stay plain puts, the due index's entry is put and "
        "deleted, and there is no timer row, no claim and no doorbell; the due index must still be polled, which "
        "this row leaves out (a Query bills at least 0.5 read units, per shard and poll)."
    )
    print(
        f"- the measured item is {od['item']:,} B, {1024 - od['item']} B under 1 KB: "
        + (
            f"an entry of {b['entry_bytes']} B crosses it, so both commits bill 2 write units instead of 1."
            if od["on_item_units"] > od["on_item_units_inside"]
            else f"an entry of {b['entry_bytes']} B fits."
        )
    )
    for name, m in (("on-demand", od), ("provisioned", pr)):
        left = m["timer_budget"] - m["on_item_units_inside"] * m["write"]
        print(
            f"- {name}: "
            + (
                f"even inside 1 KB, a timer on the item is over the budget by ${-left:.2f} per million timers before "
                "any poll: the goal also needs a plain transition or an emit to cost less."
                if left < 0
                else f"inside 1 KB, a timer on the item leaves ${left:.2f} per million timers "
                f"(${left * a.timer_ratio:.3f} per million transitions) for polling the due index."
            )
        )


def capacity_modes(a) -> None:
    """(4) on-demand against provisioned capacity with auto scaling, for the cheapest
    layout, at three monthly volumes: provisioned bills a floor by the hour and each unit
    at a fraction of the request price, so it wins with volume."""
    volumes = (10e6, 100e6, 1e9)
    alone = Design("cheapest layout", "cheap")

    def total(mode: str, volume: float, e: float, t: float) -> float:
        x = argparse.Namespace(**vars(a))
        x.capacity_mode, x.transitions_per_month = mode, volume
        return per_transition(x, alone, e, t)["total"] * 1e6

    floor = fixed_monthly(argparse.Namespace(**{**vars(a), "capacity_mode": "provisioned"}), "cheap")[
        "provisioned minimum"
    ]
    print(
        f"(4) capacity modes, cheapest layout, $ per million transitions (provisioned: auto scaling at "
        f"{a.target_utilization:g}% utilization, {a.scaled_read_targets} read and {a.scaled_write_targets} write "
        f"targets of at least {a.min_units:g} units: ${floor:.2f} a month whatever the traffic)"
    )
    print()
    print("| mix | " + " | ".join(f"{v / 1e6:g} M a month: on-demand | provisioned" for v in volumes) + " |")
    print("|---|" + "---:|---:|" * len(volumes))
    for label, e, t in (("plain", 0.0, 0.0), (f"{a.emit_ratio:.0%} emits, {a.timer_ratio:.0%} near timers", a.emit_ratio, a.timer_ratio)):
        cells = [f"{total('on-demand', v, e, t):.2f} | {total('provisioned', v, e, t):.2f}" for v in volumes]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
