"""The owner's wire: which request lines can carry a lone surrogate (the others skip the walk of every argument)."""

from __future__ import annotations

import json

import pytest

from mnemo.core.text import lone_surrogate
from mnemo.daemon.server import may_hold_surrogate

LINES = [
    b'{"id": 1, "method": "recall", "params": {"query": "x \\udcff"}}',  # an escape
    b'{"id": 1, "method": "recall", "params": {"query": "x \\uD800"}}',
    b'{"id": 1, "method": "recall", "params": {"query": "x \xed\xb3\xbf"}}',  # surrogate bytes (surrogatepass)
    '{"id": 1, "method": "recall", "params": {"query": "x"}}'.encode("utf-16"),
    '{"id": 1, "method": "recall", "params": {"query": "café ☃ 😀"}}'.encode(),
    b'{"id": 1, "method": "recall", "params": {"query": "caf\\u00e9 \\ud83d\\ude00"}}',  # escaped, paired
    b'{"id": 1, "method": "recall", "params": {"ctx": {"root": "/tmp/x"}, "query": "retries", "limit": 5}}',
]


@pytest.mark.parametrize("line", LINES)
def test_a_line_skipped_holds_no_lone_surrogate(line):
    """Every line JSON decodes to a lone surrogate is flagged; a plain line is not."""
    found = lone_surrogate(json.loads(line))
    assert may_hold_surrogate(line) or found is None
    if found is not None:
        assert may_hold_surrogate(line)
    assert not may_hold_surrogate(LINES[-1]) and not may_hold_surrogate(LINES[4])


def test_call_arguments_agree_with_inspects_binding(monkeypatch):
    """`call_arguments` binds the common call without `inspect` (both ends of the socket, every request): for any
    mix of positional and named arguments, known and unknown, on every method, the result or the error is the one
    `inspect.Signature.bind` gives."""
    import random

    import mnemo.api as api
    from mnemo.core.errors import InvalidInput

    def outcome(method, args, kwargs, wire):
        try:
            return "ok", list(api.call_arguments(method, args, dict(kwargs), wire=wire).items())
        except InvalidInput as exc:
            return "error", exc.message

    rng = random.Random(0)
    calls = []
    for method in sorted(api.SERVICE_METHODS):
        names = list(api.signature(method).parameters)
        for _ in range(60):
            chosen = rng.sample(names + ["bogus", "progress"], rng.randint(0, len(names) + 2))
            npos = rng.randint(0, 3)
            calls.append((method, tuple(f"v{i}" for i in range(npos)), {c: c for c in chosen}, rng.random() < 0.5))
    fast = [outcome(*c) for c in calls]
    monkeypatch.setattr(api, "_plan", lambda method, wire: ((), frozenset(), frozenset(), (), False))  # bind all
    assert [outcome(*c) for c in calls] == fast
    assert sum(kind == "ok" for kind, _ in fast) > 200  # the fast path was taken, not only errors
