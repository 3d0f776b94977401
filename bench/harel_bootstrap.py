"""The Python equivalent of our worker's cold start, for `lambda-smoke --python`.

A custom-runtime bootstrap that does what a harel 0.9.0 worker does before its first event:
import harel and boto3, load and validate every machine in the definitions directory
(`harel.worker.load_definitions`), build the DynamoDB store (`create_schema` off, as a
function's would be) and the SQS transport, then poll the Lambda Runtime API. Each
invocation is answered with an empty batch response: only the init is compared.

Environment: the same as our functions' (STM_ENDPOINT_URL, STM_TABLE_PREFIX,
STM_QUEUE_URL, STM_DEFINITIONS_DIR, AWS_REGION) plus AWS_LAMBDA_RUNTIME_API.
"""

import json
import os
import urllib.request

from harel.worker import load_definitions  # imports harel's engine, DSL and stores
from harel.engine.store import DynamoDBStore
from harel.engine.transport import SqsTransport

endpoint = os.environ["STM_ENDPOINT_URL"]
region = os.environ.get("AWS_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")

definitions = load_definitions(os.environ["STM_DEFINITIONS_DIR"])
store = DynamoDBStore.create(
    endpoint, region, prefix=os.environ.get("STM_TABLE_PREFIX", "harel"), create_schema=False
)
# harel's transport ensures its queue (CreateQueue with its own attributes): give it its
# own name so that call does not clash with the attributes of ours
queue_name = os.environ["STM_QUEUE_URL"].rstrip("/").rsplit("/", 1)[-1].removesuffix(".fifo")
transport = SqsTransport.create(endpoint, queue_name + "-harel", region)

api = f"http://{os.environ['AWS_LAMBDA_RUNTIME_API']}/2018-06-01/runtime/invocation"
while True:
    with urllib.request.urlopen(f"{api}/next") as got:
        request_id = got.headers["Lambda-Runtime-Aws-Request-Id"]
        got.read()
    answer = json.dumps({"batchItemFailures": []}).encode()
    urllib.request.urlopen(
        urllib.request.Request(f"{api}/{request_id}/response", data=answer, method="POST")
    ).read()
