/*
 * fuzz_packet.c: libFuzzer target for the lib/ codec. It runs every decoder (for MQTT 3.1,
 * 3.1.1 and 5.0) on arbitrary bytes, walks every list a decoder hands back, checks a few
 * invariants (a PUBLISH that decodes re-encodes to the same bytes; counts agree with
 * iteration), and exercises the topic and UTF-8 helpers. Crashes, sanitizer reports and
 * __builtin_trap() are the findings. It must not depend on the broker (src/).
 *
 * Build with clang (see README.md). Built with -DARBOR_FUZZ_STANDALONE it instead replays the
 * files named on its command line, so any compiler can run a corpus as a regression test.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "packet.h"
#include "topic.h"
#include "utf8.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) __builtin_trap();                                                             \
    } while (0)

static void walk_properties(const struct mqtt_properties *props)
{
    size_t pos = 0;
    struct wire_bytes name, value;
    uint32_t users = 0, ids = 0, id;
    while (mqtt_properties_next_user(props, &pos, &name, &value))
        users++;
    CHECK(users == props->user_property_count);
    pos = 0;
    while (mqtt_properties_next_subscription_id(props, &pos, &id))
        ids++;
    CHECK(ids == props->subscription_identifier_count);
    struct abuf fwd = {0};
    CHECK(mqtt_properties_copy_forwardable(props, &fwd) == 0);
    CHECK(fwd.len <= props->raw_len);
    abuf_free(&fwd);
}

/* A PUBLISH that decodes must encode back to the very same bytes. */
static void publish_round_trip(uint8_t version, uint8_t flags, const uint8_t *body, size_t len,
                               const struct mqtt_publish *p)
{
    struct mqtt_publish_out po = {.version = version,
                                  .qos = p->qos,
                                  .dup = p->dup,
                                  .retain = p->retain,
                                  .topic = (const char *)p->topic.data,
                                  .topic_len = p->topic.len,
                                  .packet_id = p->packet_id,
                                  .props = {p->props.raw, p->props.raw_len},
                                  .payload_len = p->payload_len};
    struct abuf out = {0};
    CHECK(mqtt_encode_publish(&out, &po, p->payload) == 0);
    CHECK(out.len == mqtt_publish_packet_size(&po));
    struct mqtt_fixed_header h;
    CHECK(mqtt_fixed_header_parse(out.data, out.len, &h) == WIRE_OK);
    CHECK(h.flags == flags);
    /* A non-minimal property length varint is legal input but re-encodes shorter. */
    if (h.remaining_length == len)
        CHECK(memcmp(out.data + h.header_len, body, len) == 0);
    else
        CHECK(h.remaining_length < len);
    abuf_free(&out);
}

static void fuzz_publish(uint8_t version, uint8_t flags, const uint8_t *body, size_t len)
{
    struct mqtt_publish p;
    if (mqtt_decode_publish(version, flags, body, len, &p) == 0) {
        CHECK(p.props.subscription_identifier_count == 0);
        walk_properties(&p.props);
    }
    if (mqtt_decode_publish_from_server(version, flags, body, len, &p) == 0) {
        walk_properties(&p.props);
        publish_round_trip(version, flags, body, len, &p);
    }
}

static void fuzz_lists(uint8_t version, const uint8_t *body, size_t len)
{
    struct mqtt_subscribe sub;
    if (mqtt_decode_subscribe(version, body, len, &sub) == 0) {
        walk_properties(&sub.props);
        size_t pos = 0;
        uint32_t n = 0;
        struct mqtt_subscription_request req;
        while (mqtt_subscribe_next(&sub, &pos, &req)) {
            CHECK(req.qos <= 2 && req.retain_handling <= 2);
            bool shared;
            const char *group, *inner;
            size_t group_len, inner_len;
            const char *filter = (const char *)req.filter.data;
            if (topic_parse_shared(filter, req.filter.len, &shared, &group, &group_len, &inner,
                                   &inner_len) == 0 &&
                shared)
                (void)topic_filter_is_valid(inner, inner_len);
            (void)topic_filter_is_valid(filter, req.filter.len);
            n++;
        }
        CHECK(n == sub.count && n > 0);
    }
    struct mqtt_unsubscribe unsub;
    if (mqtt_decode_unsubscribe(version, body, len, &unsub) == 0) {
        walk_properties(&unsub.props);
        size_t pos = 0;
        uint32_t n = 0;
        struct wire_bytes filter;
        while (mqtt_unsubscribe_next(&unsub, &pos, &filter))
            n++;
        CHECK(n == unsub.count && n > 0);
    }
}

