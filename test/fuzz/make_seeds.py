#!/usr/bin/env python3
"""Writes the hand-made seed inputs of fuzz_peer (corpus_peer/) and fuzz_stp (corpus_stp/).

Each seed is a short script in the input format of its target (the header comments of
fuzz_peer.c and fuzz_stp.c, and README.md); the helpers below spell the steps by name. The
regression inputs (what the fuzzers found, named regress-*) are checked in as they were found
and are not written here. Run from anywhere: python3 test/fuzz/make_seeds.py
"""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# ---------------------------------------------------------------- fuzz_peer

(RAW_IN, RAW_OUT, RAW_LOCAL, BPDU, PINGRESP, PUBLISH, PUBREL, ACK_OUT, OPEN_IN, AUTH_IN,
 AUTH_OUT, CONNACK_OUT, CLOSE, ADVANCE, LOCAL_PUBLISH, LOCAL_SUB, BEHAVE, RELOAD,
 INTEREST, SKIP) = range(20)
FULL, UPDATE, REQUEST = 0, 1, 2  # interest announcement kinds
EVERYTHING = 0x10                # its flag, in the kind byte's bits 4-5
REMOVE = 0x80                    # an entry's bit 7

SECRET, SYS, DEBUG, LOCAL_REPAIR, LINE0, LINE1, OTHER_SECRET = 1, 2, 4, 8, 16, 32, 64
COOP0, COOP1 = 1, 2


def header(cfg, behave, self_cap=10, cap0=5, cap1=20):
    """Config flags, behaviour (bit 0/1: neighbour 0/1 cooperative; bits 2-5: reach),
    capabilities in thousands."""
    return bytes([cfg, behave, self_cap, cap0, cap1])


def op(kind, k=0, variant=0):
    return bytes([kind | k << 5 | variant << 6])


def advance_to_deadline():
    return op(ADVANCE, 0, 0) + b"\0"


def advance_ms(ms):
    return op(ADVANCE, 0, 1) + bytes([ms])


def advance_s(s):
    return op(ADVANCE, 0, 2) + bytes([s])


def advance_min(m):
    return op(ADVANCE, 0, 3) + bytes([m])


def publish(k, qos=2, retain=False, topic=0, size=8, who=0, when=0, extra=0, seq=0, pid=1,
            origin_qos=None, sync=False, variant=0, marks=0):
    """PUBLISH from neighbour k with an origin property (who: 0 itself, 1 the other
    neighbour, 2 this broker, 3 a remote broker; seq 0: a fresh sequence number); marks 1:
    mqtt-st-share g/a, 2: g/a and g/# (with the dup flag)."""
    origin_qos = qos if origin_qos is None else origin_qos
    flags = qos | (4 if retain else 0) | (0x10 if sync else 0) | origin_qos << 5 | \
        (0x80 if marks else 0) | (8 if marks == 2 else 0)
    return op(PUBLISH, k, variant) + bytes([flags, topic, size, who, when, extra]) + \
        struct.pack(">H", seq) + bytes([pid])


def bpdu(k, flags=0x20, age=0, epoch=0, root=0, root_cap=5, cost=0, sender=0, sender_cap=5,
         corrupt=0, variant=0):
    """PINGREQ with a BPDU from neighbour k (variant 1: the cooperative one, fields unused;
    2: epoch as a large absolute value; 3: cost unreachable)."""
    return op(BPDU, k, variant) + bytes([flags, age, epoch, root, root_cap]) + \
        struct.pack(">H", cost) + bytes([sender, sender_cap, corrupt])


def local_publish(qos=1, retain=False, topic=0, size=8, pid=1):
    return op(LOCAL_PUBLISH) + bytes([qos | (4 if retain else 0), topic, size, pid])


def local_sub(which=0, unsubscribe=False):
    return op(LOCAL_SUB, 0, 3 if unsubscribe else 0) + bytes([which])


def interest(k, kind, entries=(), generation=1, variant=0):
    """An interest announcement from neighbour k: entries pick filters of step_interest's table
    (| REMOVE to remove); variant 1: the generation as given, 2: kind and flags unchecked, 3: a
    byte flipped."""
    return op(INTEREST, k, variant) + bytes([kind]) + struct.pack(">H", generation) + \
        bytes([len(entries)]) + bytes(entries)


