/*
 * test_peer_origin.c: unit tests for the pure parts of the MQTT-ST glue: the origin user
 * property a peer PUBLISH carries (format and parse, malformed values refused), the duplicate
 * window per origin (in order, out of order, gaps, far jumps, too old), broker identity text
 * (src/peer/peer.c) and the HMAC-SHA256 peer authentication against a vector computed independently
 * (Python's hmac module) and with every input changed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "message.h"
#include "peer_net.h"

static struct wire_bytes text_bytes(const char *text)
{
    return (struct wire_bytes){(const uint8_t *)text, (uint32_t)strlen(text)};
}

static void test_origin_round_trip(void **state)
{
    (void)state;
    struct message msg;
    memset(&msg, 0, sizeof msg);
    assert_true(stp_broker_id_from_text(&msg.origin.broker, "[2001:db8::7]:1884"));
    msg.origin.incarnation = 0x0123456789abcdefULL;
    msg.origin.sequence = 42;
    msg.origin.time_ms = 1764020000123LL;
    msg.qos = 1;
    char buf[160];
    size_t len = peer_origin_format(&msg, false, buf, sizeof buf);
    assert_string_equal(buf, "[2001:db8::7]:1884 0123456789abcdef 42 1764020000123 1");
    assert_int_equal(len, strlen(buf));
    struct message_origin o;
    memset(&o, 0, sizeof o);
    assert_true(peer_origin_parse(text_bytes(buf), &o));
    assert_true(stp_broker_id_equal(&o.broker, &msg.origin.broker));
    assert_int_equal(o.incarnation, msg.origin.incarnation);
    assert_int_equal(o.sequence, 42);
    assert_int_equal(o.time_ms, 1764020000123LL);
    assert_int_equal(o.qos, 1);
    assert_false(o.retained_sync);
    assert_true(o.stamped);

    peer_origin_format(&msg, true, buf, sizeof buf);
    assert_string_equal(buf, "[2001:db8::7]:1884 0123456789abcdef 42 1764020000123 1 r");
    assert_true(peer_origin_parse(text_bytes(buf), &o));
    assert_true(o.retained_sync);
}

static void test_origin_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "127.0.0.1:1884",
        "127.0.0.1:1884 00000000000000ff",
        "127.0.0.1:1884 00000000000000ff 7",
        "127.0.0.1:1884 00000000000000ff 7 5",       /* no QoS */
        "127.0.0.1:1884 00000000000000ff 7 5 3",     /* QoS 3 */
        "127.0.0.1:1884 00000000000000ff 7 5 12",    /* QoS 12 */
        "127.0.0.1:1884 00000000000000ff 0 5 1",     /* sequence numbers start at 1 */
        "127.0.0.1 00000000000000ff 7 5 1",          /* no port */
        "0.0.0.0:1884 00000000000000ff 7 5 1",       /* unspecified address */
        "127.0.0.1:1884 00000000000000ff 7 5 1 x",   /* unknown flag */
        "127.0.0.1:1884 00000000000000ff 7 5 1 r r", /* trailing junk */
        "127.0.0.1:1884 zz 7 5 1",
        "127.0.0.1:1884 ff 7 5 1",                     /* incarnation not 16 digits */
        "127.0.0.1:1884 00000000000000FF 7 5 1",       /* upper case: not what is written */
        "127.0.0.1:1884 00000000000000ff -1 5 1",      /* signs */
        "127.0.0.1:1884 00000000000000ff +7 5 1",
        "127.0.0.1:1884 00000000000000ff 7 -5 1",
        "127.0.0.1:1884 00000000000000ff 18446744073709551616 5 1", /* overflow */
        "127.0.0.1:1884 00000000000000ff 7 9223372036854775808 1",
        "127.0.0.1:1884  00000000000000ff 7 5 1",      /* two blanks */
        "127.0.0.1:1884 00000000000000ff 7 5 1 ",      /* trailing blank */
        "127.0.0.1:1884 00000000000000ff 7 5 01",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct message_origin o;
        memset(&o, 0, sizeof o);
        if (peer_origin_parse(text_bytes(bad[i]), &o)) fail_msg("accepted \"%s\"", bad[i]);
    }
    struct message_origin o;
    assert_true(peer_origin_parse(text_bytes("127.0.0.1:1884 00000000000000ff 7 5 0"), &o));
}

