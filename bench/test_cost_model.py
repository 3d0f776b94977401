"""Checks of bench/cost_model.py: its inputs are the code's and the template's, and its counts
are right, by hand, for them.

    python3 bench/test_cost_model.py      # exits non-zero on the first failure

No pytest, no network: plain asserts, run in order (about a second; cfn-lint's decoder, in
the project's venv, is the slowest part). Three kinds of checks:

* inputs: what the model reads from template.yaml equals what an independent reader finds
  there (cfn-lint's decoder, and a plain text scan), and bench/cost_inputs.json's
  `function_metrics` equals the metrics the functions' code sends (its `code` section is
  measured on the store's items by `cargo test -p stm-store --test measures`);
* ties: a changed copy of the template or of the inputs changes the model's figures;
* counts: the units and dollars of the current inputs, counted by hand. Those checks say
  which input they were counted for, so a change to the code or the template fails here
  until they (and the cost tables in docs/performance.md, which quote the same figures) are recounted.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import cost_model as cm  # noqa: E402


def close(x: float, y: float, tol: float = 1e-9) -> bool:
    return abs(x - y) <= tol


def check(name: str, ok: bool, got=None) -> None:
    if not ok:
        print(f"FAIL {name}: got {got!r}")
        sys.exit(1)
    print(f"ok   {name}")


def run(argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cm.main(argv)
    return out.getvalue()


# ---------------------------------------------------------------- independent readers

def alarms_by_text(path: str) -> dict:
    """The template's alarms and the metric names each one reads, from the text alone: a
    resource is a line indented 2 under `Resources:`, its type the `Type:` line under it."""
    alarms, name, kind, metrics = {}, None, None, 0
    in_resources = False

    def flush():
        if name and kind == "AWS::CloudWatch::Alarm":
            alarms[name] = metrics

    with open(path, encoding="utf-8") as f:
        for line in f:
            if re.match(r"^\S", line):
                flush()
                name = None
                in_resources = line.startswith("Resources:")
                continue
            m = re.match(r"^  ([A-Za-z0-9]+):\s*$", line)
            if in_resources and m:
                flush()
                name, kind, metrics = m.group(1), None, 0
                continue
            m = re.match(r"^    Type:\s*(\S+)", line)
            if name and m:
                kind = m.group(1)
            if name and re.match(r"^\s+MetricName:", line):
                metrics += 1
    flush()
    return alarms


def cfn_lint_template(path: str):
    """The template as cfn-lint decodes it (None where cfn-lint is not installed)."""
    try:
        from cfnlint.decode.cfn_yaml import load
    except ImportError:
        return None
    return load(path)


def metric_names(node) -> int:
    """How many `MetricName`s are under `node`, at any depth."""
    if isinstance(node, dict):
        return ("MetricName" in node) + sum(metric_names(v) for v in node.values())
    if isinstance(node, list):
        return sum(metric_names(v) for v in node)
    return 0


def emf_metrics(source: str) -> set:
    """The metric names a function's code counts (`m.count(NAME, ..)`), outside its tests."""
    with open(os.path.join(REPO, source), encoding="utf-8") as f:
        code = f.read().split("#[cfg(test)]")[0]
    return set(re.findall(r"\.count\(\s*(\"[A-Za-z]+\"|[A-Z_]+)\s*,", code))


def set_default(text: str, parameter: str, value: str) -> str:
    """template.yaml's text with `parameter`'s Default set to `value`."""
    pattern = rf"(\n  {parameter}:\n(?:    .*\n)*?    Default: ).*\n"
    out, n = re.subn(pattern, lambda m: m.group(1) + value + "\n", text, count=1)
    assert n == 1, f"no Default of {parameter} in the template"
    return out