def skip(k, who=0, lo=1, span=0, variant=0):
    """A skip notice from neighbour k for the run add_origin names by `who`: span % 16 + 1
    numbers from lo (span bit 7: one more, 100 above); variant 1: two runs, 2: the QoS 0
    stream's incarnation, 3: a byte flipped."""
    return op(SKIP, k, variant) + bytes([who, span]) + struct.pack(">H", lo)


def raw(kind, k, data):
    return op(kind, k) + bytes([len(data)]) + data


def mqtt(ptype, flags, body):
    n, out = len(body), bytearray([ptype << 4 | flags])
    while True:
        b = n % 128
        n //= 128
        out.append(b | (0x80 if n else 0))
        if not n:
            break
    return bytes(out) + body


def peer_seeds():
    both = SECRET | LINE0 | LINE1
    idle = [advance_to_deadline(), advance_ms(200), advance_to_deadline(), advance_s(2),
            advance_to_deadline()]
    seeds = {}
    seeds["links-up"] = header(both, COOP0 | COOP1) + b"".join(idle)
    seeds["links-up-unauthenticated"] = header(LINE0 | LINE1, COOP0 | COOP1) + b"".join(idle)
    seeds["connect-back"] = header(SECRET | LINE0, COOP0 | COOP1) + b"".join(idle * 2)
    seeds["sys-and-debug"] = header(both | SYS | DEBUG, COOP0 | COOP1) + \
        advance_s(1) + advance_s(1) + local_sub(3) + advance_s(1)
    seeds["messages"] = header(both, COOP0 | COOP1) + local_sub(0) + \
        publish(0, qos=2) + publish(0, qos=1, topic=1) + publish(1, qos=0, topic=4) + \
        publish(0, qos=2, seq=7) + publish(1, qos=2, seq=7, who=1) + \
        op(PUBREL, 0, 0) + b"\0\0" + local_publish(qos=1, topic=2) + \
        local_publish(qos=2, topic=4, pid=2) + advance_ms(10) + advance_to_deadline()
    seeds["retained"] = header(both, COOP0 | COOP1) + \
        publish(0, retain=True, topic=2, size=5) + publish(1, retain=True, topic=3, sync=True) + \
        local_publish(qos=1, retain=True, topic=2, size=3) + \
        publish(0, retain=True, topic=2, size=0, when=5) + local_sub(2) + \
        op(CLOSE, 1, 0) + b"\0" + advance_s(1) + advance_to_deadline() + advance_min(61)
    seeds["retained-clear-offers"] = header(both, COOP0 | COOP1) + \
        publish(0, retain=True, topic=3, size=0, sync=True, when=3) + \
        publish(1, retain=True, topic=3, size=0, sync=True, when=4) + \
        publish(0, retain=True, topic=3, size=0, sync=True, when=5) + advance_min(61)
    seeds["manual-handshake"] = header(both, 0) + advance_ms(1) + \
        op(OPEN_IN, 0) + b"\0" + op(AUTH_IN, 0) + b"\0" + advance_ms(1) + \
        op(AUTH_OUT, 0) + b"\0" + op(CONNACK_OUT, 0) + b"\0" + \
        bpdu(0, variant=1) + op(PINGRESP, 0) + bpdu(0, flags=0x90, epoch=3, root=0) + \
        publish(0) + op(ACK_OUT, 0, 0) + b"\0\0" + op(ACK_OUT, 0, 1) + b"\0\0"
    seeds["bad-handshakes"] = header(both, 0) + b"".join(
        op(OPEN_IN, k) + bytes([how]) for k in (0, 1) for how in range(1, 8)) + \
        op(OPEN_IN, 0) + b"\0" + op(AUTH_IN, 0) + b"\1" + \
        advance_ms(5) + op(AUTH_OUT, 1) + b"\1" + op(CONNACK_OUT, 1) + b"\3" + \
        op(AUTH_OUT, 0) + b"\2" + op(CONNACK_OUT, 0) + b"\4"
    seeds["bpdus"] = header(both, COOP0 | COOP1) + \
        bpdu(0, flags=0x90, epoch=1, root=3, root_cap=200, cost=900, age=2) + \
        bpdu(1, flags=0x60, epoch=0xff, root=0, root_cap=20) + \
        bpdu(0, flags=0x20, root=2, root_cap=10, cost=50, age=1) + \
        bpdu(1, variant=2, epoch=0x80) + bpdu(0, corrupt=0x05) + \
        bpdu(1, variant=3, root=4, age=3) + advance_s(8) + advance_to_deadline()
    seeds["flaps-and-replay"] = header(both, COOP0 | COOP1, 30) + \
        publish(0, qos=1) + publish(0, qos=2, topic=1) + local_publish(qos=2) + \
        op(CLOSE, 0, 0) + b"\0" + advance_ms(50) + op(CLOSE, 1, 0) + b"\3" + \
        op(BEHAVE, 0) + b"\3" + advance_s(1) + op(BEHAVE, 0) + b"\1" + advance_s(3) + \
        advance_to_deadline() + advance_s(8)
    seeds["reload"] = header(both, COOP0 | COOP1) + op(RELOAD) + bytes([LINE0]) + \
        advance_s(1) + op(RELOAD) + bytes([SECRET | OTHER_SECRET | LINE1]) + advance_s(1) + \
        advance_to_deadline()
    seeds["raw"] = header(both, COOP0 | COOP1) + \
        raw(RAW_IN, 0, mqtt(12, 0, b"")) + raw(RAW_IN, 1, mqtt(6, 2, b"\x00\x05")) + \
        raw(RAW_OUT, 0, mqtt(13, 0, b"")) + raw(RAW_OUT, 1, mqtt(5, 0, b"\x00\x01")) + \
        raw(RAW_LOCAL, 0, mqtt(1, 0, b"\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x01x")) + \
        raw(RAW_IN, 0, b"\x30\xff\xff\xff\xff") + raw(RAW_LOCAL, 0, b"GET / HTTP/1.1\r\n")
    # neighbour 1 stops acknowledging: 200 messages from neighbour 0 fill its link's window
    # (16 in this target) and queue (128: the rest is dropped), the queue holds the clients
    # (100 or more queued); then it catches up
    seeds["burst-backlog"] = header(both, COOP0 | COOP1) + op(BEHAVE, 1) + b"\0" + \
        local_sub(0) + publish(0, qos=2, extra=199, variant=3) + local_publish(qos=1) + \
        op(BEHAVE, 1) + b"\1" + advance_ms(5) * 16 + advance_to_deadline()
    seeds["expiry-and-sweeps"] = header(both | SYS, COOP0 | COOP1) + \
        publish(0, qos=2, extra=0x21) + publish(1, qos=1, who=3) + \
        publish(0, retain=True, topic=2, size=0) + advance_min(11) + advance_min(61) + \
        advance_to_deadline()
    # interest routing: the broker announces its client's filters to both neighbours; neighbour
    # 0 announces, updates, skips a generation (a request goes back), asks for a full one, says
    # everything, and sends one malformed (the connection closes)
    seeds["interest"] = header(both, COOP0 | COOP1) + advance_s(1) + local_sub(1) + \
        local_sub(2) + local_sub(3) + advance_s(1) + \
        interest(0, FULL, [0, 1, 3], generation=1) + interest(0, UPDATE, [2, 1 | REMOVE]) + \
        interest(0, UPDATE, [5], generation=9, variant=1) + interest(0, UPDATE, [6]) + \
        interest(0, FULL, [7, 8], generation=20) + interest(1, REQUEST, generation=0,
                                                           variant=1) + \
        interest(1, FULL | EVERYTHING) + local_sub(1, unsubscribe=True) + advance_s(1) + \
        interest(0, UPDATE, [9], variant=3) + advance_s(1) + advance_to_deadline()
    # a neighbour that takes packets of at most 96 bytes (CONNACK variant 0x80; 0x40: it reads
    # interest): announcements widen to fit, larger messages are not sent to it
    seeds["interest-small-packets"] = header(both, COOP1) + advance_ms(1) + \
        op(OPEN_IN, 0) + b"\0" + op(AUTH_IN, 0) + b"\0" + advance_ms(1) + \
        op(AUTH_OUT, 0) + b"\0" + op(CONNACK_OUT, 0) + bytes([0x80 | 0x40]) + \
        b"".join(local_sub(i) for i in (1, 2, 4, 5, 6, 7)) + advance_s(1) + \
        local_publish(qos=1, topic=0, size=64) + publish(1, qos=2, size=64) + \
        advance_s(1) + advance_to_deadline()
    # skip notices (7.8): neighbour 0 wants only a/#, so the local client's QoS 1 messages on
    # other topics are told skipped; neighbour 0 tells skips of a run, then sends a real copy
    # of a skipped number (taken once), the same again (a duplicate), a QoS 0 stream's skip,
    # two runs at once and a malformed notice (the connection closes)
    seeds["skips"] = header(both, COOP0 | COOP1) + advance_s(1) + \
        interest(0, FULL, [0], generation=1) + advance_s(1) + \
        local_publish(qos=1, topic=1) + local_publish(qos=1, topic=2, pid=2) + advance_ms(150) + \
        publish(0, qos=1, who=3, seq=1) + skip(0, who=3, lo=2, span=3) + \
        publish(0, qos=1, who=3, seq=3) + publish(0, qos=1, who=3, seq=3, pid=2) + \
        publish(0, qos=1, who=3, seq=6, pid=3) + skip(0, who=3, lo=7, span=0x85, variant=2) + \
        skip(1, who=3, lo=9, span=2, variant=1) + advance_ms(150) + \
        skip(0, who=3, lo=20, span=1, variant=3) + advance_s(1) + advance_to_deadline()
    # shared groups across the tree (7.9): a member of $share/g/a here; neighbour 0 tells a
    # table, marks messages for the group (taken once: the same number again is a second copy
    # whose group was taken), neighbour 1 marks one too; the local client's own messages go
    # to it here; a link closes (failover), a malformed table closes the connection
    table = b"\x01\x00\x00\x03g/a\x02\x00\x03g/b"
    shares_publish = mqtt(3, 0, struct.pack(">H", 20) + b"$MQTT-ST/link/shares\x00" + table)
    bad_publish = mqtt(3, 0, struct.pack(">H", 20) + b"$MQTT-ST/link/shares\x00\x01\x41\x00")
    seeds["shares"] = header(both, COOP0 | COOP1) + advance_s(1) + local_sub(4) + \
        advance_s(1) + raw(RAW_IN, 0, shares_publish) + raw(RAW_IN, 1, shares_publish) + \
        advance_s(1) + publish(0, qos=1, marks=1, who=3, seq=1) + \
        publish(0, qos=1, marks=2, who=3, seq=1, pid=2) + publish(1, qos=2, marks=1, who=3,
                                                                  seq=2) + \
        publish(1, qos=0, marks=1) + local_publish(qos=1) + local_publish(qos=2, pid=2) + \
        op(CLOSE, 0, 0) + b"\0" + advance_s(1) + advance_to_deadline() + \
        raw(RAW_IN, 1, bad_publish) + advance_s(3) + advance_to_deadline() + advance_s(40)
    return seeds


