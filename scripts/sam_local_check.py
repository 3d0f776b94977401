"""What scripts/sam-local.sh reads and writes in moto besides `stm`: the event queue as
Lambda's SQS trigger would hand it to the Worker, a timer made due, an outbox row left
pending, and the checks of each function's response.

    python scripts/sam_local_check.py drain QUEUE_URL OUT.json   # prints how many
    python scripts/sam_local_check.py failures RESPONSE.json [MESSAGE_ID ...]
    python scripts/sam_local_check.py exe FIELD=VALUE ... < `stm show ID --json`
    python scripts/sam_local_check.py timer PREFIX EXECUTION PATH
    python scripts/sam_local_check.py timer-due PREFIX EXECUTION PATH FIRE_AT
    python scripts/sam_local_check.py outbox-put PREFIX TARGET EVENT_JSON
    python scripts/sam_local_check.py rows PREFIX
    python scripts/sam_local_check.py setup CHECKS.json        # FILE MACHINE ID, a line each
    python scripts/sam_local_check.py samples CHECKS.json EVENTS_DIR   # in order; all listed
    python scripts/sam_local_check.py ids CHECKS.json SAMPLE
    python scripts/sam_local_check.py sample-failures CHECKS.json SAMPLE RESPONSE.json
    python scripts/sam_local_check.py sample-exe CHECKS.json SAMPLE ID < `stm show ID --json`

CHECKS.json is a project's `events/sam-local/checks.json` (`stm init` writes one).

Each prints one line saying what it found; a check that does not hold exits 1 with the
reason. The endpoint is $STM_ENDPOINT_URL (moto on 127.0.0.1), the credentials dummies.
"""
import json
import os
import sys
import time
from decimal import Decimal

import boto3

ENDPOINT = os.environ["STM_ENDPOINT_URL"]
REGION = os.environ.get("AWS_REGION", "us-east-1")


def client(name):
    return boto3.client(name, endpoint_url=ENDPOINT, region_name=REGION)


def fail(text):
    print(f"check failed: {text}", file=sys.stderr)
    sys.exit(1)


def lambda_attribute(value):
    return {
        "stringValue": value.get("StringValue"),
        "stringListValues": [],
        "binaryListValues": [],
        "dataType": value["DataType"],
    }


def drain(queue_url, out):
    """Every visible message of the FIFO queue, received and deleted, as the SQS event
    Lambda's trigger would hand to the Worker (in queue order, at most 10: one batch)."""
    sqs = client("sqs")
    arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    records = []
    for _ in range(20):
        got = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
            VisibilityTimeout=60,
            WaitTimeSeconds=0,
        ).get("Messages", [])
        if not got:
            break
        for m in got:
            records.append(
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": m.get("Attributes", {}),
                    "messageAttributes": {
                        k: lambda_attribute(v) for k, v in m.get("MessageAttributes", {}).items()
                    },
                    "md5OfBody": m["MD5OfBody"],
                    "eventSource": "aws:sqs",
                    "eventSourceARN": arn,
                    "awsRegion": REGION,
                }
            )
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=m["ReceiptHandle"])
    if len(records) > 10:
        fail(f"{len(records)} messages on the queue: more than one batch of 10")
    with open(out, "w") as f:
        json.dump({"Records": records}, f, indent=2)
    for r in records:
        group = r["attributes"].get("MessageGroupId", "-")
        kind = r["messageAttributes"].get("stm_kind", {}).get("stringValue") or "event"
        print(f"[sam-local]   on the queue for {group} ({kind}): {r['body']}", file=sys.stderr)
    print(len(records))


def failures(response_file, expected):
    with open(response_file) as f:
        text = f.read()
    try:
        response = json.loads(text)
    except ValueError:
        fail(f"the response is not JSON: {text!r}")
    if not isinstance(response, dict) or "batchItemFailures" not in response:
        fail(f"the response has no batchItemFailures: {text!r}")
    got = sorted(f["itemIdentifier"] for f in response["batchItemFailures"])
    if got != sorted(expected):
        fail(f"batchItemFailures {got}, expected {sorted(expected)}")
    print(f"batchItemFailures {got}: as expected")


def exe(checks):
    """`stm show ID --json` on stdin: each FIELD=VALUE holds (VALUE `-` for null)."""
    data = json.load(sys.stdin)
    for check in checks:
        field, _, want = check.partition("=")
        value = data
        for part in field.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        shown = "-" if value is None else str(value)
        if shown != want:
            fail(f"execution {data.get('id')}: {field} is {shown}, expected {want}")
    print(f"execution {data.get('id')}: " + ", ".join(checks))


