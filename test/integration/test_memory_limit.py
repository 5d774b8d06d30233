"""memory_limit, Mosquitto's hard limit on the broker's heap: a PUBLISH that would take the
heap over it is refused and its client disconnected ("Client X disconnected due to out of
memory.", as Mosquitto logs it; an MQTT 5 client gets DISCONNECT 0x97), smaller messages and
other clients go on, and $SYS/broker/heap/current shows the heap. Every test holds against
Debian's mosquitto 2.0.11 too."""

import pytest

import mqttproto as mp
from helpers import IS_MOSQUITTO, PahoClient, wait_until


def heap_current(b):
    c = PahoClient(b, "heap-reader")
    try:
        c.subscribe("$SYS/broker/heap/current")
        return int(c.get_message(timeout=15).payload)
    finally:
        c.disconnect()


def limit_above_idle_heap(broker, room):
    """A memory_limit `room` bytes above the heap of an idle broker (it differs between
    builds: the sanitizer build's allocator counts more), measured on one started for it."""
    probe = broker()
    idle = heap_current(probe)
    probe.stop()
    return idle + room


@pytest.mark.parametrize("version", [mp.MQTT311, mp.MQTT5])
def test_message_over_the_limit_disconnects_its_publisher(broker, raw, version):
    b = broker("memory_limit %d" % limit_above_idle_heap(broker, 400000))
    sub = PahoClient(b, "sub")
    sub.subscribe("m/#", qos=1)
    big = raw(b, version=version)
    big.connect("big-pub")
    big.publish("m/big", b"x" * 300000, qos=1, complete=False)
    pkts = big.wait_closed(timeout=10)
    if version == mp.MQTT5 and not IS_MOSQUITTO:   # Mosquitto closes without a DISCONNECT
        assert [mp.Disconnect(p).reason for p in pkts] == [0x97], pkts   # quota exceeded
    b.wait_log("Client big-pub disconnected due to out of memory.")
    # the broker goes on: a small message from another client is delivered
    small = raw(b, version=version)
    small.connect("small-pub")
    small.publish("m/small", b"y" * 1000, qos=1)
    m = sub.get_message(timeout=10)
    assert (m.topic, len(m.payload)) == ("m/small", 1000)
    sub.expect_no_message(timeout=0.5)        # the big one was never routed
    sub.disconnect()


def test_stored_messages_count_until_the_limit(broker, raw):
    # A persistent subscriber that is away: its queue holds every QoS 1 message. Once what
    # the broker holds reaches the limit, the publisher is disconnected; after the queue is
    # taken, publishing works again.
    limit = limit_above_idle_heap(broker, 4000000)
    b = broker("memory_limit %d" % limit, "max_queued_messages 1000")
    away = PahoClient(b, "away", clean=False)
    away.subscribe("q/#", qos=1)
    away.disconnect()
    pub = raw(b)
    pub.connect("filler")
    sent = 0
    try:
        while sent < 200:                      # 200 x 50 kB = 10 MB, far over the limit
            pub.publish("q/%d" % sent, b"z" * 50000, qos=1)
            sent += 1
    except (AssertionError, OSError, mp.ConnectionClosed, mp.PacketTimeout):
        pass
    assert 10 <= sent < 200, sent
    b.wait_log("Client filler disconnected due to out of memory.")
    back = PahoClient(b, "away", clean=False)
    got = back.get_messages(sent, timeout=15)
    assert sorted(int(m.topic.split("/")[1]) for m in got) == list(range(sent))
    back.disconnect()
    # the queue is freed: the heap goes below the limit again and publishing works
    again = PahoClient(b, "again")
    wait_until(lambda: heap_current(b) < limit - 200000, timeout=30,
               what="heap below the limit")
    again.publish("q/after", b"z" * 50000, qos=1)
    again.disconnect()


def test_no_limit_by_default(broker, raw):
    b = broker()
    sub = PahoClient(b, "sub")
    sub.subscribe("n/#", qos=1)
    pub = raw(b)
    pub.connect("pub")
    pub.publish("n/big", b"x" * 3000000, qos=1)
    assert len(sub.get_message(timeout=15).payload) == 3000000
    sub.disconnect()
