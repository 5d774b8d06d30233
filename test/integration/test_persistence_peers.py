"""Persistence with MQTT-ST peers: a restarted broker restores its retained messages with the
origin stamps they had, so that the spanning tree still tells which of two retained values is
newer (arbor.conf(5) PERSISTENCE)."""

import uuid

import pytest

from helpers import wait_until
from peer_net import retained_messages
from peer_net import cluster, peer_support  # noqa: F401 (pytest fixtures)

pytestmark = pytest.mark.arbor_only


@pytest.mark.parametrize("how", ["term", "durable-kill"])
def test_restored_retained_value_keeps_its_stamp_and_wins_when_newer(cluster, how):
    lines = ["persistence true", "persistence_file b{index}.db"]
    if how == "durable-kill":
        lines.append("persistence_mode durable")
    c = cluster(2, [(0, 1)], [200, 100], delays={(0, 1): 2}, extra_lines=lines)
    c.wait_tree(timeout=15)
    topic = "persist-%s/r" % uuid.uuid4().hex[:8]
    c.client(0, version=5).publish(topic, b"old", qos=1, retain=True)
    wait_until(lambda: retained_messages(c.brokers[1], topic, quiet=0.05) == {topic: b"old"},
               timeout=5, what="the old value on b1")
    c.cut(0, 1, "reset")
    c.wait_tree(timeout=10)
    c.client(1, version=5).publish(topic, b"new", qos=1, retain=True)  # b0 cannot hear it
    if how == "term":
        c.restart(1)
    else:
        c.kill(1)
        c.restart(1)
    assert retained_messages(c.brokers[1], topic, quiet=0.05) == {topic: b"new"}
    c.heal(0, 1)
    c.wait_tree(timeout=15)
    held = {}

    def converged():
        for i in range(2):
            held[i] = retained_messages(c.brokers[i], topic, quiet=0.05)
        return all(h == {topic: b"new"} for h in held.values())
    try:
        wait_until(converged, timeout=10, what="the newer value on both brokers")
    except AssertionError:
        raise AssertionError("retained values after healing: %r" % held)
