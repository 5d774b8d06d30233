"""What test/fuzz/fuzz_peer.c found in the peer code, replayed against the real binary.

Each test is the smallest sequence of packets (and signals) that brought the broker down before
its fix; the fuzzer's own input is in test/fuzz/corpus_peer/ as well.
"""

import os
import signal

import pytest

import mqttproto as mp
import peerproto as pp
from helpers import free_port

pytestmark = pytest.mark.arbor_only

SECRET = "fuzz-findings-shared-secret"


def test_reload_removing_peer_secret_during_a_handshake(broker):
    """A SIGHUP that removed peer_secret while a peer was between its CONNECT and its AUTH
    answer made the broker check that answer against no secret (strlen(NULL): SIGSEGV). The
    peer is now refused and dials again under the new configuration."""
    port = free_port()
    b = broker("peer_identity 127.0.0.1:%d" % port, "stp_capability 100",
               "peer_secret " + SECRET, port=port)
    peer_id = "127.0.0.1:%d" % free_port()
    conn = pp.Conn.dial(b.host, b.port, "mid-handshake")
    try:
        nonce = os.urandom(pp.NONCE_LEN)
        conn.send(pp.connect_packet(peer_id, nonce))
        reason, method, data = pp.parse_auth(conn.recv_type(mp.AUTH))
        assert (reason, method) == (pp.CONTINUE_AUTHENTICATION, pp.AUTH_METHOD)
        server_nonce = data[:pp.NONCE_LEN]
        server_id = data[pp.NONCE_LEN + pp.PROOF_LEN:].decode()

        lines = open(b.conf_path).read().splitlines()
        with open(b.conf_path, "w") as f:
            f.write("\n".join(l for l in lines if not l.startswith("peer_secret")) +
                    "\npeer_allow_unauthenticated true\n")
        b.proc.send_signal(signal.SIGHUP)
        b.wait_log("Reloaded configuration.")

        conn.send(pp.auth_packet(pp.proof(SECRET, False, nonce, server_nonce, peer_id,
                                          server_id)))
        connack = mp.Connack(conn.recv_type(mp.CONNACK), mp.MQTT5)
        assert connack.rc == pp.RC_NOT_AUTHORIZED, connack
        conn.wait_closed(2.0)
    finally:
        conn.close()
    b.wait_log("peer_secret removed by a reload")
    assert b.running()

    # the same peer dialling again is admitted by the new configuration
    again = pp.Conn.dial(b.host, b.port, "after-reload")
    try:
        again.send(pp.connect_packet(peer_id, method=None))
        connack = mp.Connack(again.recv_type(mp.CONNACK), mp.MQTT5)
        assert connack.rc == 0, connack
    finally:
        again.close()
    assert b.running()
