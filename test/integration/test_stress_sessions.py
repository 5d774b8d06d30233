"""Randomised session/will/takeover churn, run against the sanitizer build: the broker
fixture fails the test if ASan/UBSan/LSan report anything or the broker dies. Seeded, so a
failure is reproducible (REVIEW_STRESS_SEED, REVIEW_STRESS_STEPS)."""

import os
import random
import socket
import struct
import time

import pytest

import mqttproto as mp

IDS = ["a", "b", "c", "d", "e"]
TOPICS = ["t/1", "t/2", "w/a", "w/b", "x"]
FILTERS = ["t/#", "+/1", "w/+", "#", "$share/g/t/#", "$share/g/w/+", "$share/h/#", "x"]


class Conn:
    def __init__(self, b, version):
        self.version = version
        self.sock = socket.create_connection((b.host, b.port), timeout=2)
        self.sock.setblocking(False)
        self.buf = bytearray()
        self.alive = True
        self.pid = 0

    def send(self, data):
        try:
            self.sock.setblocking(True)
            self.sock.settimeout(1)
            self.sock.sendall(data)
        except OSError:
            self.alive = False
        finally:
            try:
                self.sock.setblocking(False)
            except OSError:
                pass

    def next_pid(self):
        self.pid = self.pid % 65535 + 1
        return self.pid

    def pump(self, rnd):
        """Read what is there; acknowledge some PUBLISH / PUBREL."""
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    self.alive = False
                    break
                self.buf += data
        except BlockingIOError:
            pass
        except OSError:
            self.alive = False
        while len(self.buf) >= 2:
            mult, length, i = 1, 0, 1
            while i < len(self.buf):
                byte = self.buf[i]
                length += (byte & 0x7F) * mult
                i += 1
                if not byte & 0x80:
                    break
                mult *= 128
            else:
                return
            if len(self.buf) < i + length:
                return
            first = self.buf[0]
            body = bytes(self.buf[i:i + length])
            del self.buf[:i + length]
            ptype = first >> 4
            if ptype == mp.PUBLISH:
                qos = (first >> 1) & 3
                if qos:
                    tlen = struct.unpack("!H", body[:2])[0]
                    pid = struct.unpack("!H", body[2 + tlen:4 + tlen])[0]
                    if rnd.random() < 0.7:
                        self.send(mp.puback(pid) if qos == 1 else mp.pubrec(pid))
            elif ptype == mp.PUBREL:
                pid = struct.unpack("!H", body[:2])[0]
                if rnd.random() < 0.8:
                    self.send(mp.pubcomp(pid))
            elif ptype == mp.PUBREC:
                pid = struct.unpack("!H", body[:2])[0]
                self.send(mp.pubrel(pid))

    def close(self):
        self.alive = False
        try:
            self.sock.close()
        except OSError:
            pass


def random_connect(rnd, cid):
    version = rnd.choice([3, 4, 5, 5, 5])
    kw = {"version": version, "clean": rnd.random() < 0.4, "keepalive": 60}
    if version == 5:
        props = []
        if rnd.random() < 0.7:
            props.append((mp.P_SESSION_EXPIRY, rnd.choice([0, 1, 2, 60])))
        if rnd.random() < 0.5:
            props.append((mp.P_RECEIVE_MAXIMUM, rnd.choice([1, 2, 5])))
        if rnd.random() < 0.3:
            props.append((mp.P_TOPIC_ALIAS_MAXIMUM, 5))
        kw["props"] = props
    if rnd.random() < 0.6:
        will = {"topic": rnd.choice(TOPICS), "payload": b"will-" + cid.encode(),
                "qos": rnd.choice([0, 1, 2]), "retain": rnd.random() < 0.3}
        if version == 5:
            wp = []
            if rnd.random() < 0.6:
                wp.append((mp.P_WILL_DELAY, rnd.choice([0, 1, 2])))
            if rnd.random() < 0.3:
                wp.append((mp.P_MESSAGE_EXPIRY, rnd.choice([1, 5])))
            will["props"] = wp
        kw["will"] = will
    if version == 3:
        kw["version"] = mp.MQTT31
    return version, mp.connect(cid, **kw)


def run_churn(b, seed, steps):
    rnd = random.Random(seed)
    conns = {}
    for step in range(steps):
        cid = rnd.choice(IDS)
        c = conns.get(cid)
        r = rnd.random()
        if c is None or not c.alive or r < 0.12:
            if c is not None and rnd.random() < 0.5:
                c.close()  # else: leave it open -> takeover
            version, pkt = random_connect(rnd, cid)
            c = Conn(b, version)
            c.send(pkt)
            conns[cid] = c
            continue
        v = c.version if c.version != 3 else 3
        ver = mp.MQTT5 if v == 5 else mp.MQTT311
        if r < 0.30:
            f = rnd.choice(FILTERS)
            opts = rnd.choice([0, 1, 2])
            if v == 5:
                opts = mp.sub_options(qos=opts, retain_handling=rnd.choice([0, 1, 2]),
                                      retain_as_published=rnd.random() < 0.5)
            props = [(mp.P_SUBSCRIPTION_ID, rnd.randint(1, 5))] if v == 5 and rnd.random() < 0.4 else None
            c.send(mp.subscribe(c.next_pid(), [(f, opts)], props=props, version=ver))
        elif r < 0.36:
            c.send(mp.unsubscribe(c.next_pid(), [rnd.choice(FILTERS)], version=ver))
        elif r < 0.75:
            qos = rnd.choice([0, 1, 2])
            props = None
            topic = rnd.choice(TOPICS)
            if v == 5:
                props = []
                if rnd.random() < 0.3:
                    props.append((mp.P_MESSAGE_EXPIRY, rnd.choice([1, 3])))
                if rnd.random() < 0.2:
                    props.append((mp.P_USER_PROPERTY, ("k", "v")))
                if rnd.random() < 0.3:
                    props.append((mp.P_TOPIC_ALIAS, rnd.randint(1, 5)))
                    if rnd.random() < 0.5:
                        topic = ""
            payload = b"" if rnd.random() < 0.05 else os.urandom(rnd.choice([1, 10, 3000]))
            c.send(mp.publish(topic, payload, qos=qos, retain=rnd.random() < 0.2,
                              pid=c.next_pid() if qos else None, props=props, version=ver))
        elif r < 0.82:
            if v == 5:
                reason = rnd.choice([0, 4, 0x80])
                props = [(mp.P_SESSION_EXPIRY, rnd.choice([0, 1, 30]))] if rnd.random() < 0.5 else None
                c.send(mp.disconnect(reason, props))
            else:
                c.send(mp.disconnect())
            c.close()
        elif r < 0.86:
            c.close()  # abrupt: will
        elif r < 0.88:
            c.send(b"\xff\xff\xff\xff\xff")  # garbage -> protocol close
        elif r < 0.90:
            time.sleep(rnd.choice([0.3, 1.1]))  # let delays/expiries fire
        for other in list(conns.values()):
            if other.alive:
                other.pump(rnd)
    time.sleep(2.5)
    for c in conns.values():
        if c.alive:
            c.pump(rnd)
    for c in conns.values():
        c.close()


@pytest.mark.timeout(180)
def test_random_session_churn(broker):
    b = broker("max_inflight_messages 3", "max_queued_messages 5", "sys_interval 1",
               "max_topic_alias 5")
    seed = int(os.environ.get("REVIEW_STRESS_SEED", "1"))
    steps = int(os.environ.get("REVIEW_STRESS_STEPS", "700"))
    for s in range(seed, seed + 3):
        run_churn(b, s, steps)
    assert b.running()
