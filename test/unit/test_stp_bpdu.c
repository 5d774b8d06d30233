/*
 * test_stp_bpdu.c: unit tests for stp/bpdu.c, the MQTT-ST BPDU codec: the exact bytes of the
 * layout in docs/mqtt-st-protocol.md, round trips for every identity family and flag, and
 * every malformed case (truncation at each length, unknown versions, reserved bits, bad
 * identities, inconsistent fields, trailing bytes). Truncated inputs are copied into
 * exact-size heap buffers so the sanitizer build catches any read out of bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bpdu.h"

static struct stp_broker_id ipv4_id(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint16_t port)
{
    struct stp_broker_id id;
    uint8_t addr[4] = {a, b, c, d};
    stp_broker_id_from_ipv4(&id, addr, port);
    return id;
}

static struct stp_broker_id ipv6_id(uint8_t first, uint8_t last, uint16_t port)
{
    struct stp_broker_id id;
    uint8_t addr[16] = {first, 0x01, 0x0d, 0xb8};
    addr[15] = last;
    stp_broker_id_from_ipv6(&id, addr, port);
    return id;
}

static struct stp_bpdu sample_bpdu(struct stp_broker_id root, struct stp_broker_id sender)
{
    struct stp_bpdu bpdu = {
        .topology_change = true,
        .topology_change_ack = false,
        .sender_role = STP_ROLE_DESIGNATED,
        .message_age = 3,
        .epoch = 0x01020304,
        .priority = {.root_capability = 0x00002710,
                     .root_id = root,
                     .root_cost_us = 0x0000c350,
                     .sender_capability = 0x00001388,
                     .sender_id = sender},
    };
    return bpdu;
}

static void assert_bpdu_equal(const struct stp_bpdu *a, const struct stp_bpdu *b)
{
    assert_int_equal(a->topology_change, b->topology_change);
    assert_int_equal(a->topology_change_ack, b->topology_change_ack);
    assert_int_equal(a->sender_role, b->sender_role);
    assert_int_equal(a->message_age, b->message_age);
    assert_int_equal(a->epoch, b->epoch);
    assert_true(stp_priority_equal(&a->priority, &b->priority));
}

/* Decodes from an exact-size heap copy so any overread is caught by ASan. */
static int decode_exact(const uint8_t *data, size_t len, struct stp_bpdu *out)
{
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len) memcpy(copy, data, len);
    int status = stp_bpdu_decode(copy, len, out);
    free(copy);
    return status;
}

static size_t encode(const struct stp_bpdu *bpdu, uint8_t *out)
{
    size_t len = 0;
    assert_int_equal(stp_bpdu_encode(bpdu, out, STP_BPDU_MAX_LEN, &len), STP_BPDU_OK);
    assert_int_equal(len, stp_bpdu_encoded_len(bpdu));
    return len;
}

static void test_ipv4_layout_is_exact(void **state)
{
    (void)state;
    struct stp_bpdu bpdu = sample_bpdu(ipv4_id(10, 0, 0, 1, 1883), ipv4_id(192, 168, 1, 7, 1884));
    static const uint8_t expected[] = {
        0x01,                               /* version */
        0xA0,                               /* TC | role designated (10 << 4) */
        0x03,                               /* message age */
        0x01, 0x02, 0x03, 0x04,             /* epoch */
        0x00, 0x00, 0x27, 0x10,             /* root capability 10000 */
        0x00, 0x00, 0xC3, 0x50,             /* root path cost 50000 us */
        0x00, 0x00, 0x13, 0x88,             /* sender capability 5000 */
        10,   0,    0,    1,    0x07, 0x5B, /* root 10.0.0.1:1883 */
        192,  168,  1,    7,    0x07, 0x5C, /* sender 192.168.1.7:1884 */
    };
    uint8_t out[STP_BPDU_MAX_LEN];
    size_t len = encode(&bpdu, out);
    assert_int_equal(len, STP_BPDU_MIN_LEN);
    assert_int_equal(len, sizeof expected);
    assert_memory_equal(out, expected, sizeof expected);
}