def timers(prefix):
    return boto3.resource("dynamodb", endpoint_url=ENDPOINT, region_name=REGION).Table(f"{prefix}_timers")


def timer(prefix, execution, path):
    item = timers(prefix).get_item(Key={"execution_id": execution, "path": path}, ConsistentRead=True).get("Item")
    print("none" if item is None else repr(float(item["fire_at"])))


def timer_due(prefix, execution, path, fire_at):
    """Move an armed timer's fire_at (the worker armed it an hour ahead) to FIRE_AT."""
    table = timers(prefix)
    key = {"execution_id": execution, "path": path}
    if table.get_item(Key=key, ConsistentRead=True).get("Item") is None:
        fail(f"no timer of {execution} at {path} to make due")
    table.update_item(
        Key=key, UpdateExpression="SET fire_at = :f", ExpressionAttributeValues={":f": Decimal(fire_at)}
    )
    print(f"timer of {execution} at {path} now due at {fire_at}")


def outbox_put(prefix, target, event):
    """An outbox row as a commit whose inline flush never ran leaves it (a crash between
    the two): its seq is the clock a minute ago, in milliseconds, shifted as the store's."""
    seq = (int(time.time() * 1000) - 60_000) << 20
    table = boto3.resource("dynamodb", endpoint_url=ENDPOINT, region_name=REGION).Table(f"{prefix}_outbox")
    table.put_item(Item={"seq": seq, "target_id": target, "event": event})
    print(f"outbox row {seq} for {target}: {event}")


def rows(prefix):
    db = client("dynamodb")
    n = {t: db.scan(TableName=f"{prefix}_{t}", ConsistentRead=True)["Count"] for t in ("outbox", "spawns")}
    print(f"{n['outbox']} {n['spawns']}")


def load_checks(path):
    with open(path) as f:
        return json.load(f)


def sample_entry(checks, sample):
    for entry in checks.get("samples", []):
        if entry.get("sample") == sample:
            return entry
    fail(f"{sample} has no checks in events/sam-local/checks.json: add what it must leave")


def setup(path):
    for entry in load_checks(path).get("setup", []):
        print(f"{entry['file']} {entry['machine']} {entry['id']}")


def samples(path, events_dir):
    listed = [entry["sample"] for entry in load_checks(path).get("samples", [])]
    present = sorted(n for n in os.listdir(events_dir) if n.endswith(".json"))
    for name in present:
        if name not in listed:
            fail(f"events/{name} has no checks in events/sam-local/checks.json: add what it must leave")
    for name in listed:
        if name not in present:
            fail(f"events/sam-local/checks.json lists {name}, which is not in events/")
        print(name)


def ids(path, sample):
    for execution in sample_entry(load_checks(path), sample).get("executions", {}):
        print(execution)


def sample_failures(path, sample, response_file):
    entry = sample_entry(load_checks(path), sample)
    if "batchItemFailures" in entry:
        failures(response_file, entry["batchItemFailures"])
    else:
        print("answered")


def sample_exe(path, sample, execution):
    fields = sample_entry(load_checks(path), sample).get("executions", {}).get(execution, {})
    exe([f"{field}={'-' if want is None else want}" for field, want in fields.items()])


def main(argv):
    if not argv:
        fail("no command (see the docstring)")
    cmd, args = argv[0], argv[1:]
    if cmd == "drain" and len(args) == 2:
        drain(*args)
    elif cmd == "failures" and args:
        failures(args[0], args[1:])
    elif cmd == "exe":
        exe(args)
    elif cmd == "timer" and len(args) == 3:
        timer(*args)
    elif cmd == "timer-due" and len(args) == 4:
        timer_due(*args)
    elif cmd == "outbox-put" and len(args) == 3:
        outbox_put(*args)
    elif cmd == "rows" and len(args) == 1:
        rows(*args)
    elif cmd == "setup" and len(args) == 1:
        setup(*args)
    elif cmd == "samples" and len(args) == 2:
        samples(*args)
    elif cmd == "ids" and len(args) == 2:
        ids(*args)
    elif cmd == "sample-failures" and len(args) == 3:
        sample_failures(*args)
    elif cmd == "sample-exe" and len(args) == 3:
        sample_exe(*args)
    else:
        fail(f"bad arguments: {argv}")


if __name__ == "__main__":
    main(sys.argv[1:])