static void fuzz_other_decoders(uint8_t version, const uint8_t *body, size_t len)
{
    struct mqtt_connect connect;
    if (mqtt_decode_connect(body, len, &connect) == 0) {
        walk_properties(&connect.props);
        walk_properties(&connect.will_props);
    }
    struct mqtt_connack connack;
    if (mqtt_decode_connack(version, body, len, &connack) == 0) walk_properties(&connack.props);
    struct mqtt_ack ack;
    for (uint8_t type = MQTT_PUBACK; type <= MQTT_PUBCOMP; type++)
        if (mqtt_decode_ack(version, type, body, len, &ack) == 0) walk_properties(&ack.props);
    struct mqtt_suback suback;
    if (mqtt_decode_suback(version, MQTT_SUBACK, body, len, &suback) == 0) CHECK(suback.count > 0);
    (void)mqtt_decode_suback(version, MQTT_UNSUBACK, body, len, &suback);
    struct mqtt_disconnect disconnect;
    (void)mqtt_decode_disconnect(version, MQTT_DISCONNECT, body, len, &disconnect);
    (void)mqtt_decode_disconnect(version, MQTT_AUTH, body, len, &disconnect);
}

/* Topic helpers: split the input at its first byte's value into a filter and a topic. */
static void fuzz_topics(const uint8_t *data, size_t size)
{
    (void)utf8_is_valid_mqtt(data, size);
    if (size < 1) return;
    size_t split = data[0] < size ? data[0] : size - 1;
    const char *filter = (const char *)data + 1;
    size_t filter_len = split > 0 ? split - 1 : 0;
    const char *topic = (const char *)data + 1 + filter_len;
    size_t topic_len = size - 1 - filter_len;
    bool filter_ok = topic_filter_is_valid(filter, filter_len);
    bool topic_ok = topic_name_is_valid(topic, topic_len);
    if (filter_ok && topic_ok) {
        bool matched = topic_matches(filter, filter_len, topic, topic_len);
        /* a filter equal to the topic always matches it */
        CHECK(topic_matches(topic, topic_len, topic, topic_len));
        (void)matched;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Whole input as a framed packet: the fixed header decides type and flags. */
    struct mqtt_fixed_header h;
    if (mqtt_fixed_header_parse(data, size, &h) == WIRE_OK) {
        size_t body_len = size - h.header_len;
        if (h.remaining_length < body_len) body_len = h.remaining_length;
        const uint8_t *body = data + h.header_len;
        for (uint8_t version = MQTT_V31; version <= MQTT_V5; version++) {
            if (h.type == MQTT_PUBLISH && mqtt_fixed_header_flags_valid(h.type, h.flags))
                fuzz_publish(version, h.flags, body, body_len);
        }
    }
    /* Whole input as a body for every decoder and version. */
    for (uint8_t version = MQTT_V31; version <= MQTT_V5; version++) {
        for (uint8_t flags = 0; flags < 16; flags += 2)
            if (mqtt_fixed_header_flags_valid(MQTT_PUBLISH, flags))
                fuzz_publish(version, flags, data, size);
        fuzz_lists(version, data, size);
        fuzz_other_decoders(version, data, size);
    }
    fuzz_topics(data, size);
    return 0;
}

#ifdef ARBOR_FUZZ_STANDALONE
#include "standalone_main.h"
#endif
