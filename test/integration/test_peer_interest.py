"""Interest routing, step 2 (docs/interest-routing-design.md): what each broker tells each
neighbour its side of the tree wants, as the neighbour reports it in
$SYS/broker/stp/peers/<id>/interest/{wanted,filters,announced} (what `arbor_stp show` lists).

On a line of three real brokers 0 - 1 - 2 (fast timers, peer_net.Cluster):
- a subscription on broker 2 reaches broker 1 and, through it, broker 0; a filter covered by
  a wider one is not announced; a shared subscription announces its inner filter; $SYS
  filters are never announced; nothing is echoed back to the side it came from;
- an unsubscribe withdraws it along the same path; a persistent session's filters stay
  announced while it is offline;
- `peer_routing all` makes a broker want everything, and the broker next to it passes that
  on; past `peer_interest_max_filters` an announcement widens by levels.

What the announcements make forwarding do is test_peer_routing.py's.
"""

import signal

import pytest

from helpers import wait_until
from peer_net import line
from peer_net import cluster, peer_support  # noqa: F401 (pytest fixtures)

pytestmark = pytest.mark.arbor_only


def wanted(c, i, j):
    """What broker i reports that broker j wants: (summary text, [filters])."""
    values = c.stp(i, fresh=True)
    prefix = "peers/%s/interest/" % c.brokers[j].identity
    filters = values.get(prefix + "filters", "")
    return values.get(prefix + "wanted"), sorted(filters.split("\n")) if filters else []


def wait_wanted(c, i, j, summary, filters=None, timeout=20.0):
    seen = []

    def check():
        seen[:] = [wanted(c, i, j)]
        got_summary, got_filters = seen[0]
        return got_summary == summary and (filters is None or got_filters == sorted(filters))

    try:
        wait_until(check, timeout=timeout, interval=0.2,
                   what="broker %d seeing broker %d want %s %s" % (i, j, summary, filters))
    except AssertionError as e:
        raise AssertionError("%s; last seen %r" % (e, seen)) from None


def test_subscriptions_are_announced_along_the_tree_and_withdrawn(cluster):
    c = cluster(3, line(3))
    c.wait_tree(timeout=30)
    # nobody subscribes anywhere: every neighbour wants nothing
    wait_wanted(c, 1, 2, "0", [])
    wait_wanted(c, 0, 1, "0", [])

    sub = c.client(2)
    sub.subscribe("site/+/temp", qos=1)
    sub.subscribe("site/a/temp", qos=1)          # covered by site/+/temp: not announced
    sub.subscribe("$share/workers/jobs/#", qos=1)  # its inner filter
    sub.subscribe("$SYS/broker/uptime", qos=0)    # never leaves the broker
    wait_wanted(c, 1, 2, "2", ["jobs/#", "site/+/temp"])
    wait_wanted(c, 0, 1, "2", ["jobs/#", "site/+/temp"])  # through broker 1

    other = c.client(0)
    other.subscribe("alerts/#", qos=0)
    wait_wanted(c, 1, 0, "1", ["alerts/#"])
    wait_wanted(c, 2, 1, "1", ["alerts/#"])
    # broker 1 tells broker 0 only what is behind it, not what broker 0 said
    wait_wanted(c, 0, 1, "2", ["jobs/#", "site/+/temp"])
    told = c.stp(1, fresh=True)["peers/%s/interest/announced" % c.brokers[0].identity]
    assert told == "2"

    sub.unsubscribe("site/+/temp")               # site/a/temp is uncovered now
    wait_wanted(c, 0, 1, "2", ["jobs/#", "site/a/temp"])
    sub.unsubscribe("site/a/temp")
    sub.unsubscribe("$share/workers/jobs/#")
    wait_wanted(c, 0, 1, "0", [])
    wait_wanted(c, 2, 1, "1", ["alerts/#"])

    # forwarding does not depend on interest yet: a topic nobody subscribed to still arrives
    # where someone subscribes to everything
    listener = c.client(2)
    listener.subscribe("#", qos=1)
    wait_wanted(c, 0, 1, "1", ["#"])
    c.client(0).publish("nobody/else", b"x", qos=1)
    assert listener.get_message(timeout=10).topic == "nobody/else"


def test_offline_persistent_sessions_stay_announced(cluster):
    c = cluster(3, line(3))
    c.wait_tree(timeout=30)
    durable = c.client(2, client_id="durable-sub", clean=False)
    durable.subscribe("orders/#", qos=1)
    wait_wanted(c, 0, 1, "1", ["orders/#"])
    durable.disconnect()
    durable.close()
    transient = c.client(2)
    transient.subscribe("news", qos=0)
    wait_wanted(c, 0, 1, "2", ["news", "orders/#"])
    transient.close()  # a clean session's filters leave with it
    wait_wanted(c, 0, 1, "1", ["orders/#"])


