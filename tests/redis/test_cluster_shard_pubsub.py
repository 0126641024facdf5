"""Sharded pub/sub in a cluster of three Strata masters, as Redis 7.0 runs it: SPUBLISH,
SSUBSCRIBE and SUNSUBSCRIBE are routed by their channel's hash slot (`-MOVED` from a node
that does not serve it, `-CROSSSLOT` for channels of two slots), a message published on
the owner reaches its subscribers, and when the slot moves to another master its
subscribers get a `sunsubscribe` message (Redis's `removeChannelsInSlot`) and the
channel is then served by the new owner.

    cargo build --release -p strata-cli
    python3 -m pytest -q tests/redis/test_cluster_shard_pubsub.py
"""

from cluster_nodes import (  # noqa: F401 (strata_nodes is a fixture)
    call, create, node_id, owner_of, strata_nodes, wait_check_clean)
from servers import Client, Error

CHANNEL = "news"


def test_shard_channels_follow_their_slot(strata_nodes):
    create(strata_nodes)
    port = strata_nodes[0].port
    slot = call(port, "CLUSTER", "KEYSLOT", CHANNEL)
    owner_id, owner = owner_of(port, slot)
    other = next(s for s in strata_nodes if s.port != owner)
    other_id = node_id(other)
    moved = Error(f"MOVED {slot} 127.0.0.1:{owner}".encode())
    assert call(other.port, "SPUBLISH", CHANNEL, "m") == moved
    assert call(other.port, "SSUBSCRIBE", CHANNEL) == moved
    assert call(other.port, "SUNSUBSCRIBE", CHANNEL) == moved
    crossslot = Error(b"CROSSSLOT Keys in request don't hash to the same slot")
    assert call(owner, "SSUBSCRIBE", CHANNEL, "other") == crossslot
    sub = Client(owner)
    try:
        assert sub.call("SSUBSCRIBE", CHANNEL) == [b"ssubscribe", CHANNEL.encode(), 1]
        assert call(owner, "SPUBLISH", CHANNEL, "hello") == 1
        assert sub.read() == [b"smessage", CHANNEL.encode(), b"hello"]
        # The slot moves to `other` (the SETSLOT steps of a reshard; the slot holds no
        # key): the owner's subscriber is told its subscription ended.
        for p, how in [(other.port, ["IMPORTING", owner_id]), (owner, ["MIGRATING", other_id]),
                       (other.port, ["NODE", other_id]), (owner, ["NODE", other_id])]:
            assert call(p, "CLUSTER", "SETSLOT", str(slot), *how) == ("+", "OK")
        assert sub.read() == [b"sunsubscribe", CHANNEL.encode(), 0]
        # Out of pub/sub mode: an ordinary command is answered.
        assert sub.call("PING") == ("+", "PONG")
    finally:
        sub.close()
    wait_check_clean(strata_nodes)
    assert call(owner, "SPUBLISH", CHANNEL, "m") == Error(
        f"MOVED {slot} 127.0.0.1:{other.port}".encode())
    sub = Client(other.port)
    try:
        assert sub.call("SSUBSCRIBE", CHANNEL) == [b"ssubscribe", CHANNEL.encode(), 1]
        assert call(other.port, "SPUBLISH", CHANNEL, "again") == 1
        assert sub.read() == [b"smessage", CHANNEL.encode(), b"again"]
    finally:
        sub.close()
