/*
 * test_peer_summary.c: the resync's summary and lost notice text (src/peer/peer_summary.c,
 * docs/mqtt-st-protocol.md 7.3.1) both ways, its strictness, and the message log
 * (src/peer/message_log.c): serials that keep counting, the count, byte and age limits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "message.h"
#include "message_log.h"
#include "peer_summary.h"

static void summary_round_trip(void **state)
{
    (void)state;
    struct abuf out = {0};
    struct seqset a = {0}, b = {0};
    struct stp_broker_id ida, idb;
    assert_true(stp_broker_id_from_text(&ida, "192.168.1.7:1884"));
    assert_true(stp_broker_id_from_text(&idb, "[2001:db8::1]:1883"));
    seqset_add_range(&a, 1, 1042);
    seqset_add_range(&a, 1050, 1077);
    seqset_add(&a, 2000);
    seqset_add(&b, 7);
    assert_int_equal(peer_summary_format_header(&out, PEER_SUMMARY_SUMMARY, true, false), 0);
    assert_int_equal(peer_summary_format_run(&out, &ida, UINT64_C(0x5f0c2a9e11d3b7a4), &a), 0);
    assert_int_equal(peer_summary_format_run(&out, &idb, 2, &b), 0);
    const char *expected = "summary 1 want\n"
                           "run 192.168.1.7:1884 5f0c2a9e11d3b7a4 1-1042,1050-1077,2000\n"
                           "run [2001:db8::1]:1883 0000000000000002 7\n";
    assert_int_equal(out.len, strlen(expected));
    assert_memory_equal(out.data, expected, out.len);
    struct peer_summary s;
    assert_int_equal(peer_summary_parse(out.data, out.len, PEER_SUMMARY_SUMMARY, &s), 0);
    assert_true(s.want && !s.fresh && s.kind == PEER_SUMMARY_SUMMARY);
    assert_int_equal(s.count, 2);
    const struct seqset *back = peer_summary_find(&s, &ida, UINT64_C(0x5f0c2a9e11d3b7a4));
    assert_non_null(back);
    assert_int_equal(back->count, 3);
    assert_true(seqset_contains(back, 1042) && !seqset_contains(back, 1043));
    assert_true(seqset_contains(back, 2000));
    assert_null(peer_summary_find(&s, &ida, 2));
    assert_non_null(peer_summary_find(&s, &idb, 2));
    peer_summary_free(&s);
    seqset_free(&a);
    seqset_free(&b);
    abuf_free(&out);
}

static void headers(void **state)
{
    (void)state;
    struct peer_summary s;
    const char *reply = "summary 1 reply fresh\n";
    assert_int_equal(peer_summary_parse((const uint8_t *)reply, strlen(reply), PEER_SUMMARY_SUMMARY,
                                        &s), 0);
    assert_true(!s.want && s.fresh && s.count == 0);
    peer_summary_free(&s);
    const char *lost = "lost 1\nrun 10.0.0.1:1883 0000000000000000 1-200\n";
    assert_int_equal(
        peer_summary_parse((const uint8_t *)lost, strlen(lost), PEER_SUMMARY_LOST, &s), 0);
    assert_true(s.kind == PEER_SUMMARY_LOST && s.count == 1);
    peer_summary_free(&s);
    /* a skip notice is read only as one, and a summary is no skip notice */
    const char *skip = "skip 1\nrun 10.0.0.1:1883 0000000000000000 3,5-9\n";
    assert_int_equal(peer_summary_parse((const uint8_t *)skip, strlen(skip), PEER_SUMMARY_SKIP, &s),
                     0);
    assert_true(s.kind == PEER_SUMMARY_SKIP && s.count == 1 && s.runs[0].seqs.count == 2);
    peer_summary_free(&s);
    assert_int_equal(peer_summary_parse((const uint8_t *)skip, strlen(skip), PEER_SUMMARY_LOST, &s),
                     -1);
    assert_int_equal(peer_summary_parse((const uint8_t *)reply, strlen(reply), PEER_SUMMARY_SKIP,
                                        &s), -1);
    struct abuf out = {0};
    assert_int_equal(peer_summary_format_header(&out, PEER_SUMMARY_LOST, false, false), 0);
    assert_int_equal(peer_summary_format_header(&out, PEER_SUMMARY_SUMMARY, false, true), 0);
    assert_int_equal(peer_summary_format_header(&out, PEER_SUMMARY_SKIP, false, false), 0);
    assert_memory_equal(out.data, "lost 1\nsummary 1 reply fresh\nskip 1\n", out.len);
    abuf_free(&out);
}