static void test_window_in_order_and_repeats(void **state)
{
    (void)state;
    struct seqset *w = calloc(1, sizeof *w);
    for (uint64_t s = 1; s <= 1000; s++) assert_false(peer_seen_check(w, true, s));
    for (uint64_t s = 1; s <= 1000; s++) assert_true(peer_seen_check(w, true, s));
    seqset_free(w);
    free(w);
}

static void test_window_out_of_order_and_gaps(void **state)
{
    (void)state;
    struct seqset *w = calloc(1, sizeof *w);
    assert_false(peer_seen_check(w, true, 10));
    assert_false(peer_seen_check(w, true, 3)); /* behind the highest, not seen yet */
    assert_true(peer_seen_check(w, true, 3));
    assert_false(peer_seen_check(w, true, 9));
    assert_false(peer_seen_check(w, true, 200));
    for (uint64_t s = 11; s < 200; s++) assert_false(peer_seen_check(w, true, s)); /* the gap */
    assert_true(peer_seen_check(w, true, 150));
    assert_true(peer_seen_check(w, true, 10));
    seqset_free(w);
    free(w);
}

static void test_window_far_jump_and_too_old(void **state)
{
    (void)state;
    struct seqset *w = calloc(1, sizeof *w);
    assert_false(peer_seen_check(w, true, 5));
    /* A jump beyond the window forgets everything before it; what falls out of the window
     * cannot be told apart from a duplicate and is treated as one. */
    uint64_t far = 5 + PEER_WINDOW + 10;
    assert_false(peer_seen_check(w, true, far));
    assert_true(peer_seen_check(w, true, 5));
    assert_true(peer_seen_check(w, true, far - PEER_WINDOW));
    assert_false(peer_seen_check(w, true, far - PEER_WINDOW + 1)); /* the oldest still tracked */
    assert_false(peer_seen_check(w, true, far + 1)); /* the next one is new */
    seqset_free(w);
    free(w);
}

static void test_exact_set_keeps_old_gaps(void **state)
{
    (void)state;
    /* A QoS 1/2 run (not windowed): a gap far behind stays open for a resync to fill */
    struct seqset *w = calloc(1, sizeof *w);
    assert_false(peer_seen_check(w, false, 1));
    uint64_t far = 2 + 3 * PEER_WINDOW;
    assert_false(peer_seen_check(w, false, far));
    assert_false(peer_seen_check(w, false, 2));
    assert_true(peer_seen_check(w, false, 2));
    assert_false(peer_seen_check(w, false, far - 1));
    seqset_free(w);
    free(w);
}

static void test_identity_text(void **state)
{
    (void)state;
    struct stp_broker_id id;
    assert_true(stp_broker_id_from_text(&id, "127.0.0.1:1884"));
    assert_int_equal(id.port, 1884);
    assert_true(stp_broker_id_from_text(&id, "[::1]:1"));
    assert_false(stp_broker_id_from_text(&id, "127.0.0.1"));
    assert_false(stp_broker_id_from_text(&id, "127.0.0.1:0"));
    assert_false(stp_broker_id_from_text(&id, "127.0.0.1:65536"));
    assert_false(stp_broker_id_from_text(&id, "127.0.0.1:18x"));
    assert_false(stp_broker_id_from_text(&id, "host.example:1883"));
    assert_false(stp_broker_id_from_text(&id, "[::1:1883"));
    assert_false(stp_broker_id_from_text(&id, "::1:1883")); /* IPv6 needs brackets */
    assert_false(stp_broker_id_from_text(&id, "[0.0.0.0]:1883"));
    assert_false(stp_broker_id_from_text(&id, "0.0.0.0:1883"));
    assert_false(stp_broker_id_from_text(&id, ":1883"));
}

