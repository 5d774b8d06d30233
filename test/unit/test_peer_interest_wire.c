/*
 * test_peer_interest_wire.c: interest announcements on the wire (src/peer/peer_interest_wire.c):
 * what is encoded parses back to the same summary or diff, and every way a payload can break
 * the format is refused whole; likewise the shared-group tables ($MQTT-ST/link/shares).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "peer_interest_wire.h"

#define S(x) x, strlen(x)

struct got {
    char text[512]; /* "+filter|-filter|..." */
    int entries;
    int stop_after; /* 0: never */
};

static int collect(void *ctx, uint8_t op, const char *filter, size_t len)
{
    struct got *g = ctx;
    if (g->stop_after && g->entries == g->stop_after) return -1;
    strcat(g->text, op == PEER_INTEREST_ADD ? "+" : "-");
    strncat(g->text, filter, len);
    strcat(g->text, "|");
    g->entries++;
    return 0;
}

static void summary_of(struct interest_summary *s, const char *const *filters, size_t n)
{
    struct interest_set set;
    interest_set_init(&set);
    for (size_t i = 0; i < n; i++) assert_int_equal(interest_add(&set, S(filters[i])), 0);
    assert_int_equal(interest_summarise(&set, (struct interest_bound){0}, s), 0);
    interest_set_free(&set);
}

static void test_full_update_and_request_parse_back(void **state)
{
    (void)state;
    const char *const before[] = {"site/+/temp", "a b/line\nfeed"}, *const after[] = {"site/#"};
    struct interest_summary old, new_;
    summary_of(&old, before, 2);
    summary_of(&new_, after, 1);
    struct abuf buf = {0};
    struct peer_interest_header h;
    struct got g = {0};

    assert_int_equal(peer_interest_encode_full(&buf, 7, false, &old), 0);
    assert_int_equal(buf.len, PEER_INTEREST_HEADER_LEN + 3 + 13 + 3 + 11);
    assert_int_equal(peer_interest_parse(buf.data, buf.len, &h, collect, &g), 0);
    assert_int_equal(h.kind, PEER_INTEREST_FULL);
    assert_int_equal(h.generation, 7);
    assert_int_equal(h.flags, 0);
    assert_string_equal(g.text, "+a b/line\nfeed|+site/+/temp|"); /* sorted, spaces and LF kept */

    struct interest_diff d;
    assert_true(interest_summary_diff(&old, &new_, &d));
    abuf_reset(&buf);
    memset(&g, 0, sizeof g);
    assert_int_equal(peer_interest_encode_update(&buf, 0x01020304, true, &d), 0);
    assert_int_equal(buf.data[2], 1); /* big-endian generation */
    assert_int_equal(buf.data[5], 4);
    assert_int_equal(peer_interest_parse(buf.data, buf.len, &h, collect, &g), 0);
    assert_int_equal(h.kind, PEER_INTEREST_UPDATE);
    assert_int_equal(h.generation, 0x01020304);
    assert_int_equal(h.flags, PEER_INTEREST_CARRIED);
    assert_string_equal(g.text, "-a b/line\nfeed|-site/+/temp|+site/#|"); /* removes first */
    interest_diff_free(&d);

    struct interest_summary all = {.everything = true};
    abuf_reset(&buf);
    memset(&g, 0, sizeof g);
    assert_int_equal(peer_interest_encode_full(&buf, 8, true, &all), 0);
    assert_int_equal(buf.len, PEER_INTEREST_HEADER_LEN);
    assert_int_equal(peer_interest_parse(buf.data, buf.len, &h, collect, &g), 0);
    assert_int_equal(h.flags, PEER_INTEREST_EVERYTHING | PEER_INTEREST_CARRIED);
    assert_int_equal(g.entries, 0);

    abuf_reset(&buf);
    memset(&g, 0, sizeof g);
    assert_int_equal(peer_interest_encode_full(&buf, 9, true, &new_), 0);
    assert_int_equal(peer_interest_parse(buf.data, buf.len, &h, collect, &g), 0);
    assert_int_equal(h.flags, PEER_INTEREST_CARRIED);
    assert_string_equal(g.text, "+site/#|");

    abuf_reset(&buf);
    assert_int_equal(peer_interest_encode_request(&buf), 0);
    assert_int_equal(peer_interest_parse(buf.data, buf.len, &h, collect, &g), 0);
    assert_int_equal(h.kind, PEER_INTEREST_REQUEST);

    abuf_free(&buf);
    interest_summary_free(&old);
    interest_summary_free(&new_);
}

static int parse(const uint8_t *p, size_t len)
{
    struct peer_interest_header h;
    struct got g = {0};
    return peer_interest_parse(p, len, &h, collect, &g);
}