static void test_ipv6_layout_is_exact(void **state)
{
    (void)state;
    struct stp_bpdu bpdu = sample_bpdu(ipv6_id(0x20, 0x01, 1883), ipv6_id(0xfd, 0x02, 8883));
    bpdu.topology_change = false;
    bpdu.topology_change_ack = true;
    bpdu.sender_role = STP_ROLE_BLOCKED;
    uint8_t out[STP_BPDU_MAX_LEN];
    size_t len = encode(&bpdu, out);
    assert_int_equal(len, STP_BPDU_MAX_LEN);
    assert_int_equal(out[1], 0x40 | 0x30 | 0x08 | 0x04); /* TCA, blocked, both IPv6 */
    assert_int_equal(out[19], 0x20);                     /* root address starts at 19 */
    assert_int_equal(out[34], 0x01);                     /* ... and ends at 34 */
    assert_int_equal(out[35] << 8 | out[36], 1883);      /* root port */
    assert_int_equal(out[37], 0xfd);                     /* sender address */
    assert_int_equal(out[53] << 8 | out[54], 8883);      /* sender port */
}

static void round_trip(struct stp_broker_id root, struct stp_broker_id sender, size_t want_len)
{
    struct stp_bpdu bpdu = sample_bpdu(root, sender), decoded;
    uint8_t out[STP_BPDU_MAX_LEN];
    size_t len = encode(&bpdu, out);
    assert_int_equal(len, want_len);
    assert_int_equal(decode_exact(out, len, &decoded), STP_BPDU_OK);
    assert_bpdu_equal(&bpdu, &decoded);
}

static void test_round_trip_every_family(void **state)
{
    (void)state;
    round_trip(ipv4_id(10, 0, 0, 1, 1883), ipv4_id(10, 0, 0, 2, 1883), 31);
    round_trip(ipv6_id(0x20, 1, 1883), ipv4_id(10, 0, 0, 2, 1883), 43);
    round_trip(ipv4_id(10, 0, 0, 1, 1883), ipv6_id(0x20, 2, 1883), 43);
    round_trip(ipv6_id(0x20, 1, 1883), ipv6_id(0x20, 2, 65535), 55);
}

static void test_round_trip_every_flag_and_role(void **state)
{
    (void)state;
    enum stp_role roles[] = {STP_ROLE_ROOT, STP_ROLE_DESIGNATED, STP_ROLE_BLOCKED};
    for (int tc = 0; tc < 2; tc++)
        for (int tca = 0; tca < 2; tca++)
            for (int r = 0; r < 3; r++) {
                struct stp_bpdu bpdu = sample_bpdu(ipv4_id(10, 0, 0, 1, 1883),
                                                   ipv4_id(10, 0, 0, 2, 1883)),
                                decoded;
                bpdu.topology_change = tc;
                bpdu.topology_change_ack = tca;
                bpdu.sender_role = roles[r];
                bpdu.epoch = UINT32_MAX;
                bpdu.message_age = 255;
                bpdu.priority.root_cost_us = UINT32_MAX;
                uint8_t out[STP_BPDU_MAX_LEN];
                size_t len = encode(&bpdu, out);
                assert_int_equal(decode_exact(out, len, &decoded), STP_BPDU_OK);
                assert_bpdu_equal(&bpdu, &decoded);
            }
}

static void test_root_advertisement_round_trip(void **state)
{
    (void)state;
    struct stp_broker_id self = ipv4_id(10, 0, 0, 9, 1883);
    struct stp_bpdu bpdu = sample_bpdu(self, self), decoded;
    bpdu.message_age = 0;
    bpdu.priority.root_cost_us = 0;
    bpdu.priority.sender_capability = bpdu.priority.root_capability;
    uint8_t out[STP_BPDU_MAX_LEN];
    size_t len = encode(&bpdu, out);
    assert_int_equal(decode_exact(out, len, &decoded), STP_BPDU_OK);
    assert_bpdu_equal(&bpdu, &decoded);
}

static void test_every_truncation_is_rejected(void **state)
{
    (void)state;
    struct stp_bpdu decoded;
    struct stp_broker_id ids[2][2] = {
        {ipv4_id(10, 0, 0, 1, 1883), ipv4_id(10, 0, 0, 2, 1883)},
        {ipv6_id(0x20, 1, 1883), ipv6_id(0x20, 2, 1883)},
    };
    for (int family = 0; family < 2; family++) {
        struct stp_bpdu bpdu = sample_bpdu(ids[family][0], ids[family][1]);
        uint8_t out[STP_BPDU_MAX_LEN];
        size_t len = encode(&bpdu, out);
        for (size_t cut = 0; cut < len; cut++)
            assert_int_equal(decode_exact(out, cut, &decoded), STP_BPDU_TRUNCATED);
    }
    assert_int_equal(stp_bpdu_decode(NULL, 0, &decoded), STP_BPDU_TRUNCATED);
}