static const char secret[] = "0123456789abcdef";
static const char client[] = "127.0.0.1:1884", server[] = "[::1]:1885";

static void nonces(uint8_t cn[PEER_NONCE_LEN], uint8_t sn[PEER_NONCE_LEN])
{
    for (int i = 0; i < PEER_NONCE_LEN; i++) {
        cn[i] = (uint8_t)i;
        sn[i] = (uint8_t)(16 + i);
    }
}

static void hex(const uint8_t *bytes, size_t len, char *out)
{
    for (size_t i = 0; i < len; i++) sprintf(out + 2 * i, "%02x", bytes[i]);
}

static void test_auth_vectors(void **state)
{
    (void)state;
    uint8_t cn[PEER_NONCE_LEN], sn[PEER_NONCE_LEN], proof[PEER_PROOF_LEN];
    char text[2 * PEER_PROOF_LEN + 1];
    nonces(cn, sn);
    /* python3: hmac.new(secret, b"mqtt-st client\0" + cn + sn + client + b"\0" + server, sha256) */
    assert_int_equal(peer_auth_proof(secret, false, cn, sn, client, server, proof), 0);
    hex(proof, sizeof proof, text);
    assert_string_equal(text, "706c5dbba8c4d475c2481c96539167f582beab53a96845d7cab2811e9b9600f0");
    assert_int_equal(peer_auth_proof(secret, true, cn, sn, client, server, proof), 0);
    hex(proof, sizeof proof, text);
    assert_string_equal(text, "cde44eefe2b7b56ded00f1f801a520fda9c46aa375ce4664cbdd44e2b63b171b");
}

static void test_auth_check_refuses_any_change(void **state)
{
    (void)state;
    uint8_t cn[PEER_NONCE_LEN], sn[PEER_NONCE_LEN], proof[PEER_PROOF_LEN];
    nonces(cn, sn);
    assert_int_equal(peer_auth_proof(secret, false, cn, sn, client, server, proof), 0);
    assert_true(peer_auth_check(secret, false, cn, sn, client, server, proof, sizeof proof));
    /* a server's proof is not a client's */
    assert_false(peer_auth_check(secret, true, cn, sn, client, server, proof, sizeof proof));
    assert_false(peer_auth_check("0123456789abcdeF", false, cn, sn, client, server, proof,
                                 sizeof proof));
    assert_false(peer_auth_check(secret, false, cn, sn, "127.0.0.1:1885", server, proof,
                                 sizeof proof));
    assert_false(peer_auth_check(secret, false, cn, sn, client, "[::1]:1886", proof,
                                 sizeof proof));
    assert_false(peer_auth_check(secret, false, cn, sn, client, server, proof, sizeof proof - 1));
    sn[3] ^= 1;
    assert_false(peer_auth_check(secret, false, cn, sn, client, server, proof, sizeof proof));
    sn[3] ^= 1;
    cn[15] ^= 0x80;
    assert_false(peer_auth_check(secret, false, cn, sn, client, server, proof, sizeof proof));
    cn[15] ^= 0x80;
    proof[0] ^= 1;
    assert_false(peer_auth_check(secret, false, cn, sn, client, server, proof, sizeof proof));
}

static void test_auth_nonces_differ(void **state)
{
    (void)state;
    uint8_t a[PEER_NONCE_LEN], b[PEER_NONCE_LEN];
    assert_int_equal(peer_auth_nonce(a), 0);
    assert_int_equal(peer_auth_nonce(b), 0);
    assert_memory_not_equal(a, b, PEER_NONCE_LEN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_origin_round_trip),
        cmocka_unit_test(test_origin_malformed),
        cmocka_unit_test(test_window_in_order_and_repeats),
        cmocka_unit_test(test_window_out_of_order_and_gaps),
        cmocka_unit_test(test_window_far_jump_and_too_old),
        cmocka_unit_test(test_exact_set_keeps_old_gaps),
        cmocka_unit_test(test_identity_text),
        cmocka_unit_test(test_auth_vectors),
        cmocka_unit_test(test_auth_check_refuses_any_change),
        cmocka_unit_test(test_auth_nonces_differ),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
