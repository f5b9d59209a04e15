"""client.events(): the organization's life-cycle events in order, each stop with its reason,
filtered by type, resumed after a given event, and followed across a dropped connection without
losing or repeating an event."""

import pytest

from sandfort_sdk import InvalidArgumentError, LifecycleEvent


def until(stream, sandbox_id, type_):
    """Events of the stream up to the first `type_` of `sandbox_id`."""
    got = []
    for e in stream:
        assert isinstance(e, LifecycleEvent)
        got.append(e)
        if e.type == type_ and e.target == sandbox_id:
            return got
    raise AssertionError("the stream ended")


def test_a_sandboxs_life_in_order_with_the_stops_reason(client):
    with client.events() as stream:
        sbx = client.create_sandbox()
        sbx.stop()
        sbx.delete()
        events = until(stream, sbx.id, "sandbox.deleted")
    mine = [e for e in events if e.target == sbx.id]
    assert [e.type for e in mine] == ["sandbox.created", "sandbox.started", "sandbox.stopped", "sandbox.deleted"]
    assert mine[2].reason == "request" and mine[0].reason is None
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert stream.last_id == mine[-1].seq

    # After a given event: exactly the later ones. Filtered: only those types.
    with client.events(after=mine[1].seq) as later:
        assert [e.seq for e in until(later, sbx.id, "sandbox.deleted")] == [e.seq for e in events if e.seq > mine[1].seq]
    with client.events(after=mine[0].seq - 1, types=["sandbox.stopped", "sandbox.deleted"]) as only:
        assert [(e.type, e.reason) for e in until(only, sbx.id, "sandbox.deleted")
                if e.target == sbx.id] == [("sandbox.stopped", "request"), ("sandbox.deleted", None)]


def test_a_dropped_connection_is_resumed_without_a_gap_or_a_repeat(client):
    first = client.create_sandbox()
    stream = client.events(types=["sandbox.created", "sandbox.deleted"])
    try:
        before = until(stream, first.id, "sandbox.created")
        stream._drop()  # the connection breaks as a network failure would
        first.delete()
        second = client.create_sandbox()
        second.delete()
        after = until(stream, second.id, "sandbox.deleted")
    finally:
        stream.close()
    assert stream.reconnects >= 1
    mine = [(e.type, e.target) for e in after if e.target in (first.id, second.id)]
    assert mine == [("sandbox.deleted", first.id), ("sandbox.created", second.id), ("sandbox.deleted", second.id)]
    assert after[0].seq > before[-1].seq


def test_a_bad_type_is_raised_not_retried(client):
    with pytest.raises(InvalidArgumentError):
        next(client.events(types=["sandbox.exploded"]))