def test_routing_all_wants_everything_and_the_bound_widens(cluster):
    c = cluster(3, line(3), broker_lines={0: ["peer_routing all"],
                                          2: ["peer_interest_max_filters 3"]})
    c.wait_tree(timeout=30)
    # broker 0 runs `all`: it wants everything, and so does broker 1's side as broker 2 sees it
    wait_wanted(c, 1, 0, "everything", [])
    wait_wanted(c, 2, 1, "everything", [])
    sub = c.client(2)
    for k in range(5):
        sub.subscribe("plant/line%d/temp" % k, qos=0)
    sub.subscribe("office/door", qos=0)
    # six filters, at most three: cut to one level each
    wait_wanted(c, 1, 2, "2", ["office/#", "plant/#"])
    for k in range(5):
        sub.subscribe("plant%d/x/y" % k, qos=0)
    wait_wanted(c, 1, 2, "everything", [])  # seven first levels do not fit in three


def test_announcements_and_messages_fit_the_neighbours_maximum_packet_size(cluster):
    """Broker 1 takes packets of at most 600 bytes from clients (`max_packet_size`), and
    tells its neighbours 600 + 1024 (room for what a message gains on a link). Broker 0's
    announcement to it widens until it fits, and a message too large for it is not sent to
    it (its number is told skipped): either would otherwise close the link (0x95) at every
    reconnect."""
    c = cluster(2, line(2), broker_lines={1: ["max_packet_size 600"]})
    c.wait_tree(timeout=30)
    wait_wanted(c, 1, 0, "0", [])
    sub = c.client(0)
    for k in range(40):  # 40 x (52 + 3) bytes: more than fits in 1624 - 39
        sub.subscribe("factory/hall-%02d/machine-with-a-long-name/temperature" % k, qos=0)
    # cut to the deepest level that fits: 40 x (17 + 3) bytes (three levels: 40 x 45)
    wait_wanted(c, 1, 0, "40", ["factory/hall-%02d/#" % k for k in range(40)])

    listener = c.client(1)
    listener.subscribe("factory/#", qos=1)
    wait_wanted(c, 0, 1, "1", ["factory/#"])
    publisher = c.client(0)
    publisher.publish("factory/hall-01/big", b"x" * 2000, qos=1).wait_for_publish(timeout=10)
    publisher.publish("factory/hall-01/small", b"y", qos=1)
    message = listener.get_message(timeout=10)
    assert (message.topic, message.payload) == ("factory/hall-01/small", b"y")
    c.brokers[0].wait_log("message(s) larger than")
    # its number is told skipped (broker 1 wants the topic: nothing else was skipped), so
    # broker 1 keeps no gap
    wait_until(lambda: int(c.stp(0, fresh=True).get("messages/skip_notices", "0")) >= 1,
               timeout=10, interval=0.2, what="broker 0 telling the big message skipped")
    # the link never closed: each broker connected to the other once
    for b in c.brokers:
        text = b.log_text()
        assert "too large" not in text
        assert text.count("MQTT-ST: connected to") == 1, text[-3000:]


def test_a_message_at_the_client_limit_crosses_links_of_the_same_limit(cluster):
    """Every broker runs `max_packet_size 600`: a 560-byte PUBLISH a client may send gains
    its origin on the link (about 100 bytes) and still reaches the other broker."""
    c = cluster(2, line(2), broker_lines={0: ["max_packet_size 600"],
                                          1: ["max_packet_size 600"]})
    c.wait_tree(timeout=30)
    listener = c.client(1)
    listener.subscribe("t", qos=1)
    wait_wanted(c, 0, 1, "1", ["t"])
    payload = b"p" * 550
    c.client(0).publish("t", payload, qos=1).wait_for_publish(timeout=10)
    message = listener.get_message(timeout=10)
    assert message.payload == payload
    assert "larger than" not in c.brokers[0].log_text()


def test_a_reload_announces_a_changed_peer_routing_at_once(cluster):
    c = cluster(2, line(2))
    c.wait_tree(timeout=30)
    c.client(0).subscribe("orders/#", qos=1)
    wait_wanted(c, 1, 0, "1", ["orders/#"])
    c.broker_lines[0] = ["peer_routing all"]
    c._write_config(0)
    c.brokers[0].proc.send_signal(signal.SIGHUP)
    # no subscription changes: the reload alone re-announces
    wait_wanted(c, 1, 0, "everything", [])


def test_a_neighbour_announcing_too_much_is_sent_everything_until_it_shrinks(cluster):
    """Broker 1 keeps at most 4 x 2 of a neighbour's filters (`peer_interest_max_filters 2`).
    Broker 0 (bound 10,000) announces 10: broker 1 takes it as wanting everything, then counts
    its updates, and once they are back within 8 asks for a full announcement again."""
    c = cluster(2, line(2), broker_lines={1: ["peer_interest_max_filters 2"]})
    c.wait_tree(timeout=30)
    sub = c.client(0)
    for k in range(10):
        sub.subscribe("room/%d" % k, qos=0)
    wait_wanted(c, 1, 0, "everything", [])
    c.brokers[1].wait_log("announced more interest than this broker keeps")
    for k in range(5):
        sub.unsubscribe("room/%d" % k)
    wait_wanted(c, 1, 0, "5", ["room/%d" % k for k in range(5, 10)])
    c.brokers[1].wait_log("announces little enough again")
