"""Test actions for the harel conformance suite.

Every action has harel's signature ``fn(stm, event, **inputs)``; the execution
context is ``stm.execution_ctx``. The Rust test registry implements the same names
with the same semantics — keep the two in sync (see README.md).
"""


def log(stm, event, label):
    """Append `label` to context["log"] (records entry/exit/activity order)."""
    ctx = stm.execution_ctx
    ctx.setdefault("log", []).append(label)


def seen(stm, event):
    """Append the triggering event's kind (None when there is no event) to context["seen"]."""
    ctx = stm.execution_ctx
    ctx.setdefault("seen", []).append(event.kind if event is not None else None)


def incr(stm, event, key="n", by=1):
    """context[key] += by (missing counts as 0)."""
    ctx = stm.execution_ctx
    ctx[key] = ctx.get(key, 0) + by


def put(stm, event, key, value):
    """context[key] = value."""
    ctx = stm.execution_ctx
    ctx[key] = value


def copy_event(stm, event, field, into=None):
    """context[into or field] = event.data.get(field) (None when there is no event)."""
    ctx = stm.execution_ctx
    ctx[into or field] = event.data.get(field) if event is not None else None


def fail(stm, event, message="boom"):
    """Always raises RuntimeError(message)."""
    raise RuntimeError(message)


def fail_when(stm, event, key, message="flag set"):
    """Raises ValueError(message) when context[key] is exactly True."""
    ctx = stm.execution_ctx
    if ctx.get(key) is True:
        raise ValueError(message)


def pick(stm, event, value):
    """Selector: returns the literal `value`."""
    return value


def pick_ctx(stm, event, key):
    """Selector: returns context[key] (None when absent)."""
    ctx = stm.execution_ctx
    return ctx.get(key)


def pick_event(stm, event, field):
    """Selector: returns event.data[field] (None when absent or there is no event)."""
    return event.data.get(field) if event is not None else None


def noop(stm, event):
    """Does nothing."""
    return None
