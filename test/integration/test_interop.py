"""Interoperability with Debian's mosquitto_pub / mosquitto_sub (libmosquitto clients) and
paho-mqtt."""

import shutil
import subprocess

import pytest

import mqttproto as mp

PUB = shutil.which("mosquitto_pub")
SUB = shutil.which("mosquitto_sub")
pytestmark = pytest.mark.skipif(not (PUB and SUB), reason="mosquitto-clients not installed")

TOOL_VERSIONS = {"mqttv31": mp.MQTT31, "mqttv311": mp.MQTT311, "mqttv5": mp.MQTT5}


def run(tool, b, *args, stdin=None, timeout=10):
    p = subprocess.run([tool, "-h", b.host, "-p", str(b.port)] + list(args),
                       input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("version", ["mqttv31", "mqttv311", "mqttv5"])
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_mosquitto_pub_to_subscriber(broker, raw, version, qos):
    b = broker()
    sub = raw(b, TOOL_VERSIONS[version])
    sub.connect("rawsub")
    sub.subscribe("interop/pub", 2)
    rc, out, err = run(PUB, b, "-V", version, "-q", str(qos), "-t", "interop/pub",
                       "-m", "hello %s q%d" % (version, qos))
    assert rc == 0, err
    m = sub.recv_publish()
    assert (m.topic, m.payload, m.qos) == ("interop/pub",
                                          b"hello %s q%d" % (version.encode(), qos), qos)


@pytest.mark.parametrize("version", ["mqttv31", "mqttv311", "mqttv5"])
@pytest.mark.parametrize("qos", [1, 2])
def test_mosquitto_sub_persistent_session(broker, version, qos):
    # mosquitto_sub -c -E makes a persistent subscription and leaves; messages published
    # meanwhile are queued and collected by the next mosquitto_sub -c with the same id.
    b = broker()
    cid = "toolsub-%s-%d" % (version, qos)
    extra = ["-x", "60"] if version == "mqttv5" else []
    rc, out, err = run(SUB, b, "-V", version, "-i", cid, "-c", "-q", str(qos), "-t",
                       "interop/q", "-E", *extra)
    assert rc == 0, err
    lines = b"".join(b"m%d\n" % i for i in range(3))
    rc, out, err = run(PUB, b, "-V", version, "-q", str(qos), "-t", "interop/q", "-l",
                       stdin=lines)
    assert rc == 0, err
    rc, out, err = run(SUB, b, "-V", version, "-i", cid, "-c", "-q", str(qos), "-t",
                       "interop/q", "-C", "3", "-W", "5", "-v", *extra)
    assert rc == 0, err
    assert out.splitlines() == [b"interop/q m0", b"interop/q m1", b"interop/q m2"]


@pytest.mark.parametrize("version", ["mqttv31", "mqttv311", "mqttv5"])
def test_retained_with_tools(broker, version):
    b = broker()
    rc, out, err = run(PUB, b, "-V", version, "-r", "-q", "1", "-t", "interop/ret", "-m",
                       "kept")
    assert rc == 0, err
    rc, out, err = run(SUB, b, "-V", version, "-q", "1", "-t", "interop/#", "-C", "1",
                       "-W", "5", "-F", "%t %r %q %p")
    assert rc == 0, err
    assert out.strip() == b"interop/ret 1 1 kept"
    # clear it
    rc, out, err = run(PUB, b, "-V", version, "-r", "-t", "interop/ret", "-n")
    assert rc == 0, err
    rc, out, err = run(SUB, b, "-V", version, "-t", "interop/#", "-W", "1")
    assert out == b""


def test_v5_properties_with_tools(broker, raw):
    b = broker()
    sub = raw(b, mp.MQTT5)
    sub.connect("rawsub")
    sub.subscribe("interop/props", 1)
    rc, out, err = run(PUB, b, "-V", "mqttv5", "-q", "1", "-t", "interop/props", "-m", "p",
                       "-D", "publish", "user-property", "key", "value",
                       "-D", "publish", "content-type", "text/plain",
                       "-D", "publish", "message-expiry-interval", "100")
    assert rc == 0, err
    m = sub.recv_publish()
    assert m.props.all(mp.P_USER_PROPERTY) == [("key", "value")]
    assert m.props.get(mp.P_CONTENT_TYPE) == "text/plain"
    assert 99 <= m.props.get(mp.P_MESSAGE_EXPIRY) <= 100


def test_large_message_with_tools(broker):
    b = broker()
    payload = b"0123456789abcdef" * 20000     # 320 kB
    rc, out, err = run(PUB, b, "-r", "-q", "1", "-t", "interop/big", "-s", stdin=payload)
    assert rc == 0, err
    rc, out, err = run(SUB, b, "-t", "interop/big", "-C", "1", "-W", "5", "-N")
    assert rc == 0, err
    assert out == payload


def test_paho_clients_all_versions(broker, mqtt):
    # paho-mqtt publishers and subscribers of every protocol version talk to each other.
    b = broker()
    subs = {v: mqtt(b, client_id="paho-sub-%d" % v, version=v) for v in (3, 4, 5)}
    for s in subs.values():
        assert s.subscribe("paho/#", 2) == [2]
    for v in (3, 4, 5):
        pub = mqtt(b, client_id="paho-pub-%d" % v, version=v)
        for qos in (0, 1, 2):
            pub.publish("paho/%d/%d" % (v, qos), b"from v%d" % v, qos=qos)
    for v, s in subs.items():
        got = sorted((m.topic, m.payload, m.qos) for m in s.get_messages(9))
        want = sorted(("paho/%d/%d" % (pv, q), b"from v%d" % pv, q)
                      for pv in (3, 4, 5) for q in (0, 1, 2))
        assert got == want
        s.expect_no_message(0.2)


def test_paho_v5_properties_and_session(broker, mqtt):
    from helpers import PacketTypes, props
    b = broker()
    s = mqtt(b, client_id="p5", version=5, clean=True,
             properties=props(PacketTypes.CONNECT, SessionExpiryInterval=60))
    s.subscribe("p5/t", 1)
    s.disconnect()
    pub = mqtt(b, client_id="pub5", version=5)
    pub.publish("p5/t", b"queued", qos=1,
                properties=props(PacketTypes.PUBLISH, UserProperty=[("a", "1")],
                                 CorrelationData=b"cd"))
    s2 = mqtt(b, client_id="p5", version=5, clean=False,
              properties=props(PacketTypes.CONNECT, SessionExpiryInterval=60))
    assert s2.session_present
    m = s2.get_message()
    assert m.payload == b"queued"
    assert m.props.UserProperty == [("a", "1")]
    assert m.props.CorrelationData == b"cd"