static void test_trailing_bytes_are_rejected(void **state)
{
    (void)state;
    struct stp_bpdu bpdu = sample_bpdu(ipv4_id(10, 0, 0, 1, 1883), ipv4_id(10, 0, 0, 2, 1883));
    uint8_t out[STP_BPDU_MAX_LEN + 1];
    size_t len = encode(&bpdu, out);
    out[len] = 0;
    assert_int_equal(decode_exact(out, len + 1, &bpdu), STP_BPDU_TRAILING_BYTES);
}

static void test_unknown_versions_are_rejected(void **state)
{
    (void)state;
    struct stp_bpdu bpdu = sample_bpdu(ipv4_id(10, 0, 0, 1, 1883), ipv4_id(10, 0, 0, 2, 1883));
    uint8_t out[STP_BPDU_MAX_LEN];
    size_t len = encode(&bpdu, out);
    const uint8_t versions[] = {0x00, 0x02, 0x7f, 0x80, 0xff};
    for (size_t i = 0; i < sizeof versions; i++) {
        out[0] = versions[i];
        assert_int_equal(decode_exact(out, len, &bpdu), STP_BPDU_BAD_VERSION);
        /* a future version may be longer or shorter: the version is judged first */
        assert_int_equal(decode_exact(out, 1, &bpdu), STP_BPDU_BAD_VERSION);
    }
}

static void test_bad_flags_are_rejected(void **state)
{
    (void)state;
    struct stp_bpdu bpdu = sample_bpdu(ipv4_id(10, 0, 0, 1, 1883), ipv4_id(10, 0, 0, 2, 1883));
    uint8_t out[STP_BPDU_MAX_LEN], copy[STP_BPDU_MAX_LEN];
    size_t len = encode(&bpdu, out);
    const uint8_t reserved[] = {0x01, 0x02};
    for (size_t i = 0; i < sizeof reserved; i++) {
        memcpy(copy, out, len);
        copy[1] |= reserved[i];
        assert_int_equal(decode_exact(copy, len, &bpdu), STP_BPDU_BAD_FLAGS);
    }
    memcpy(copy, out, len);
    copy[1] &= (uint8_t)~0x30; /* role 00 */
    assert_int_equal(decode_exact(copy, len, &bpdu), STP_BPDU_BAD_FLAGS);
}

static void test_family_flag_changes_expected_length(void **state)
{
    (void)state;
    struct stp_bpdu bpdu = sample_bpdu(ipv4_id(10, 0, 0, 1, 1883), ipv4_id(10, 0, 0, 2, 1883));
    uint8_t out[STP_BPDU_MAX_LEN];
    size_t len = encode(&bpdu, out);
    out[1] |= 0x08; /* claims an IPv6 root: 12 more bytes needed than present */
    assert_int_equal(decode_exact(out, len, &bpdu), STP_BPDU_TRUNCATED);
}

static void expect_bad_id(struct stp_broker_id root, struct stp_broker_id sender, int patch_at,
                          const uint8_t *patch, size_t patch_len)
{
    struct stp_bpdu bpdu = sample_bpdu(root, sender), decoded;
    uint8_t out[STP_BPDU_MAX_LEN];
    size_t len = encode(&bpdu, out);
    if (patch != NULL) memcpy(out + patch_at, patch, patch_len);
    assert_int_equal(decode_exact(out, len, &decoded), STP_BPDU_BAD_ID);
}

static void test_bad_identities_are_rejected(void **state)
{
    (void)state;
    struct stp_broker_id good = ipv4_id(10, 0, 0, 2, 1883);
    expect_bad_id(ipv4_id(10, 0, 0, 1, 0), good, 0, NULL, 0);   /* port 0 */
    expect_bad_id(good, ipv4_id(0, 0, 0, 0, 1883), 0, NULL, 0); /* 0.0.0.0 */
    struct stp_broker_id unspecified6;
    uint8_t zero[16] = {0};
    stp_broker_id_from_ipv6(&unspecified6, zero, 1883);
    expect_bad_id(unspecified6, good, 0, NULL, 0); /* :: */
    /* an IPv4-mapped address spelled out in the 16-byte form has a shorter canonical form */
    static const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
    expect_bad_id(ipv6_id(0x20, 1, 1883), good, 19, mapped, sizeof mapped);
}

static void expect_inconsistent(struct stp_bpdu bpdu)
{
    uint8_t out[STP_BPDU_MAX_LEN];
    size_t len = encode(&bpdu, out);
    assert_int_equal(decode_exact(out, len, &bpdu), STP_BPDU_INCONSISTENT);
}