def changed_template(edit) -> str:
    """A copy of template.yaml with `edit(text)` applied; its path."""
    with open(cm.DEFAULT_TEMPLATE, encoding="utf-8") as f:
        text = edit(f.read())
    fd, path = tempfile.mkstemp(suffix=".yaml")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def main() -> None:
    a = cm.defaults()
    tpl = a.template_inputs
    with open(cm.DEFAULT_INPUTS, encoding="utf-8") as f:
        inputs = json.load(f)
    code = inputs["code"]

    # ------------------------------------------------------------ inputs: the template
    by_text = alarms_by_text(cm.DEFAULT_TEMPLATE)
    check(
        "the model's alarms are the template's AWS::CloudWatch::Alarm resources (text scan)",
        set(tpl["alarms"]) == set(by_text),
        (sorted(tpl["alarms"]), sorted(by_text)),
    )
    check(
        "each alarm's metrics as the model counts them = its MetricNames (text scan)",
        tpl["alarms"] == by_text,
        (tpl["alarms"], by_text),
    )
    decoded = cfn_lint_template(cm.DEFAULT_TEMPLATE)
    if decoded is None:
        print("--   cfn-lint not importable: the cross-check with its decoder needs .venv/bin/python")
    else:
        res = decoded["Resources"]
        lint_alarms = {n: metric_names(r["Properties"]) for n, r in res.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
        check("alarms and their metrics as cfn-lint decodes the template", tpl["alarms"] == lint_alarms, lint_alarms)
        params = decoded["Parameters"]
        worker = res["Worker"]["Properties"]
        (queue,) = [e["Properties"] for e in worker["Events"].values() if e["Type"] == "SQS"]
        lint = {
            "worker_memory_mb": int(params[worker["MemorySize"]["Ref"]]["Default"]),
            "worker_batch_size": int(params[queue["BatchSize"]["Ref"]]["Default"]),
            "relay_memory_mb": int(res["Relay"]["Properties"]["MemorySize"]),
            "sweeper_memory_mb": int(res["Sweeper"]["Properties"]["MemorySize"]),
            "processed_retention_days": float(params["ProcessedRetentionDays"]["Default"]),
            "dedupe_marks": params["DedupeMarks"]["Default"],
            "log_level": params["LogLevel"]["Default"],
        }
        ours = {k: tpl[k] for k in lint}
        check("memory, batch size, retention, DedupeMarks, LogLevel as cfn-lint decodes them", ours == lint, (ours, lint))
        arch = decoded["Globals"]["Function"]["Architectures"]
        check("the functions' architecture (Globals) as cfn-lint decodes it", tpl["architectures"]["Worker"] == [params[arch[0]["Ref"]]["Default"]], arch)
        lint_tables = [r["Properties"] for r in res.values() if r["Type"] == "AWS::DynamoDB::Table"]
        managed = sum(1 for p in lint_tables if p.get("SSESpecification", {}).get("SSEEnabled") is True and "KMSMasterKeyId" not in p["SSESpecification"])
        check("every table an AWS managed KMS key (SSEEnabled true, no key) as cfn-lint decodes them, as the model reads them",
              managed == len(lint_tables) == 7 and set(tpl["sse_tables"].values()) == {"aws-managed"} and len(tpl["sse_tables"]) == 7,
              (managed, tpl["sse_tables"]))
        pitr = sum(1 for p in lint_tables if p.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled") is True)
        check("point-in-time recovery on every table, as cfn-lint decodes them and the model reads them",
              pitr == 7 and len(tpl["pitr_tables"]) == 7, (pitr, tpl["pitr_tables"]))
        lint_queues = [r["Properties"] for r in res.values() if r["Type"] == "AWS::SQS::Queue"]
        # the three the model prices; the status events' example queue exists only with
        # StatusEvents (a condition) and holds one message per FAILED execution
        always = [r for r in res.values() if r["Type"] == "AWS::SQS::Queue" and "Condition" not in r]
        check("every queue SSE-SQS (SqsManagedSseEnabled, no KmsMasterKeyId): no KMS request",
              len(always) == 3 and all(q.get("SqsManagedSseEnabled") is True and "KmsMasterKeyId" not in q for q in lint_queues),
              lint_queues)
        tracing = decoded["Globals"]["Function"]["Tracing"]
        lint_xray = (params[tracing["Ref"]]["Default"], float(params["XRaySampleRatio"]["Default"]))
        check("X-Ray's mode (Globals' Tracing) and XRaySampleRatio as cfn-lint decodes them, as the model reads them",
              (tpl["xray_tracing"], tpl["xray_sample_ratio"]) == lint_xray, (tpl["xray_tracing"], tpl["xray_sample_ratio"], lint_xray))

    check("the flags' defaults are the template's", (a.memory_mb, a.batch_size, a.processed_ttl_days, a.trace)
          == (tpl["worker_memory_mb"], tpl["worker_batch_size"], tpl["processed_retention_days"], tpl["trace"]))
    check("one SQS event source per queue kind: the worker's FIFO, the doorbells' standard",
          sorted(tpl["sqs_sources"]) == [("Sweeper", "standard"), ("Worker", "fifo")], tpl["sqs_sources"])
    check("the doorbell batch assumed fits the doorbells' event source", a.doorbell_batch <= tpl["doorbell_batch_size"],
          (a.doorbell_batch, tpl["doorbell_batch_size"]))
    check("no log line per event (the model's default) holds at the template's LogLevel",
          a.log_bytes_per_event == 0 and tpl["log_level"] in ("error", "warn", "info"), tpl["log_level"])

    # ------------------------------------------------------------ inputs: the code
    check("the flags' defaults are cost_inputs.json's measured sizes",
          (a.item_bytes, a.dedupe_bytes, a.mark_bytes, a.outbox_bytes, a.timer_bytes, a.trace_bytes)
          == (code["execution_item_bytes"], code["dedupe_window_bytes"], code["processed_mark_bytes"],
              code["outbox_item_bytes"], code["timer_item_bytes"], code["trace_item_bytes"]))
    sources = {"worker": "shared/runtime/src/worker/outcome.rs", "relay": "shared/runtime/src/relay.rs", "sweeper": "shared/runtime/src/sweeper.rs"}
    sent = {fn: len(emf_metrics(path)) for fn, path in sources.items()}
    check("cost_inputs.json's function_metrics = the metrics each function's code counts", inputs["function_metrics"] == sent,
          (inputs["function_metrics"], sent))
    check("... for the template's functions", set(inputs["function_metrics"]) == {n.lower() for n in tpl["architectures"]})

    # ------------------------------------------------------------ ties: a changed template or input moves the figures
    base_fixed = cm.fixed_monthly(a, "cheap")
    extra_alarm = """
  PlantedAlarm:
    Type: AWS::CloudWatch::Alarm
    Properties:
      Namespace: AWS/Lambda
      MetricName: Duration
      Dimensions:
        - { Name: FunctionName, Value: !Ref Worker }
      Statistic: Maximum
      Period: 60
      EvaluationPeriods: 1
      Threshold: 1000
      ComparisonOperator: GreaterThanThreshold
"""
    path = changed_template(lambda t: t.replace("\nOutputs:", extra_alarm + "\nOutputs:"))
    try:
        more = cm.defaults(template=path)
        check("an alarm added to a copy of the template: one more alarm metric", more.alarm_metrics == a.alarm_metrics + 1,
              more.alarm_metrics)
        got = cm.fixed_monthly(more, "cheap")["metrics and alarms"] - base_fixed["metrics and alarms"]
        check("... billed at $0.10 a month", close(got, 0.10), got)
        printed = f"metrics and alarms ${base_fixed['metrics and alarms'] + 0.10:.2f}"
        check(f"... and the printed model says so ({printed})", printed in run(["--template", path]))
    finally:
        os.unlink(path)
    doubled = 2 * a.memory_mb
    path = changed_template(lambda t: set_default(set_default(t, "WorkerMemorySize", str(doubled)), "RelaySchedule", "rate(5 minutes)"))
    try:
        other = cm.defaults(template=path)
        check(f"WorkerMemorySize {doubled} and RelaySchedule rate(5 minutes) in a copy: read",
              (other.memory_mb, other.relay_period_min) == (doubled, 5), (other.memory_mb, other.relay_period_min))
        d = cm.Design("c", "cheap")
        lam = [cm.per_transition(x, d, 0, 0)["rows"]["Lambda (worker)"] for x in (a, other)]
        gbs = [(x.memory_mb / 1024) * (x.lambda_ms / 1000) * cm.PRICES["lambda_arm_per_gb_second"] for x in (a, other)]
        check("... the worker's GB-seconds double", close(lam[1] - lam[0], gbs[1] - gbs[0]) and close(gbs[1], 2 * gbs[0]), lam)
    finally:
        os.unlink(path)
    path = changed_template(lambda t: set_default(t, "Architecture", "x86_64"))
    try:
        try:
            cm.defaults(template=path)
            refused = False
        except SystemExit as e:
            refused = "arm64" in str(e)
        check("an x86_64 template is refused (the model has arm64's price only)", refused)
    finally:
        os.unlink(path)
    path = changed_template(lambda t: t.replace("SSESpecification: { SSEEnabled: true }", "SSESpecification: { SSEEnabled: false }"))
    try:
        owned = cm.defaults(template=path)
        check("SSEEnabled false in a copy (AWS owned keys): no KMS request",
              set(owned.template_inputs["sse_tables"].values()) == {"aws-owned"} and cm.fixed_monthly(owned, "cheap")["KMS (table keys)"] == 0.0)
    finally:
        os.unlink(path)
    path = changed_template(lambda t: t.replace("PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true }",
                                                "PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: false }"))
    try:
        off = cm.defaults(template=path)
        got = cm.per_transition(off, cm.Design("h", "harel"), 0.0, 0.0)["rows"]["point-in-time recovery"]
        check("point-in-time recovery off in a copy: not billed", off.pitr_tables == [] and got == 0.0, got)
    finally:
        os.unlink(path)
    path = changed_template(lambda t: t.replace("      SqsManagedSseEnabled: true\n      # 6 x the sweeper's timeout",
                                                "      KmsMasterKeyId: alias/aws/sqs\n      # 6 x the sweeper's timeout", 1))
    try:
        try:
            cm.defaults(template=path)
            refused = False
        except SystemExit as e:
            refused = "SSE-SQS" in str(e)
        check("a queue on SSE-KMS in a copy is refused (the model prices SSE-SQS only)", refused)
    finally:
        os.unlink(path)
    grown = copy.deepcopy(inputs)
    grown["code"]["execution_item_bytes"] = 1024 - code["dedupe_window_bytes"] + 1
    fd, path = tempfile.mkstemp(suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(grown, f)
    try:
        big = cm.defaults(inputs=path)
        got = cm.worker_units(big, "cheap", 1, 0.0, 0.0, False)
        check("an execution item grown in a copy of the inputs past 1 KB with its window: 2 WRU", got == (1, 2), got)
    finally:
        os.unlink(path)

    # ------------------------------------------------------------ counts, by hand, for these inputs
    # the unit rules
    check("1,024 B: 1 WRU, 2 transactional", cm.wru(1024) == 1 and cm.wru(1024, True) == 2)
    check("1,025 B: 2 WRU", cm.wru(1025) == 2)
    check("a strong read of 4 KB or of nothing: 1 RRU", cm.rru_strong(4096) == 1 and cm.rru_strong(0) == 1)

    # the sizes the counts below are for: every item under 1 KB, the cheapest layout's too
    exe, cheap = cm.exe_bytes(a, "harel"), cm.exe_bytes(a, "cheap")
    check(f"the execution item, {exe} B measured, + its window {a.dedupe_bytes} B = {cheap} B: under 1 KB",
          exe == code["execution_item_bytes"] and cheap == exe + code["dedupe_window_bytes"] and cheap <= 1024, cheap)
    small = (a.mark_bytes, a.outbox_bytes, a.timer_bytes, a.trace_bytes)
    check("marks, outbox, timer and trace items under 1 KB", max(small) <= 1024, small)

    # harel layout, plain transition: BatchGetItem of execution + mark (1 + 1 RRU), a
    # transaction of execution + mark (2 + 2 WRU)
    got = cm.worker_units(a, "harel", 1, 0.0, 0.0, False)
    check("harel plain: 2 RRU + 4 WRU", got == (2, 4), got)

    # cheapest layout, plain transition: one GetItem, one conditional PutItem
    got = cm.worker_units(a, "cheap", 1, 0.0, 0.0, False)
    check("cheapest plain: 1 RRU + 1 WRU", got == (1, 1), got)

    # coalescing: a burst of 10 shares one load and one commit
    rru, w = cm.worker_units(a, "cheap", 10, 0.0, 0.0, False)
    check("cheapest burst of 10: 0.1 RRU + 0.1 WRU per event", close(rru, 0.1) and close(w, 0.1), (rru, w))
    rru, w = cm.worker_units(a, "harel", 10, 0.0, 0.0, False)
    # BatchGetItem of 1 + 10 items; a transaction of 1 + 10 items
    check("harel burst of 10: 1.1 RRU + 2.2 WRU per event", close(rru, 1.1) and close(w, 2.2), (rru, w))

    # an emitting commit in the cheapest layout: execution (tx) 2 + outbox put (tx) 2 +
    # outbox delete after the flush 1 (no seq counter)
    _, w = cm.worker_units(a, "cheap", 1, 1.0, 0.0, False)
    check("cheapest emitting commit: 5 WRU", close(w, 5), w)
    _, w = cm.worker_units(a, "harel", 1, 1.0, 0.0, False)
    check("harel emitting commit: 7 WRU", close(w, 7), w)

    # timers in the cheapest layout, half the transitions arming one and half its Timeout:
    # the arming commit a transaction (execution 2 + timer put 2 + its GSI entry 1), the
    # Timeout's a plain put (1) after its claim (a consistent GetItem of the row the
    # sweeper deleted, 1 RRU: its commit cancels nothing, the row being gone); 6 WRU and,
    # beside the two loads, 1 RRU a pair
    rru, w = cm.worker_units(a, "cheap", 1, 0.0, 0.5, False)
    check("cheapest timer pair: arm 5 WRU + Timeout 1 WRU; 2 loads + the claim's read 1 RRU",
          close(w * 2, 6) and close(rru * 2, 3), (rru, w))
    # the harel layout: every commit a transaction with its mark (4); + the timer put and its
    # GSI entry; the claim's read beside the loads (an execution and a mark each)
    rru, w = cm.worker_units(a, "harel", 1, 0.0, 0.5, False)
    check("harel timer pair: 4 + 3 and 4 WRU; 2 + 2 + 1 RRU", close(w * 2, 11) and close(rru * 2, 5), (rru, w))

    # StateIndex=true: the state entry (79 B measured) on the item, and each move to another
    # state the index entry's delete and put. The cheapest layout's item, 1,012 B, passes
    # 1 KB with it: its put is 2 WRU; the harel layout's, 925 B, stays under
    indexed = cm.defaults(state_index=True)
    check("the state entry: 79 B (cost_inputs.json)", code["state_entry_bytes"] == 79, code["state_entry_bytes"])
    check("StateIndex off by default (template.yaml)", a.state_index is False, a.state_index)
    got = cm.worker_units(indexed, "cheap", 1, 0.0, 0.0, False)
    check("cheapest plain with the state index: 1 RRU + 2 + 2 WRU", got == (1, 4), got)
    got = cm.worker_units(indexed, "harel", 1, 0.0, 0.0, False)
    check("harel plain with the state index: 2 RRU + 4 + 2 WRU", got == (2, 6), got)

    # SQS FIFO for a plain transition: one send, (receive + delete) / 10
    check("the worker's batch: 10 (template.yaml WorkerBatchSize)", a.batch_size == 10, a.batch_size)
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
    # harel layout: each mark (+100 B of DynamoDB's overhead) for 30 + 2 days of a 30-day month
    harel = cm.per_transition(a, cm.Design("h", "harel"), 0.0, 0.0)["rows"]["storage"]
    want = (a.mark_bytes + 100) / 1e9 * (32 / 30) * 0.25
    check(f"harel stores each {a.mark_bytes} B mark 30 + 2 days (ProcessedRetentionDays 30)",
          a.processed_ttl_days == 30 and close(harel, want), harel)
    # point-in-time recovery: the same bytes at $0.20 per GB-month (every table has it)
    pitr = cm.per_transition(a, cm.Design("h", "harel"), 0.0, 0.0)["rows"]["point-in-time recovery"]
    check("harel: point-in-time recovery of the marks, $0.20 per GB-month of them", close(pitr, want / 0.25 * 0.20), pitr)
    check("cheapest layout: no marks, no point-in-time recovery", rows["point-in-time recovery"] == 0.0)
    traced = cm.defaults(trace=True)
    rows_t = cm.per_transition(traced, cm.Design("c", "cheap"), 0.0, 0.0)["rows"]
    want_t = (a.trace_bytes + 100) / 1e9 * (30 / 30)
    check("trace on: the trace rows stored 30 days, and their point-in-time recovery",
          close(rows_t["storage"], want_t * 0.25) and close(rows_t["point-in-time recovery"], want_t * 0.20), rows_t)

    # a doorbell: 1 timer GetItem + 1 execution load; guarded delete + its GSI delete
    one = cm.per_transition(a, cm.Design("c", "cheap"), 0.0, 1.0)["units"]
    check("doorbell: 2 RRU + 2 WRU", close(one["doorbell_rru"], 2) and close(one["doorbell_wru"], 2), one)

    # fixed: 5 FIFO + 2 standard idle pollers, 3 empty receives a minute, 30 days
    idle = cm.fixed_monthly(a, "cheap")["idle long polls"]
    check("idle long polls $0.43 a month", close(idle, 129600 * (5 * 0.5 + 2 * 0.4) / 1e6), idle)
    # the schedules: relay 2 consistent Scans, sweeper 64 half-unit Queries, every minute
    check("relay and sweeper every minute, 64 shards", (a.relay_period_min, a.sweeper_period_min, a.timer_shards) == (1, 1, 64))
    # every 10 minutes the claimed full scan (1 RRU for the empty table, 1 WRU for the
    # claim) replaces that sweep's 64 index queries, in every layout (the functions take
    # CreateOptions' default interval whatever STM_DEDUPE_MARKS says)
    ddb = cm.fixed_monthly(a, "cheap")["schedules: DynamoDB"]
    want = (43200 * 2 + (43200 - 4320) * 32 + 4320 * 1) * 0.125 / 1e6 + 4320 * 0.625 / 1e6
    check("schedules' DynamoDB, cheapest: 43,200 x 2 + 38,880 x 32 + 4,320 x 1 RRU + 4,320 WRU", close(ddb, want), ddb)
    check("... the harel layout's the same (the full scan runs in both)",
          close(cm.fixed_monthly(a, "harel")["schedules: DynamoDB"], ddb), cm.fixed_monthly(a, "harel"))
    with open(os.path.join(REPO, "shared/runtime/src/config/clients.rs"), encoding="utf-8") as f:
        clients = f.read()
    check("the functions' store takes CreateOptions' default full-scan interval, whatever the dedupe marks",
          ".with_timer_full_scan_interval(defaults.timer_full_scan_interval)" in clients)
    check("... which is 10 minutes (cost_inputs.json)", code["timer_full_scan_minutes"] == 10)
    bare = cm.defaults(no_due_index=True, pending_timers=200)
    got = cm.fixed_monthly(bare, "cheap")["schedules: DynamoDB"]
    want = (43200 * 2 + 43200 * cm.rru_strong(200 * a.timer_bytes)) * 0.125 / 1e6
    check("--no-due-index (harel's timers table): every sweep a full scan of 200 timers (5 RRU), no claim", close(got, want), got)

    # KMS: SSEEnabled true is an AWS managed key; each (function, table it reads or writes
    # items of) pair decrypts its table key every 5 idle minutes: worker 7 tables, relay 3
    # (outbox, spawns, and counters: a counted join's rows), sweeper 3 (timers, counters,
    # executions)
    check("the tables each role reads or writes items of (template.yaml)",
          tpl["item_tables"] == {"Worker": ["counters", "executions", "outbox", "processed", "spawns", "timers", "trace"],
                                 "Relay": ["counters", "outbox", "spawns"], "Sweeper": ["counters", "executions", "timers"]},
          tpl["item_tables"])
    kms = cm.fixed_monthly(a, "cheap")["KMS (table keys)"]
    check("KMS: 13 pairs x 8,640 five-minute periods x $0.03 per 10,000 = $0.34 a month",
          close(kms, 13 * 8640 * 0.03 / 1e4), kms)
    check("... twice with 2 warm instances of each function",
          close(cm.fixed_monthly(cm.defaults(kms_instances=2), "cheap")["KMS (table keys)"], 2 * kms))

    # metrics and alarms: the worker's EventsProcessed alone for a plain mix (zeros are not
    # sent), + the flush's RelayForwarded with emits and TimersFired with timers; the alarm
    # metrics: template.yaml's, counted by hand (DeadLetter 1, OldestMessage 1,
    # WorkerErrors 1, ScheduledErrors 2: relay and sweeper, Rollback 1, Throttles 3)
    hand = {"DeadLetterAlarm": 1, "OldestMessageAlarm": 1, "WorkerErrorsAlarm": 1, "ScheduledErrorsAlarm": 2,
            "RollbackAlarm": 1, "ThrottlesAlarm": 3}
    check("template.yaml's alarms as counted by hand: 6 alarms, 9 metrics", tpl["alarms"] == hand, tpl["alarms"])
    plain_m = cm.fixed_monthly(a, "cheap")["metrics and alarms"]
    check("metrics and alarms, plain mix: $0.30 + 9 x $0.10", close(plain_m, 0.30 + 0.90), plain_m)
    mixed_m = cm.fixed_monthly(a, "cheap", 0.1, 0.1)["metrics and alarms"]
    check("metrics and alarms, emits and timers: 3 metrics", close(mixed_m, 0.90 + 0.90), mixed_m)

    # the routes: one creating process reads them once a second (2,592,000 consistent
    # GetItems of 1 RRU in a 30-day month at $0.125 per million); with the rollback on, each
    # of the 43,200 one-minute sweeps reads them once more
    routes = cm.fixed_monthly(a, "cheap")["routes read"]
    check("routes read by 1 creating process: 2,592,000 x $0.125 / 1e6 = $0.324", close(routes, 2_592_000 * 0.125 / 1e6), routes)
    two = cm.fixed_monthly(cm.defaults(creating_processes=2, rollback=True), "cheap")["routes read"]
    check("... 2 processes and the rollback's sweeps: (5,184,000 + 43,200) x $0.125 / 1e6",
          close(two, (5_184_000 + 43_200) * 0.125 / 1e6), two)
    check("the functions' metrics: worker 6, relay 3, sweeper 4", inputs["function_metrics"] == {"worker": 6, "relay": 3, "sweeper": 4})

    # logs: no line per processed event at LogLevel=info, the invocation's lines over 10 records
    logs = plain["rows"]["CloudWatch Logs (worker)"]
    check("worker logs: 700 B per invocation of 10", close(logs, 70 / 1e9 * 0.50), logs)

    # Step Functions at the README's assumptions
    check("Express $1.10 at 100 ms, 64 MB", close(round(cm.express_per_million(a), 2), 1.10), cm.express_per_million(a))

    # the totals docs/performance.md quotes (its cost tables): recount them there when these move
    ds = cm.designs(a)
    totals = [round(cm.per_transition(a, d, 0.0, 0.0)["total"] * 1e6, 2) for d in ds]
    check("plain totals: 3.75 / 1.67 / 1.29 / 1.07 / 0.99 / 1.22 (docs/performance.md)", totals == [3.75, 1.67, 1.29, 1.07, 0.99, 1.22], totals)
    totals = [round(cm.per_transition(a, d, a.emit_ratio, a.timer_ratio)["total"] * 1e6, 2) for d in ds]
    check("10% emits, 10% timers: 4.62 / 2.66 / 2.27 / 2.01 / 1.90 / 2.30 (docs/performance.md)", totals == [4.62, 2.66, 2.27, 2.01, 1.9, 2.3], totals)

    # capacity modes: on-demand by default (the figures above); provisioned with auto scaling
    # on each table and index, read and write (template.yaml: 7 tables + the due and state
    # indexes)
    check("on-demand by default (template.yaml CapacityMode)", a.capacity_mode == "on-demand", a.capacity_mode)
    with open(cm.DEFAULT_TEMPLATE, encoding="utf-8") as f:
        text = f.read()
    read_targets = len(re.findall(r"ScalableDimension: dynamodb:(?:table|index):ReadCapacityUnits", text))
    write_targets = len(re.findall(r"ScalableDimension: dynamodb:(?:table|index):WriteCapacityUnits", text))
    check("9 read and 9 write scalable targets (text scan): 7 tables + the due and state indexes",
          (a.scaled_read_targets, a.scaled_write_targets) == (read_targets, write_targets) == (9, 9),
          (a.scaled_read_targets, a.scaled_write_targets, read_targets, write_targets))
    prov = cm.defaults(capacity_mode="provisioned")
    check("provisioned defaults: 70% utilization, 5 units at least", (prov.target_utilization, prov.min_units) == (70, 5))
    read_unit, write_unit = cm.unit_prices(prov)
    check("provisioned: a write unit-second at 70% costs $0.00065 / 3600 / 0.7",
          close(write_unit, 0.00065 / 3600 / 0.7) and close(read_unit, 0.00013 / 3600 / 0.7), (read_unit, write_unit))
    floor = cm.fixed_monthly(prov, "cheap")["provisioned minimum"]
    check("provisioned minimum: 5 units x 720 h x (9 x $0.00013 + 9 x $0.00065) = $25.27 a month",
          close(floor, 5 * 720 * 9 * (0.00013 + 0.00065)), floor)
    check("on-demand has no minimum", cm.fixed_monthly(a, "cheap")["provisioned minimum"] == 0.0)
    p_rows = cm.per_transition(prov, cm.Design("c", "cheap"), 0.0, 0.0)["rows"]
    check("provisioned plain writes: 1 WRU at $0.258 per million",
          close(p_rows["DynamoDB writes"] * 1e6, 0.00065 / 3600 / 0.7 * 1e6), p_rows["DynamoDB writes"])
    table = run([])
    check("the printed comparison (docs/performance.md): plain 1.67 | 3.73, 1.44 | 1.25, 1.42 | 1.01",
          "| plain | 1.67 | 3.73 | 1.44 | 1.25 | 1.42 | 1.01 |" in table, table[-600:])

    # ------------------------------------------------------------ X-Ray (section 5): priced on its own
    # inputs: XRayTracing (the Globals' Tracing) and XRaySampleRatio, by a plain text scan
    with open(cm.DEFAULT_TEMPLATE, encoding="utf-8") as f:
        text = f.read()

    def text_default(parameter: str):
        m = re.search(rf"\n  {parameter}:\n(?:    .*\n)*?    Default: (.*)\n", text)
        return m.group(1).strip() if m else None

    check("XRayTracing Active and XRaySampleRatio 0.05: template.yaml's defaults (text scan), the model's and the flags'",
          (tpl["xray_tracing"], tpl["xray_sample_ratio"], a.xray_tracing, a.xray_sample_ratio)
          == (text_default("XRayTracing"), float(text_default("XRaySampleRatio")), "Active", 0.05)
          and re.search(r"\nGlobals:\n  Function:\n(?:    .*\n)*?    Tracing: !Ref XRayTracing\n", text) is not None,
          (tpl["xray_tracing"], tpl["xray_sample_ratio"], a.xray_tracing, a.xray_sample_ratio))
    check("each function's STM_XRAY_SAMPLE_RATIO at the defaults (its !If on TracesToXRay): 0.05, the model's ratio",
          tpl["xray_env_ratio"] == {"Worker": 0.05, "Relay": 0.05, "Sweeper": 0.05} and cm.xray_ratio(a) == 0.05,
          tpl["xray_env_ratio"])
    check("X-Ray's prices: $5.00 per million traces recorded, $0.50 retrieved or scanned",
          (cm.PRICES["xray_traces_recorded_per_million"], cm.PRICES["xray_traces_retrieved_per_million"]) == (5.00, 0.50))

    # counts by hand, at the defaults: our traces, 0.05 of the transitions (each its own trace)
    for volume in (100e6, 1e9):
        x = cm.xray_monthly(a, volume, a.timer_ratio)
        check(f"our span traces at {volume / 1e6:g} M: 0.05 x the transitions, $0.25 per million transitions",
              close(x["traces"]["ours"], 0.05 * volume, 1e-3) and close(x["dollars"]["ours"] / (volume / 1e6), 0.25), x)
    # the reservoir: 1 trace a second for a 30-day month
    x = cm.xray_monthly(a, 1e9, 0.0)
    check("the reservoir: 1 a second for 30 days = 2,592,000 traces a month = $12.96 (no free tier)",
          x["traces"]["reservoir"] == 2_592_000 and close(x["dollars"]["reservoir"], 12.96), x)
    # Lambda's, single-event invocations (batches of 1), no timers: the worker's 1,000 M + the
    # schedules' 86,400 (relay and sweeper every minute), 5% of those beyond the reservoir
    single = cm.defaults(batch_size=1)
    x = cm.xray_monthly(single, 1e9, 0.0)
    invocations = 1e9 + 86_400
    check("single-event invocations at 1,000 M: 1,000,086,400 invocations, 5% of 997,494,400 beyond the reservoir",
          close(x["invocations"], invocations, 1e-3) and close(x["traces"]["lambda"], 0.05 * (invocations - 2_592_000), 1e-3), x)
    per_invocation = x["dollars"]["lambda"] / (invocations / 1e6)
    check("... about $0.25 per million invocations (5% x $5.00, less the reservoir's share)",
          close(per_invocation, 0.25, 0.001) and per_invocation < 0.25, per_invocation)
    # the reservoir takes no more than there are invocations: at no traffic, the schedules' 86,400
    x = cm.xray_monthly(a, 0.0, 0.0)
    check("no transitions: the schedules' 86,400 invocations all in the reservoir, none beyond it",
          x["traces"] == {"lambda": 0.0, "ours": 0.0, "reservoir": 86_400}, x)
    # the mix at 100 M (batches of 10, 10% near timers, one doorbell per sweeper invocation):
    # 10 M + 10 M + 86,400 invocations; (20,086,400 - 2,592,000) x 5% = 874,720 traces
    x = cm.xray_monthly(a, 100e6, a.timer_ratio)
    per_m = {k: d / 100 for k, d in x["dollars"].items()}
    check("the mix at 100 M: 874,720 Lambda traces ($0.0437), 5 M ours ($0.25), the reservoir ($0.1296) per million",
          close(x["traces"]["lambda"], 874_720, 1e-3) and close(per_m["lambda"], 874_720 * 5e-6 / 100)
          and close(per_m["reservoir"], 0.1296) and close(x["total"] / 100, 0.423336), per_m)

    # the flags override the template; PassThrough records nothing
    over = cm.parse(["--xray-sample-ratio", "0.2"])
    x = cm.xray_monthly(over, 100e6, 0.1)
    check("--xray-sample-ratio 0.2 over the template's 0.05: our traces $1.00 per million transitions",
          over.xray_sample_ratio == 0.2 and close(x["dollars"]["ours"] / 100, 1.00), x)
    passthrough = cm.parse(["--xray-tracing", "PassThrough"])
    x = cm.xray_monthly(passthrough, 100e6, 0.1)
    check("--xray-tracing PassThrough over the template's Active: $0 (no invocation trace, no reservoir, no span)",
          passthrough.xray_tracing == "PassThrough" and x["total"] == 0.0
          and x["traces"] == {"lambda": 0.0, "ours": 0.0, "reservoir": 0.0}, x)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            cm.parse(["--xray-sample-ratio", "1.5"])
        refused = False
    except SystemExit:
        refused = True
    check("--xray-sample-ratio 1.5 refused (XRaySampleRatio's MaxValue is 1)", refused)
    path = changed_template(lambda t: set_default(set_default(t, "XRayTracing", "PassThrough"), "XRaySampleRatio", "0.1"))
    try:
        off = cm.defaults(template=path)
        check("XRayTracing PassThrough and XRaySampleRatio 0.1 in a copy: read, the functions' ratio 0 (the !If), $0",
              (off.xray_tracing, off.xray_sample_ratio) == ("PassThrough", 0.1)
              and off.template_inputs["xray_env_ratio"] == {"Worker": 0.0, "Relay": 0.0, "Sweeper": 0.0}
              and cm.xray_monthly(off, 100e6, 0.1)["total"] == 0.0,
              (off.xray_tracing, off.xray_sample_ratio, off.template_inputs["xray_env_ratio"]))
        on = cm.parse(["--template", path, "--xray-tracing", "Active"])
        got = cm.xray_monthly(on, 100e6, 0.1)["dollars"]["ours"] / 100
        check("... --xray-tracing Active over the copy: its ratio 0.1, our traces $0.50 per million transitions", close(got, 0.50), got)
    finally:
        os.unlink(path)

    # printed: section 5 with the counts above; X-Ray in no total, the last line the same
    printed = run([])
    rows = [
        "beyond its reservoir (0.200 invocations a transition: worker 0.100, doorbells 0.100; + 86,400 scheduled a month) | 0.044 | 0.049 |",
        "each transition counted as its own trace (an upper bound) | 0.250 | 0.250 |",
        "2,592,000 a month, $12.96 spread over the volume | 0.130 | 0.013 |",
        "| **X-Ray, XRayTracing=Active** | **0.42** | **0.31** |",
        "| X-Ray, XRayTracing=PassThrough (no trace recorded) | 0.00 | 0.00 |",
    ]
    check("(5) X-Ray printed with the counts above: 0.044 | 0.049, 0.250 | 0.250, 0.130 | 0.013, 0.42 | 0.31; PassThrough 0.00",
          "(5) X-Ray, $ per million transitions (XRayTracing=Active, XRaySampleRatio 0.05: template.yaml's;" in printed
          and all(r in printed for r in rows), printed[printed.find("(5)"):])
    check("... and says it is in no total nor in the cost line (the cheapest layout runs PassThrough)",
          "in no total: X-Ray is an observability option priced on its own" in printed
          and "whose cheapest layout runs XRayTracing=PassThrough ($0)" in printed)
    lasts = {
        " ".join(argv): run(argv).rstrip().splitlines()[-1]
        for argv in ([], ["--xray-tracing", "PassThrough"], ["--xray-tracing", "Active", "--xray-sample-ratio", "1"])
    }
    check("the last line (the cost line) is the same whatever XRayTracing and XRaySampleRatio",
          len(set(lasts.values())) == 1 and printed.rstrip().splitlines()[-1] == cm.cost_line(passthrough) == cm.cost_line(a), lasts)
    rows_of = [cm.per_transition(x, cm.Design("c", "cheap"), 0.1, 0.1) for x in (a, cm.parse(["--xray-sample-ratio", "1"]), passthrough)]
    check("... and no per-transition row moves with them (X-Ray in no total)", rows_of[0] == rows_of[1] == rows_of[2], rows_of)

    # the output says plainly what $1.10 needs at the defaults
    text = run([])
    check("output names what $1.10 needs", "needs coalescing or producer batching" in text, text[-400:])
    check("the header gives the measured item", f"item {code['execution_item_bytes']} B" in text, text.splitlines()[0])
    last = text.rstrip().splitlines()[-1]
    check("the last line is the summary, its mix the capacity table's (2.38 on-demand at 100 M, 1.55 provisioned at 1,000 M)",
          re.fullmatch(r"cost: mix \$2\.38 on-demand at 100 M, \$1\.55 provisioned at 1,000 M; harel layout \d\.\d\d times the cheapest", last) is not None,
          last)
    check("the old flags still run",
          "**total**" in run(["--trace", "--emit-ratio", "0.5", "--burst", "2", "--item-bytes", "2048", "--lambda-ms", "12"]))
    # (6) the goals' budget for a timer: the marginal figures explain the mix, the 1 KB
    # boundary decides a timer on the item, and a negative budget is said as such
    b = cm.goal_budget(a)
    for mode, volume in (("on-demand", 100e6), ("provisioned", 1e9)):
        m = b[mode]
        mix = cm.mix_total(a, "cheap", mode, volume)
        explained = m["plain"] + a.emit_ratio * m["per_emit"] + a.timer_ratio * m["per_timer"]
        check(f"(6) {mode}: a plain transition + the emits' and timers' marginal costs come within $0.02 of the mix ({mix:.3f})",
              close(explained, mix, 0.02), explained)
        check(f"(6) {mode}: the goal = a plain transition + the emits + the timers' budget",
              close(m["plain"] + a.emit_ratio * m["per_emit"] + a.timer_ratio * m["timer_budget"], m["goal"], 1e-9), m)
    check("(6) the on-demand goal is 1.5 x the floor of a lone plain transition ($1.225): $1.84 (the cost line's goal)",
          close(b["floor"], 1.225, 1e-9) and f"{b['on-demand']['goal']:.2f}" == "1.84", b["floor"])
    check("(6) the provisioned goal is Express's price, $1.10", f"{b['provisioned']['goal']:.2f}" == "1.10", b["provisioned"]["goal"])
    exe = b["on-demand"]["item"]
    check("(6) a timer on the measured item crosses 1 KB (the item is 1,012 B): 4 write units; with room under 1 KB, 2",
          (exe, b["on-demand"]["on_item_units"], b["on-demand"]["on_item_units_inside"]) == (1012, 4, 2), b["on-demand"])
    small = cm.goal_budget(cm.parse(["--item-bytes", "800"]))
    check("(6) ... and a smaller item (800 B + the dedupe ids + a 40 B entry under 1 KB) bills 2",
          small["on-demand"]["on_item_units"] == 2, small["on-demand"])
    printed6 = text[text.find("(6)"):]
    check("(6) printed: the provisioned budget is negative, said as over the budget before any poll; on-demand leaves a poll budget",
          b["provisioned"]["timer_budget"] < 0 < b["on-demand"]["timer_budget"]
          and "- provisioned: even inside 1 KB, a timer on the item is over the budget by $" in printed6
          and "- on-demand: inside 1 KB, a timer on the item leaves $" in printed6
          and "crosses it, so both commits bill 2 write units instead of 1" in printed6, printed6)
    check("(6) comes before the cost line, which stays last", text.find("(6)") < text.rfind("cost: mix"), None)
    print("all checks passed")


if __name__ == "__main__":
    main()