# ---------------------------------------------------------------- fuzz_stp

(S_LINK_UP, S_LINK_DOWN, S_BPDU_RAW, S_BPDU, S_REPLY, S_RTT, S_ADVANCE, S_TICK, S_CAPABILITY,
 S_BAD_CALLS) = range(10)


def stp_header(ident=1, cap=100, hello=0, age=0, hops=0, flags=0, percent=0, confirm=0):
    """ident: 10.0.0.<ident> (bit 7: fd00::<ident>); capability in hundreds; hello in 20 ms
    units and max_age as that many hellos (0: defaults)."""
    return bytes([ident]) + struct.pack(">H", cap) + bytes([hello, age, hops, flags, percent,
                                                            confirm])


def s_op(kind, link=1, variant=False):
    return bytes([kind | (link - 1) << 4 | (0x80 if variant else 0)])


def link_up(link, rtt=300):
    return s_op(S_LINK_UP, link) + struct.pack(">H", rtt)


def rtt(link, sample):
    return s_op(S_RTT, link) + struct.pack(">H", sample)


def reply(link, flags=0):
    return s_op(S_REPLY, link) + bytes([flags])


def advance(ms, tick=True):
    return s_op(S_ADVANCE, 2 if tick else 1) + struct.pack(">H", ms)