static void test_inconsistent_fields_are_rejected(void **state)
{
    (void)state;
    struct stp_broker_id self = ipv4_id(10, 0, 0, 9, 1883), other = ipv4_id(10, 0, 0, 8, 1883);
    struct stp_bpdu root = sample_bpdu(self, self);
    root.message_age = 0;
    root.priority.root_cost_us = 0;
    root.priority.sender_capability = root.priority.root_capability;

    struct stp_bpdu bad = root;
    bad.priority.root_cost_us = 1; /* the root is at cost 0 from itself */
    expect_inconsistent(bad);
    bad = root;
    bad.message_age = 1; /* ... and 0 hops */
    expect_inconsistent(bad);
    bad = root;
    bad.priority.sender_capability++; /* one broker, one capability */
    expect_inconsistent(bad);
    bad = root;
    bad.sender_role = STP_ROLE_ROOT; /* the root has no root link */
    expect_inconsistent(bad);

    struct stp_bpdu relayed = sample_bpdu(other, self);
    relayed.priority.root_cost_us = 0; /* another broker cannot be at cost 0 */
    expect_inconsistent(relayed);
    relayed = sample_bpdu(other, self);
    relayed.message_age = 0; /* ... nor 0 hops away */
    expect_inconsistent(relayed);
}

static void test_encode_needs_room(void **state)
{
    (void)state;
    struct stp_bpdu bpdu = sample_bpdu(ipv4_id(10, 0, 0, 1, 1883), ipv4_id(10, 0, 0, 2, 1883));
    uint8_t out[STP_BPDU_MAX_LEN];
    size_t len = 0;
    assert_int_equal(stp_bpdu_encode(&bpdu, out, STP_BPDU_MIN_LEN - 1, &len), STP_BPDU_NO_SPACE);
    assert_int_equal(stp_bpdu_encode(&bpdu, out, STP_BPDU_MIN_LEN, &len), STP_BPDU_OK);
}

/* Random bytes never crash the decoder, and whatever it accepts re-encodes to the same bytes
 * (the encoding is canonical: one BPDU, one byte string). */
static void test_random_input_is_safe_and_canonical(void **state)
{
    (void)state;
    uint64_t seed = 0x2545F4914F6CDD1Dull;
    uint8_t buf[STP_BPDU_MAX_LEN + 4], again[STP_BPDU_MAX_LEN];
    unsigned accepted = 0;
    for (int i = 0; i < 200000; i++) {
        size_t len = (size_t)(i % (int)sizeof buf);
        for (size_t j = 0; j < len; j++) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            buf[j] = (uint8_t)seed;
        }
        if (len > 0) buf[0] = 0x01;  /* mostly valid version, to get past the first check */
        if (len > 1) buf[1] &= 0xfc; /* mostly valid flags */
        struct stp_bpdu bpdu;
        if (decode_exact(buf, len, &bpdu) != STP_BPDU_OK) continue;
        size_t out_len = 0;
        assert_int_equal(stp_bpdu_encode(&bpdu, again, sizeof again, &out_len), STP_BPDU_OK);
        assert_int_equal(out_len, len);
        assert_memory_equal(again, buf, len);
        accepted++;
    }
    assert_true(accepted > 0);
}

static void test_status_text(void **state)
{
    (void)state;
    assert_string_equal(stp_bpdu_status_text(STP_BPDU_OK), "ok");
    assert_string_equal(stp_bpdu_status_text(STP_BPDU_BAD_VERSION), "unknown version");
    assert_string_equal(stp_bpdu_status_text(12345), "unknown status");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ipv4_layout_is_exact),
        cmocka_unit_test(test_ipv6_layout_is_exact),
        cmocka_unit_test(test_round_trip_every_family),
        cmocka_unit_test(test_round_trip_every_flag_and_role),
        cmocka_unit_test(test_root_advertisement_round_trip),
        cmocka_unit_test(test_every_truncation_is_rejected),
        cmocka_unit_test(test_trailing_bytes_are_rejected),
        cmocka_unit_test(test_unknown_versions_are_rejected),
        cmocka_unit_test(test_bad_flags_are_rejected),
        cmocka_unit_test(test_family_flag_changes_expected_length),
        cmocka_unit_test(test_bad_identities_are_rejected),
        cmocka_unit_test(test_inconsistent_fields_are_rejected),
        cmocka_unit_test(test_encode_needs_room),
        cmocka_unit_test(test_random_input_is_safe_and_canonical),
        cmocka_unit_test(test_status_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
