"""Shared subscriptions across the tree (docs/interest-routing-design.md section 8, protocol
7.9): a "$share/<group>/<filter>" group with members on several brokers gets each message once
network-wide, at a member on the message's own broker if there is one, else at the nearest
(ties to the lower broker identity); when the broker of the member that gets them is killed,
the others take over without loss and without a second copy among them.

Four real brokers in a star: 0 in the middle (the root, no member), 1, 2 and 3 each with one
member of $share/g/jobs/#. Broker 0's three links are all one hop from a member, so its
messages go to broker 1 (the lowest identity: ports are handed out in index order).
"""

import json
import os
import re
import subprocess
import threading
import time

import pytest

from helpers import ARBOR_BIN, HOST, wait_until
from peer_net import cluster, peer_support  # noqa: F401 (pytest fixtures)

pytestmark = pytest.mark.arbor_only

STAR = [(0, 1), (0, 2), (0, 3)]
# the Python clients read slower than the brokers send: nothing may be dropped at their queues
LINES = ["max_queued_messages 0"]
GROUP = "$share/g/jobs/#"


class Member:
    """A client on broker i in the group, recording the numbers it receives."""

    def __init__(self, c, i, topic=GROUP, qos=1):
        self.got = []
        self.lock = threading.Lock()
        self.client = c.client(i, sink=self._take)
        self.client.subscribe(topic, qos=qos)

    def _take(self, msg):
        with self.lock:
            self.got.append(int(msg.payload))

    def numbers(self):
        with self.lock:
            return list(self.got)


def tree_hops(edges, start):
    """{broker: hops from start along edges}."""
    hops, todo = {start: 0}, [start]
    while todo:
        a = todo.pop(0)
        for x, y in edges:
            for u, v in ((x, y), (y, x)):
                if u == a and v not in hops:
                    hops[v] = hops[a] + 1
                    todo.append(v)
    return hops


def wait_tables(c, tree=STAR, timeout=30.0):
    """Until every broker hears, on each of its links, the group at the distance the tree
    gives: a member's broker announces 0; another, one more than the nearest member its
    other forwarding links lead to."""
    def expected(i, j):  # what j tells i
        if j in (1, 2, 3):
            return "0 g/jobs/#"
        others = [e for e in tree if i not in e]
        hops = tree_hops(others, j)
        reached = [hops[m] for m in (1, 2, 3) if m in hops]
        return "%d g/jobs/#" % min(reached) if reached else None  # (nothing to tell)

    def ready():
        for i in range(4):
            values = c.stp(i, fresh=True)
            for a, b in c.edges:
                if i in (a, b):
                    j = b if i == a else a
                    told = values.get("peers/%s/shares" % c.brokers[j].identity) or None
                    if told != expected(i, j):
                        return False
        return True

    wait_until(ready, timeout=timeout, interval=0.2, what="the shared group's tables")


def wait_counter(c, i, name, value, timeout=10.0):
    wait_until(lambda: c.stp(i, fresh=True).get(name) == str(value), timeout=timeout,
               interval=0.2, what="broker %d's %s at %d" % (i, name, value))


def ranges(numbers):
    """[(first, last), ...] of sorted numbers, for messages."""
    out = []
    for n in sorted(numbers):
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return [tuple(r) for r in out]


def publish_numbered(pub, first, count, qos=1):
    infos = [pub.publish("jobs/n", str(n).encode(), qos=qos, wait=False)
             for n in range(first, first + count)]
    return infos


def wait_published(infos, timeout=120.0):
    deadline = time.monotonic() + timeout
    for info in infos:
        info.wait_for_publish(max(0.1, deadline - time.monotonic()))
        assert info.is_published(), "a QoS 1 publication was not acknowledged"


class PacedPublisher:
    """Publishes 0 .. total-1 on jobs/n at QoS 1 from a thread, pausing 50 ms after every 500
    so that a kill or a reset lands in mid-stream; finish() waits for every PUBACK."""

    def __init__(self, client, total):
        self.client = client
        self.total = total
        self.infos = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for n in range(self.total):
                self.infos.append(self.client.publish("jobs/n", str(n).encode(), qos=1,
                                                      wait=False))
                if n % 500 == 499:
                    time.sleep(0.05)
        finally:
            self.done.set()

    def finish(self):
        self.thread.join(timeout=120)
        assert self.done.is_set(), "the publisher did not finish"
        wait_published(self.infos)