static void malformed_text_is_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "summary 1\n",
        "summary 2 want\n",
        "summary 1 want fresh extra\n",
        "summary 1 want ",
        "summary 1 want\nrun 10.0.0.1:1883 0000000000000000 5-3\n",          /* backwards */
        "summary 1 want\nrun 10.0.0.1:1883 0000000000000000 1-5,5-9\n",      /* overlapping */
        "summary 1 want\nrun 10.0.0.1:1883 0000000000000000 9,3\n",          /* not ascending */
        "summary 1 want\nrun 10.0.0.1:1883 0000000000000000 0-3\n",          /* 0 */
        "summary 1 want\nrun 10.0.0.1:1883 0000000000000000 1,\n",
        "summary 1 want\nrun 10.0.0.1:1883 0000000000000000 1-\n",
        "summary 1 want\nrun 10.0.0.1:1883 000000000000000 1\n",             /* 15 hex */
        "summary 1 want\nrun host:1883 0000000000000000 1\n",
        "summary 1 want\nrun 10.0.0.1:1883 0000000000000000\n",              /* no ranges */
        ("summary 1 want\nrun 10.0.0.1:1883 0000000000000000 1\n"
         "run 10.0.0.1:1883 0000000000000000 2\n"),                          /* twice */
        "summary 1 want\nrun 10.0.0.1:1883 0000000000000000 99999999999999999999\n",
        "summary 1 want\nrun 10.0.0.1:1883 0000000000000000 1",              /* no LF */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct peer_summary s;
        if (peer_summary_parse((const uint8_t *)bad[i], strlen(bad[i]), PEER_SUMMARY_SUMMARY,
                               &s) != -1)
            fail_msg("accepted case %zu: %s", i, bad[i]);
        assert_int_equal(s.count, 0);
    }
    struct peer_summary s; /* a notice lists at least one run */
    assert_int_equal(peer_summary_parse((const uint8_t *)"lost 1\n", 7, PEER_SUMMARY_LOST, &s), -1);
    assert_int_equal(peer_summary_parse((const uint8_t *)"skip 1\n", 7, PEER_SUMMARY_SKIP, &s), -1);
    assert_int_equal(
        peer_summary_parse((const uint8_t *)"skip 2\nrun 10.0.0.1:1883 0000000000000000 1\n", 44,
                           PEER_SUMMARY_SKIP, &s), -1);
}

/* ---- the log ------------------------------------------------------------------------------ */

static struct message *msg_of(struct message_counters *counters, size_t payload)
{
    static const char zeros[4096];
    return message_create(counters, "t", 1, zeros, payload, NULL, 0, 1, false, 0, 0, 0);
}

static void log_limits(void **state)
{
    (void)state;
    struct message_counters counters = {0};
    struct message_log log = {.max_messages = 3000, .max_bytes = 100 * 1000, .max_age_ms = 1000};
    for (int i = 0; i < 5000; i++) { /* 11 bytes each: the count limit binds */
        struct message *m = msg_of(&counters, 10);
        assert_int_equal(message_log_add(&log, m, i / 10), 0);
        message_unref(m);
    }
    assert_int_equal(log.len, 3000);
    assert_int_equal(log.evicted, 2000);
    assert_int_equal(log.head_serial, 2000);
    assert_int_equal(message_log_end(&log), 5000);
    assert_null(message_log_at(&log, 1999));
    assert_non_null(message_log_at(&log, 2000));
    assert_null(message_log_at(&log, 5000));
    assert_int_equal(log.bytes, 3000 * 11);
    /* bytes: a 4000-byte message pushes out what no longer fits */
    struct message *big = msg_of(&counters, 4000);
    for (int i = 0; i < 30; i++) assert_int_equal(message_log_add(&log, big, 500), 0);
    message_unref(big);
    assert_true(log.bytes <= 100 * 1000);
    assert_int_equal(message_log_at(&log, message_log_end(&log) - 1)->msg->payload_len, 4000);
    /* age: only what was logged within the last second stays */
    message_log_expire(&log, 1450);
    for (uint64_t s = log.head_serial; s < message_log_end(&log); s++)
        assert_true(message_log_at(&log, s)->at_ms >= 450);
    message_log_expire(&log, 5000);
    assert_int_equal(log.len, 0);
    assert_int_equal(log.bytes, 0);
    message_log_free(&log);
    assert_int_equal(counters.count, 0); /* every reference given back */
}

/* The stream line of the state kept across restarts (peer_state.c). */
static void state_header(void **state)
{
    (void)state;
    struct peer_stream_state st = {.incarnation = 0x0123456789abcdeeu, .next = 7, .reserved = 4102,
                                   .next0 = 0, .reserved0 = 65535, .clean = false, .durable = true,
                                   .joined = true};
    struct abuf out = {0};
    assert_int_equal(peer_state_format_header(&out, &st), 0);
    const char *text = "state 1 0123456789abcdee 7 4102 0 65535 running durable joined\n";
    assert_int_equal(out.len, strlen(text));
    assert_memory_equal(out.data, text, out.len);
    assert_int_equal(abuf_append(&out, "rest", 4), 0);
    struct peer_stream_state back;
    size_t used;
    assert_int_equal(peer_state_parse_header(out.data, out.len, &back, &used), 0);
    assert_int_equal(used, strlen(text));
    assert_true(back.incarnation == st.incarnation && back.next == 7 && back.reserved == 4102 &&
                back.next0 == 0 && back.reserved0 == 65535 && !back.clean && back.durable &&
                back.joined);
    abuf_free(&out);
    static const char *bad[] = {
        "state 1 0123456789abcdee 7 4102 0 65535 running durable joined",      /* no LF */
        "state 2 0123456789abcdee 7 4102 0 65535 running durable joined\n",    /* version */
        "state 1 0123456789ABCDEE 7 4102 0 65535 running durable joined\n",    /* upper case */
        "state 1 0123456789abcdee 7 6 0 65535 running durable joined\n",       /* reserved < next */
        "state 1 0123456789abcdee 7 4102 0 65535 running durable\n",           /* a field short */
        "state 1 0123456789abcdee 7 4102 0 65535 running durable joined x\n",  /* one too many */
        "state 1 0123456789abcdee -7 4102 0 65535 running durable joined\n",   /* a sign */
        "state 1 0123456789abcdee 7 4102 0 65535 stopped durable joined\n",    /* unknown word */
        "state 1 0123456789abcdee 7  4102 0 65535 running durable joined\n",   /* two blanks */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(peer_state_parse_header((const uint8_t *)bad[i], strlen(bad[i]), &back,
                                                 &used),
                         -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(summary_round_trip),
        cmocka_unit_test(headers),
        cmocka_unit_test(malformed_text_is_refused),
        cmocka_unit_test(log_limits),
        cmocka_unit_test(state_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
