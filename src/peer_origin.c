/*
 * peer_origin.c: the origin of a message between peers and the duplicate window, as pure
 * functions (unit-tested in test/unit/test_peer_origin.c). On the wire the origin is the
 * user property "mqtt-st-origin" = "<identity> <incarnation: 16 hex digits> <sequence>
 * <origin wall-clock ms> <QoS it was published with>", followed by " r" when the message is a
 * retained message offered for reconciliation (docs/mqtt-st-protocol.md, section 7.1).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "peer_net.h"

size_t peer_origin_format(const struct message *msg, bool retained_sync, char *buf, size_t len)
{
    char id[STP_BROKER_ID_STRLEN];
    const struct message_origin *o = &msg->origin;
    stp_broker_id_format(&o->broker, id, sizeof id);
    int n = snprintf(buf, len, "%s %016" PRIx64 " %" PRIu64 " %" PRId64 " %u%s", id,
                     o->incarnation, o->sequence, o->time_ms, (unsigned)msg->qos,
                     retained_sync ? " r" : "");
    return n < 0 ? 0 : (size_t)n >= len ? len - 1 : (size_t)n;
}

bool peer_origin_parse(struct wire_bytes value, struct message_origin *o)
{
    char text[160], id[STP_BROKER_ID_STRLEN], flag[4] = "";
    if (value.len >= sizeof text) return false;
    memcpy(text, value.data, value.len);
    text[value.len] = '\0';
    int consumed = 0, after_flag = 0;
    unsigned qos = 3;
    if (sscanf(text, "%55s %16" SCNx64 " %" SCNu64 " %" SCNd64 " %1u%n", id, &o->incarnation,
               &o->sequence, &o->time_ms, &qos, &consumed) != 5 || qos > 2)
        return false;
    o->qos = (uint8_t)qos;
    const char *rest = text + consumed;
    if (*rest != '\0') {
        if (sscanf(rest, " %3s%n", flag, &after_flag) != 1 || strcmp(flag, "r") != 0 ||
            rest[after_flag] != '\0')
            return false;
    }
    o->retained_sync = flag[0] == 'r';
    o->stamped = true;
    return o->sequence > 0 && peer_parse_identity(id, &o->broker);
}

bool peer_window_check(struct peer_window *w, uint64_t seq)
{
    if (seq > w->highest) {
        uint64_t shift = seq - w->highest;
        if (shift >= PEER_WINDOW) {
            memset(w->bits, 0, sizeof w->bits);
        } else {
            for (uint64_t s = w->highest + 1; s < seq; s++) /* numbers skipped: not seen */
                w->bits[(s % PEER_WINDOW) / 64] &= ~(UINT64_C(1) << (s % 64));
        }
        w->highest = seq;
        w->bits[(seq % PEER_WINDOW) / 64] |= UINT64_C(1) << (seq % 64);
        return false;
    }
    if (w->highest - seq >= PEER_WINDOW) return true;
    uint64_t *word = &w->bits[(seq % PEER_WINDOW) / 64];
    uint64_t bit = UINT64_C(1) << (seq % 64);
    if (*word & bit) return true;
    *word |= bit;
    return false;
}