def to_deadline():
    return s_op(S_ADVANCE, 2, True) + b"\0\0"


def s_bpdu(link, flags=0x20, age=1, epoch=0, root=3, sender=0, corrupt=0, root_cap=500,
           cost=400, sender_cap=0, variant=False):
    return s_op(S_BPDU, link, variant) + bytes([flags, age, epoch, root, sender, corrupt]) + \
        struct.pack(">HH", root_cap, cost) + bytes([sender_cap])


def stp_seeds():
    seeds = {}
    three = link_up(1) + link_up(2, 500) + link_up(3, 900)
    converge = b"".join(reply(l) for l in (1, 2, 3)) + rtt(1, 300) + rtt(2, 520) + \
        b"".join(reply(l) for l in (1, 2, 3))
    seeds["converge"] = stp_header(cap=1) + three + converge + to_deadline() + converge
    seeds["root-elsewhere"] = stp_header(cap=1) + three + \
        s_bpdu(2, root=3, root_cap=900, cost=100) + reply(1) + reply(3) + \
        s_op(S_LINK_DOWN, 2) + reply(1) + reply(3) + to_deadline()
    seeds["local-repair"] = stp_header(cap=1, flags=1) + three + \
        s_bpdu(1, root=3, root_cap=900, cost=100) + s_bpdu(2, root=3, root_cap=900, cost=150) + \
        reply(3) + s_op(S_LINK_DOWN, 1) + reply(2) + reply(3)
    seeds["epochs"] = stp_header() + link_up(1) + link_up(2) + reply(1, 0x81) + reply(2) + \
        reply(1, 0x83) + s_bpdu(2, epoch=0xfe) + s_bpdu(1, epoch=0x80, variant=True) + reply(2)
    seeds["capability"] = stp_header(cap=50) + link_up(1) + link_up(2) + reply(1) + \
        reply(2) + s_op(S_CAPABILITY) + struct.pack(">H", 5) + reply(1) + reply(2) + \
        s_op(S_CAPABILITY) + struct.pack(">H", 0xffff) + reply(1)
    seeds["expiry"] = stp_header(hello=10, age=3) + link_up(1) + link_up(2) + reply(1) + \
        reply(2) + advance(250) + advance(400) + to_deadline() + to_deadline()
    example = bytes.fromhex("01a00301020304000027100000c350000013880a000001075bc0a80107075c")
    seeds["raw-bpdus"] = stp_header() + link_up(1) + \
        s_op(S_BPDU_RAW, 1) + bytes([len(example)]) + example + \
        s_op(S_BPDU_RAW, 1) + b"\x05\x01\x20\x00\x00\x00" + \
        s_bpdu(1, corrupt=0x03) + s_bpdu(1, corrupt=0x85) + s_bpdu(1, sender=2) + \
        s_op(S_BAD_CALLS, 4)
    seeds["hop-limit"] = stp_header(hops=2) + link_up(1) + link_up(2) + \
        s_bpdu(1, age=1, root=3, root_cap=900) + s_bpdu(2, age=2, root=3, root_cap=900, cost=50)
    seeds["ipv6-hysteresis"] = stp_header(ident=0x85, cap=1, percent=10, confirm=2) + \
        link_up(1) + link_up(2) + s_bpdu(1, root=4, root_cap=900, cost=100) + \
        s_bpdu(2, root=4, root_cap=900, cost=100) + rtt(1, 5000) + rtt(1, 5000) + \
        rtt(1, 5000) + reply(1) + reply(2)
    return seeds


def write(directory, seeds):
    path = os.path.join(HERE, directory)
    os.makedirs(path, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("corpus_peer", peer_seeds())
    write("corpus_stp", stp_seeds())