static void test_malformed_payloads_are_refused(void **state)
{
    (void)state;
    /* a valid full announcement of "a/b", then one byte changed at a time */
    const uint8_t good[] = {1, 0, 0, 0, 0, 1, 0, 1, 0, 3, 'a', '/', 'b'};
    assert_int_equal(parse(good, sizeof good), 0);
    uint8_t p[sizeof good];
#define BROKEN(offset, value)                                                                      \
    do {                                                                                           \
        memcpy(p, good, sizeof good);                                                              \
        p[offset] = value;                                                                         \
        assert_int_equal(parse(p, sizeof p), -1);                                                  \
    } while (0)
    BROKEN(0, 2);    /* version */
    BROKEN(1, 3);    /* kind */
    BROKEN(6, 0x04); /* an unknown flag */
    BROKEN(6, PEER_INTEREST_EVERYTHING); /* entries after everything */
    BROKEN(1, PEER_INTEREST_REQUEST);    /* entries in a request */
    BROKEN(7, 0x03);                     /* operation */
    BROKEN(7, PEER_INTEREST_REMOVE);     /* a remove in a full announcement */
    BROKEN(9, 4);                        /* the filter runs past the end */
    BROKEN(11, '#');                     /* "a#b": '#' inside a level */
    BROKEN(10, 0);                       /* NUL */
    BROKEN(10, 0xC0);                    /* not UTF-8 */
    BROKEN(9, 0);                        /* an empty filter, then stray bytes */
    for (size_t cut = 1; cut < sizeof good; cut++) /* every truncation but the header's end */
        if (cut != PEER_INTEREST_HEADER_LEN) assert_int_equal(parse(good, cut), -1);
    assert_int_equal(parse(good, PEER_INTEREST_HEADER_LEN), 0); /* a full with no filter */

    struct peer_interest_header h;
    struct got g = {.stop_after = 1};
    const uint8_t two[] = {1, 1, 0, 0, 0, 2, 0, 1, 0, 1, 'x', 2, 0, 1, 'y'};
    assert_int_equal(peer_interest_parse(two, sizeof two, &h, collect, &g), -1); /* fn stopped */
    assert_int_equal(g.entries, 1);
}

static int collect_share(void *ctx, const char *key, size_t len, uint8_t distance)
{
    struct got *g = ctx;
    if (g->stop_after && g->entries == g->stop_after) return -1;
    char d[8];
    snprintf(d, sizeof d, "%u ", distance);
    strcat(g->text, d);
    strncat(g->text, key, len);
    strcat(g->text, "|");
    g->entries++;
    return 0;
}

static void test_share_table_parses_back(void **state)
{
    (void)state;
    struct abuf out = {0};
    assert_int_equal(peer_share_encode_header(&out), 0);
    assert_int_equal(peer_share_encode_entry(&out, S("g/jobs/#"), 0), 0);
    assert_int_equal(peer_share_encode_entry(&out, S("h/a/+/b"), 3), 0);
    /* version, then distance, length, key per entry */
    static const uint8_t expected[] = {1, 0, 0, 8, 'g', '/', 'j', 'o', 'b', 's', '/', '#',
                                       3, 0, 7, 'h', '/', 'a', '/', '+', '/', 'b'};
    assert_int_equal(out.len, sizeof expected);
    assert_memory_equal(out.data, expected, sizeof expected);
    struct got g = {0};
    assert_int_equal(peer_share_parse(out.data, out.len, collect_share, &g), 0);
    assert_string_equal(g.text, "0 g/jobs/#|3 h/a/+/b|");
    /* an empty table: the version alone */
    static const uint8_t empty[] = {1};
    struct got none = {0};
    assert_int_equal(peer_share_parse(empty, sizeof empty, collect_share, &none), 0);
    assert_int_equal(none.entries, 0);
    /* the callback stops it */
    struct got stop = {.stop_after = 1};
    assert_int_equal(peer_share_parse(out.data, out.len, collect_share, &stop), -1);
    abuf_free(&out);
    assert_int_equal(peer_share_key_group_len(S("grp/a/b")), 3);
}

static void expect_share_refused(const uint8_t *p, size_t len)
{
    struct got g = {0};
    assert_int_equal(peer_share_parse(p, len, collect_share, &g), -1);
    assert_int_equal(g.entries, 0); /* checked whole before any entry is given */
}

static void test_malformed_share_tables_are_refused(void **state)
{
    (void)state;
    static const uint8_t empty[] = {0};
    expect_share_refused(empty, 0);
    static const uint8_t version[] = {2};
    expect_share_refused(version, sizeof version);
    static const uint8_t far[] = {1, 65, 0, 3, 'g', '/', 'a'}; /* past the maximum distance */
    expect_share_refused(far, sizeof far);
    static const uint8_t cut[] = {1, 0, 0, 9, 'g', '/', 'a'};
    expect_share_refused(cut, sizeof cut);
    static const uint8_t short_entry[] = {1, 0, 0};
    expect_share_refused(short_entry, sizeof short_entry);
    static const uint8_t no_filter[] = {1, 0, 0, 2, 'g', '/'};
    expect_share_refused(no_filter, sizeof no_filter);
    static const uint8_t no_group[] = {1, 0, 0, 2, '/', 'a'};
    expect_share_refused(no_group, sizeof no_group);
    static const uint8_t wild_group[] = {1, 0, 0, 3, '+', '/', 'a'};
    expect_share_refused(wild_group, sizeof wild_group);
    static const uint8_t bad_filter[] = {1, 0, 0, 5, 'g', '/', 'a', '#', 'b'};
    expect_share_refused(bad_filter, sizeof bad_filter);
    static const uint8_t bad_utf8[] = {1, 0, 0, 3, 'g', '/', 0xff};
    expect_share_refused(bad_utf8, sizeof bad_utf8);
    /* the second entry is not after the first: a table lists each key once, in order */
    static const uint8_t twice[] = {1, 0, 0, 3, 'g', '/', 'a', 1, 0, 3, 'g', '/', 'a'};
    expect_share_refused(twice, sizeof twice);
    static const uint8_t order[] = {1, 0, 0, 3, 'g', '/', 'b', 1, 0, 3, 'g', '/', 'a'};
    expect_share_refused(order, sizeof order);
    assert_false(peer_share_key_is_valid(S("g")));
    assert_true(peer_share_key_is_valid(S("g/#")));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_update_and_request_parse_back),
        cmocka_unit_test(test_malformed_payloads_are_refused),
        cmocka_unit_test(test_share_table_parses_back),
        cmocka_unit_test(test_malformed_share_tables_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
