"""Client identifiers under authentication (mosquitto.conf(5), arbor.conf(5) SECURITY):
use_username_as_clientid, clientid_prefixes and allow_zero_length_clientid together with a
password_file, checked against Debian's mosquitto 2.0.11 as well (ARBOR_BIN=/usr/sbin/mosquitto).

- use_username_as_clientid: the client id becomes the user name, so one user cannot take
  another's session over (a second connection of the same user replaces the first, whatever
  client id it gives); a client without a user name is not authorised; an empty client id is
  fine then, even where it would otherwise be refused.
- clientid_prefixes is checked on the client id the client gives, before its password."""

import pytest

import mqttproto as mp
from mqttproto import MQTT311, MQTT5
from test_password_file import USERS, pwfile  # noqa: F401 (fixture: a mosquitto_passwd file)

ALICE = dict(username="alice", password=USERS["alice"])
BOB = dict(username="bob", password=USERS["bob"])


@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_use_username_as_clientid_replaces_the_id(broker, raw, pwfile, version):
    b = broker("password_file %s" % pwfile, "allow_anonymous false",
               "use_username_as_clientid true")
    first = raw(b, version)
    ack = first.connect("anything", **ALICE)
    assert ack.rc == 0
    assert mp.P_ASSIGNED_CLIENT_ID not in ack.props   # it is not told, as with Mosquitto
    # the same user under another id takes the session over: it is the same client id
    second = raw(b, version)
    assert second.connect("something-else", **ALICE).rc == 0
    first.wait_closed(timeout=3)
    # another user is another client
    third = raw(b, version)
    assert third.connect("anything", **BOB).rc == 0
    assert second.is_open() and third.is_open()


@pytest.mark.parametrize("version,rc", [(MQTT311, 5), (MQTT5, 0x87)])
def test_use_username_as_clientid_without_username_is_not_authorised(broker, raw, version, rc):
    b = broker("allow_anonymous true", "use_username_as_clientid true")
    ack = raw(b, version).connect("cid", expect_rc=None)
    assert ack.rc == rc


@pytest.mark.parametrize("allow", ["true", "false"])
@pytest.mark.parametrize("version", [MQTT311, MQTT5])
def test_use_username_as_clientid_with_empty_id(broker, raw, pwfile, version, allow):
    b = broker("password_file %s" % pwfile, "allow_anonymous false",
               "allow_zero_length_clientid %s" % allow, "use_username_as_clientid true")
    ack = raw(b, version).connect("", **ALICE, expect_rc=None)
    if allow == "false":    # the empty id is refused first, as without the option
        assert ack.rc == (2 if version == MQTT311 else ack.rc) and ack.rc != 0
        return
    assert ack.rc == 0
    if version == MQTT5:    # the id it was given, which is its user name
        assert ack.props.get(mp.P_ASSIGNED_CLIENT_ID) == "alice"


@pytest.mark.parametrize("version,rc", [(MQTT311, 5), (MQTT5, 0x87)])
def test_clientid_prefixes_before_password(broker, raw, pwfile, version, rc):
    b = broker("password_file %s" % pwfile, "allow_anonymous false",
               "clientid_prefixes sensor-")
    assert raw(b, version).connect("sensor-1", **ALICE).rc == 0
    # a good password does not make up for the wrong prefix, nor a good prefix for a wrong one
    assert raw(b, version).connect("pump-1", **ALICE,
                                   expect_rc=None).rc == rc
    assert raw(b, version).connect("sensor-2", username="alice", password="wrong",
                                   expect_rc=None).rc == rc
