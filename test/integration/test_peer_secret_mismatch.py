"""Two real brokers whose peer_secret differs: each says in its log what went wrong, in the
words docs/deployment.md quotes, and they never link (issue 17: the dialler logged only
"bad packet (type 15) ...: error." and the acceptor nothing).

The acceptor proves itself first (its AUTH challenge), so with different secrets it is the
dialler that finds the proof wrong: it says so and tells the acceptor with a DISCONNECT
(Not authorized, with a reason string), and the acceptor logs that its proof was refused.
"""

import time

import pytest

from helpers import free_port

pytestmark = pytest.mark.arbor_only


def peer_lines(port, capability, secret, *extra):
    return ["peer_identity 127.0.0.1:%d" % port,
            "stp_capability %d" % capability,
            "stp_hello_interval 0.2",
            "stp_max_age 1",
            "peer_restart_timeout 0.5 1",
            "peer_secret " + secret] + list(extra)


def test_mismatched_peer_secrets_are_named_on_both_sides(broker):
    accept_port, dial_port = free_port(), free_port()
    acceptor = broker(*peer_lines(accept_port, 500, "the-acceptors-secret-0123456789"),
                      port=accept_port)
    dialler = broker(*peer_lines(dial_port, 1000, "the-diallers-secret-9876543210",
                                 "peer 127.0.0.1:%d" % accept_port), port=dial_port)
    dialler.wait_log("MQTT-ST: peer 127.0.0.1:%d failed authentication: its proof does not "
                     "match our peer_secret (is peer_secret the same on both brokers?)"
                     % accept_port, timeout=30)
    acceptor.wait_log("MQTT-ST: peer 127.0.0.1:%d (from 127.0.0.1:" % dial_port, timeout=30)
    acceptor.wait_log(") refused our authentication: our proof does not match its peer_secret "
                      "(is peer_secret the same on both brokers?).")
    # A second attempt (the dialler retries) says the same; the generic line never appears.
    time.sleep(1.5)
    for b in (acceptor, dialler):
        log = b.log_text()
        assert "bad packet" not in log, log
        assert "link to 127.0.0.1" not in log, log