def star_of_members(cluster):
    """The star, a member on brokers 1, 2 and 3, once every link tells the group."""
    c = cluster(4, STAR, extra_lines=LINES)
    c.wait_tree(timeout=30)
    members = {i: Member(c, i) for i in (1, 2, 3)}
    wait_tables(c)
    return c, members


def share_counters(c):
    return {i: {k: v for k, v in c.stp(i, fresh=True).items() if k.startswith("shares/")}
            for i in sorted(c.live())}


def wait_total(c, members, expected, timeout=60.0, numbers=None):
    """Until the members together have `expected` messages; failing, which of `numbers` (the
    ones published) none has."""
    def done():
        return sum(len(m.numbers()) for m in members) >= expected
    try:
        wait_until(done, timeout=timeout, interval=0.1,
                   what="%d deliveries to the group" % expected)
    except AssertionError as e:
        have = set(n for m in members for n in m.numbers())
        missing = [n for n in (numbers or range(expected)) if n not in have]
        raise AssertionError("%s: got %s, missing %s; %s" % (
            e, [len(m.numbers()) for m in members], ranges(missing)[:20],
            share_counters(c))) from None


MESH = [(0, 1), (0, 2), (0, 3), (1, 2), (2, 3), (1, 3)]


@pytest.mark.parametrize("routing,edges", [("interest", STAR), ("all", STAR),
                                           ("interest", MESH)], ids=["interest", "all", "mesh"])
def test_each_message_once_at_the_nearest_member(cluster, routing, edges):
    """In the mesh, the links between 1, 2 and 3 are blocked (0 is the root, one hop from
    each): they carry the tables too, and no message is given over them."""
    c = cluster(4, edges, extra_lines=LINES + ["peer_routing %s" % routing])
    snap = c.wait_tree(timeout=30)
    tree = snap.forwarding_edges()
    members = {i: Member(c, i) for i in (1, 2, 3)}
    plain = Member(c, 3, topic="jobs/#")  # an ordinary subscriber still gets every message
    wait_tables(c, tree)
    hops = tree_hops(tree, 0)
    nearest = min((1, 2, 3), key=lambda m: (hops[m], c.brokers[m].peer_port))

    # published on broker 0 (no member): all to broker 1's member, the nearest with the
    # lowest identity; published on broker 2: all to its own member
    far = publish_numbered(c.client(0), 0, 6000)
    near = publish_numbered(c.client(2), 100000, 4000)
    wait_published(far + near)
    wait_total(c, list(members.values()), 10000,
               numbers=list(range(0, 6000)) + list(range(100000, 104000)))
    try:
        wait_until(lambda: len(plain.numbers()) >= 10000, timeout=60, interval=0.1,
                   what="the ordinary subscriber's 10000 messages")
    except AssertionError as e:
        n = plain.numbers()
        raise AssertionError("%s: %d, %d far, %d near; %s" % (
            e, len(n), len([x for x in n if x < 100000]), len([x for x in n if x >= 100000]),
            c.stp(3, fresh=True))) from None
    time.sleep(0.5)  # (nothing more may come: a second copy would arrive now)

    got = {i: m.numbers() for i, m in members.items()}
    everything = sorted(got[1] + got[2] + got[3])
    assert everything == list(range(0, 6000)) + list(range(100000, 104000))
    assert sorted(n for n in got[2] if n >= 100000) == list(range(100000, 104000))
    assert sorted(plain.numbers()) == everything
    if edges == MESH:
        # the tree may move while the load runs (its costs are measured round trips): the
        # nearest member may change; still once in all. (Order is not checked here: a tree
        # change under a full-speed load can reorder an ordinary subscriber's messages too,
        # with or without groups; seen with ThreadSanitizer and 4 loops.)
        return
    plain_far = [n for n in plain.numbers() if n < 100000]
    assert plain_far == sorted(plain_far), "the ordinary subscriber's order"
    assert sorted(got[nearest]) == list(range(0, 6000)) + (
        list(range(100000, 104000)) if nearest == 2 else [])
    far = [n for n in got[nearest] if n < 100000]
    assert far == sorted(far), "the group's order"
    assert all(got[m] == [] for m in (1, 2, 3) if m not in (2, nearest))
    # ($SYS counters are published every second)
    wait_counter(c, 0, "shares/assigned", 6000)
    wait_counter(c, nearest, "shares/delivered", 6000 + (4000 if nearest == 2 else 0))
    if nearest != 2:
        wait_counter(c, 2, "shares/delivered", 4000)
    assert all(c.stp(i, fresh=True)["shares/unassigned"] == "0" for i in range(4))


