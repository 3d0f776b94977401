"""Golden Execution/Event JSON written by harel 0.9.0 (pydantic `model_dump_json`).

    "$STM_PYTHON" gen.py      # rewrites *.json beside this file

Each file is one record exactly as harel serializes it; `json_golden.rs` checks that we
read and write it back byte for byte, and that harel reads what we write.
"""
import datetime
from pathlib import Path

from harel.engine.execution import ChildState, Execution, Status
from harel.spec.states import Event

HERE = Path(__file__).parent
UTC = datetime.timezone.utc

records = {
    "event_minimal": Event(id="e1", kind="Go"),
    "event_full": Event(
        id="evt-42",
        kind="PaymentOk",
        created_time=datetime.datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC),
        received_time=datetime.datetime(2026, 11, 29, 10, 0, 1, 250000, tzinfo=UTC),
        data={"amount": 42.5, "currency": "EUR", "items": [1, 2, 3], "meta": {"vip": True, "note": None}},
    ),
    "event_unicode": Event(id="u", kind="Note", data={"text": "héllo — ✓ 日本", "quote": "\"q\" \\ /"}),
    "execution_new": Execution(id="exe", definition_id="Order"),
    "execution_running": Execution(
        id="order-1",
        definition_id="Order",
        status=Status.RUNNING,
        active_path="Payment.Backoff",
        history={"": "Payment", "Payment": "Payment.Backoff"},
        context={"amount": 42.5, "attempts": 2, "retry_in": 10, "tags": ["a", "b"], "nested": {"x": [1.5, {"y": None}]}},
        processed_events=7,
        version=8,
        priority=2,
        invoke_seq={"Payment": 1},
        created_at=1764410400.123456,
        updated_at=1764410460.5,
        expires_at=1764496860.5,
    ),
    "execution_parent": Execution(
        id="checkout-9",
        definition_id="Checkout",
        status=Status.RUNNING,
        active_path="Fulfil",
        history={"": "Fulfil"},
        context={"region_results": {"Fulfil.Payment": {"outcome": "success", "receipt": "r1"}}},
        children={
            "checkout-9:Fulfil.Payment:0": ChildState(root_path="Fulfil.Payment", finished=True, outcome="success", result={"receipt": "r1"}, key="Fulfil.Payment"),
            "checkout-9:Fulfil.Stock:0": ChildState(root_path="Fulfil.Stock", key="Fulfil.Stock"),
            "checkout-9:Ship:0": ChildState(root_path="", submachine=True),
        },
        deferred=[Event(id="d1", kind="Webhook", data={"ref": "pi_1"}, created_time=datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))],
        processed_events=3,
        version=4,
        created_at=1000.0,
        updated_at=1000.0,
    ),
    "execution_child": Execution(
        id="checkout-9:Fulfil.Payment:0",
        definition_id="Checkout",
        root_path="Fulfil.Payment",
        status=Status.DONE,
        outcome="success",
        active_path="Fulfil.Payment.Paid",
        parent_id="checkout-9",
        child_id="checkout-9:Fulfil.Payment:0",
        version=3,
        created_at=1000.0,
        updated_at=1001.0,
        finished_at=1001.0,
    ),
    "execution_failed": Execution(
        id="f",
        definition_id="Charge",
        definition_fqn="Billing#Charge",
        status=Status.FAILED,
        error="RuntimeError: gateway down (while recovering from ValueError: bad card)",
        active_path="Charging",
        context={"_error": {"type": "ValueError", "message": "bad card"}, "big": 12345678901234567, "neg": -0.001, "exp": 1e-07, "huge": 1e+300},
        version=2,
    ),
}
for status in Status:
    records[f"execution_status_{status.value.lower()}"] = Execution(id="s", definition_id="M", status=status)

for name, record in records.items():
    (HERE / f"{name}.json").write_text(record.model_dump_json() + "\n")
print(f"wrote {len(records)} files")