def test_arbor_stp_show_lists_each_links_groups(cluster):
    build = os.environ.get("ARBOR_BUILD_DIR") or os.path.dirname(ARBOR_BIN)
    tool = os.path.join(build, "tools", "arbor_stp")
    if not os.access(tool, os.X_OK):
        pytest.skip("arbor_stp not built")
    c = cluster(4, STAR, extra_lines=LINES)
    c.wait_tree(timeout=30)
    members = [Member(c, i) for i in (1, 2)]
    Member(c, 1, topic="$share/other/a/+/b")
    assert members
    table = {j: ["0 g/jobs/#", "0 other/a/+/b"] if j == 1 else ["0 g/jobs/#"] for j in (1, 2)}
    table[3] = []

    def shown():
        r = subprocess.run([tool, "show", "--json", "-h", HOST, "-p", str(c.brokers[0].port)],
                           capture_output=True, text=True, timeout=30)
        peers = {p["id"]: p for p in json.loads(r.stdout)["peers"]}
        return {j: peers[c.brokers[j].identity].get("shares") or [] for j in (1, 2, 3)}

    seen = []
    try:
        wait_until(lambda: seen.append(shown()) or seen[-1] == table, timeout=20, interval=0.3,
                   what="arbor_stp show listing the groups")
    except AssertionError as e:
        raise AssertionError("%s: last %s" % (e, seen[-1:])) from None


def test_unsubscribed_member_is_no_longer_given_messages(cluster):
    c, members = star_of_members(cluster)
    members[1].client.unsubscribe(GROUP)

    def moved():
        shares = c.stp(0, fresh=True).get("peers/%s/shares" % c.brokers[1].identity)
        return shares in ("", None)  # (an empty $SYS value is no retained message)
    wait_until(moved, timeout=20, interval=0.2, what="broker 1 withdrawing the group")
    wait_published(publish_numbered(c.client(0), 0, 500))
    wait_total(c, [members[2], members[3]], 500)
    time.sleep(0.5)
    assert members[1].numbers() == []
    assert sorted(members[2].numbers()) == list(range(500))  # the next lowest identity
    assert members[3].numbers() == []


def test_killed_members_broker_hands_its_share_to_the_others(cluster):
    c, members = star_of_members(cluster)

    total = 10000
    publisher = PacedPublisher(c.client(0), total)
    try:
        wait_until(lambda: len(members[1].numbers()) >= 3000, timeout=60, interval=0.02,
                   what="broker 1's member receiving its first 3000")
        c.kill(1)
    finally:
        publisher.finish()

    survivors = members[2].numbers() + members[3].numbers()
    dead = set(members[1].numbers())

    def complete():
        have = dead | set(members[2].numbers()) | set(members[3].numbers())
        return len(have) == total
    try:
        wait_until(complete, timeout=60, interval=0.2,
                   what="every message at some member (broker 1 killed)")
    except AssertionError as e:
        have = dead | set(members[2].numbers()) | set(members[3].numbers())
        raise AssertionError("%s: missing %s; broker 1's member got %s; broker 0: %s" % (
            e, ranges(set(range(total)) - have), ranges(dead),
            {k: v for k, v in c.stp(0, fresh=True).items() if "shares" in k})) from None
    time.sleep(0.5)
    survivors = members[2].numbers() + members[3].numbers()
    assert len(survivors) == len(set(survivors)), "a message reached the survivors twice"
    have = dead | set(survivors)
    assert have == set(range(total))
    # a member of the killed broker may have had some of what was given again (its last
    # 2 s at most); never more than were given again
    overlap = dead & set(survivors)
    reassigned = int(c.stp(0, fresh=True)["shares/reassigned"])
    print("killed member had %d, survivors %d, given again %d, at both %d" % (
        len(dead), len(survivors), reassigned, len(overlap)))
    assert len(overlap) <= reassigned
    assert sorted(survivors)[-1] == total - 1


def test_a_group_no_member_can_reach_is_given_up_with_one_warning_a_second(cluster):
    """The only member's broker is killed: QoS 1 messages published then wait for the group
    (the downed link's table lingers, its neighbour is waited for), and when no way opens
    within 30 s they are given up: counted in shares/unassigned, and warned about in one line
    a second at most for all of them, not a line each."""
    c = cluster(2, [(0, 1)], extra_lines=LINES)
    c.wait_tree(timeout=30)
    Member(c, 1)
    member_id = c.brokers[1].identity
    wait_until(lambda: c.stp(0, fresh=True).get("peers/%s/shares" % member_id) == "0 g/jobs/#",
               timeout=30, interval=0.2, what="broker 0 hearing broker 1's group")
    c.kill(1)
    total = 40
    wait_published(publish_numbered(c.client(0), 0, total))
    # each waits 30 s for a way from when it was published (or from when the downed link's
    # neighbour is taken as gone, 10 s after the link went down, had it been given there)
    wait_counter(c, 0, "shares/unassigned", total, timeout=75)
    lines = [line for line in c.brokers[0].log_text().splitlines()
             if "no member could be reached" in line]
    counts = [int(m.group(1)) if m else 1
              for m in (re.search(r"for (\d+) shared-group deliveries", line) for line in lines)]
    assert sum(counts) == total, lines
    assert 1 <= len(lines) <= 5, lines
    assert "g/jobs/#" in lines[0] and "jobs/n" in lines[0], lines


def test_link_flaps_lose_nothing_and_copy_nothing(cluster):
    """The link to the member that gets broker 0's messages is reset three times under a
    QoS 1 stream, both brokers alive: what broker 1 had not acknowledged goes to it again
    when it is back (it takes each mark once), what was published meanwhile goes to another
    member; every message reaches exactly one member. (A 2 s window re-giving a failed link's
    messages, as first built, copied some to a second member, and lost what had waited in the
    link's queue longer.)"""
    c, members = star_of_members(cluster)

    total = 10000
    publisher = PacedPublisher(c.client(0), total)
    try:
        for flap in range(3):
            goal = 1000 * (flap + 1)
            wait_until(lambda: len(members[1].numbers()) >= goal, timeout=60, interval=0.02,
                       what="broker 1's member receiving %d" % goal)
            c.cut(0, 1)
            time.sleep(0.3)  # (the cut itself: the link is down at once)
            c.heal(0, 1)
    finally:
        publisher.finish()
    wait_total(c, list(members.values()), total)
    time.sleep(0.5)  # (nothing more may come: a second copy would arrive now)
    got = [n for m in members.values() for n in m.numbers()]
    counters = share_counters(c)
    print("per member %s; broker 0 %s" % ([len(m.numbers()) for m in members.values()],
                                         counters[0]))
    assert len(got) == len(set(got)), "a message reached two members (or one twice)"
    assert sorted(got) == list(range(total))
    assert all(v["shares/unassigned"] == "0" for v in counters.values())


def test_members_on_one_broker_still_take_turns(cluster):
    """With peers, a broker's own members of a group share its messages in turn as without."""
    c = cluster(4, STAR, extra_lines=LINES)
    c.wait_tree(timeout=30)
    a, b = Member(c, 2), Member(c, 2)
    wait_published(publish_numbered(c.client(2), 0, 200))
    wait_total(c, [a, b], 200)
    time.sleep(0.3)
    assert sorted(a.numbers() + b.numbers()) == list(range(200))
    assert len(a.numbers()) == len(b.numbers()) == 100
