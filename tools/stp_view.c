/*
 * stp_view.c: $SYS/broker/stp/ values -> one broker's view of the spanning tree (stp_view.h).
 * It knows the topic names and nothing about how they arrive or how they are shown.
 */
#include <stdlib.h>
#include <string.h>

#include "identity.h"
#include "stp_view.h"

const struct stp_view_field stp_view_broker_fields[SV_BROKER_FIELDS] = {
    [SV_ID] = {"id", "id", STP_VIEW_TEXT},
    [SV_CAPABILITY] = {"capability", "capability", STP_VIEW_NUMBER},
    [SV_ROOT_ID] = {"root/id", "root id", STP_VIEW_TEXT},
    [SV_ROOT_CAPABILITY] = {"root/capability", "root capability", STP_VIEW_NUMBER},
    [SV_ROOT_COST] = {"root/cost_us", "root path cost (us)", STP_VIEW_NUMBER},
    [SV_ROOT_LINK] = {"root/link", "root link", STP_VIEW_TEXT},
    [SV_HOPS] = {"hops", "hops", STP_VIEW_NUMBER},
    [SV_EPOCH] = {"epoch", "epoch", STP_VIEW_NUMBER},
    [SV_TOPOLOGY_CHANGES] = {"topology_changes", "topology changes", STP_VIEW_NUMBER},
    /* flooding on every live link after a change (docs/mqtt-st-protocol.md 7.3) */
    [SV_SETTLING] = {"settling", "settling", STP_VIEW_FLAG},
    [SV_BPDUS_SENT] = {"bpdus/sent", "BPDUs sent", STP_VIEW_NUMBER},
    [SV_BPDUS_RECEIVED] = {"bpdus/received", "BPDUs received", STP_VIEW_NUMBER},
    [SV_BPDUS_REJECTED] = {"bpdus/rejected", "BPDUs rejected", STP_VIEW_NUMBER},
    [SV_MESSAGES_FORWARDED] = {"messages/forwarded", "messages forwarded", STP_VIEW_NUMBER},
    [SV_MESSAGES_RECEIVED] = {"messages/received", "messages received", STP_VIEW_NUMBER},
    [SV_MESSAGES_DUPLICATES] = {"messages/duplicates", "messages duplicates", STP_VIEW_NUMBER},
    [SV_MESSAGES_DISCARDED] = {"messages/discarded", "messages discarded", STP_VIEW_NUMBER},
    [SV_MESSAGES_OFF_TREE] = {"messages/off_tree", "messages off tree", STP_VIEW_NUMBER},
    [SV_MESSAGES_RESYNCED] = {"messages/resynced", "messages resynced", STP_VIEW_NUMBER},
    [SV_MESSAGES_LOST] = {"messages/lost", "messages lost", STP_VIEW_NUMBER},
    [SV_MESSAGES_DROPPED] = {"messages/dropped", "messages dropped", STP_VIEW_NUMBER},
    /* interest routing: left out on a link, and the notices that told so */
    [SV_MESSAGES_SKIPPED] = {"messages/skipped", "messages skipped", STP_VIEW_NUMBER},
    [SV_MESSAGES_SKIP_NOTICES] = {"messages/skip_notices", "skip notices", STP_VIEW_NUMBER},
};

const struct stp_view_field stp_view_peer_fields[SV_PEER_FIELDS] = {
    [SV_PEER_STATE] = {"state", "state", STP_VIEW_TEXT},
    [SV_PEER_ROLE] = {"role", "role", STP_VIEW_TEXT},
    [SV_PEER_FORWARDING] = {"forwarding", "forwarding", STP_VIEW_FLAG},
    /* interest routing: what the neighbour wants, what this broker told it */
    [SV_PEER_WANTS] = {"interest/wanted", "wants", STP_VIEW_TEXT},
    [SV_PEER_TOLD] = {"interest/announced", "told", STP_VIEW_TEXT},
    [SV_PEER_SRTT] = {"srtt_us", "srtt_us", STP_VIEW_NUMBER},
    [SV_PEER_COST] = {"cost_us", "cost_us", STP_VIEW_NUMBER},
    [SV_PEER_BPDUS_SENT] = {"bpdus/sent", "bpdus_sent", STP_VIEW_NUMBER},
    [SV_PEER_BPDUS_RECEIVED] = {"bpdus/received", "bpdus_received", STP_VIEW_NUMBER},
    [SV_PEER_RESYNC_MESSAGES] = {"resync/messages", "resync_messages", STP_VIEW_NUMBER},
    [SV_PEER_RESYNC_BYTES] = {"resync/bytes", "resync_bytes", STP_VIEW_NUMBER},
    [SV_PEER_WANTED_FILTERS] = {"interest/filters", "wants these filters", STP_VIEW_LIST},
    /* shared groups across the tree: "<distance> <group>/<filter>" as it announced them */
    [SV_PEER_SHARES] = {"shares", "shared groups (hops to a member, group/filter)",
                        STP_VIEW_LIST},
};

#define PEERS_PART "peers/"

void stp_view_init(struct stp_view *v)
{
    memset(v, 0, sizeof *v);
}

static void peer_free(struct stp_view_peer *p)
{
    free(p->id);
    for (size_t i = 0; i < SV_PEER_FIELDS; i++) free(p->values[i]);
}

void stp_view_free(struct stp_view *v)
{
    for (size_t i = 0; i < SV_BROKER_FIELDS; i++) free(v->values[i]);
    for (size_t i = 0; i < v->peer_count; i++) peer_free(&v->peers[i]);
    free(v->peers);
    stp_view_init(v);
}

static int copy_text(char **dst, const char *src)
{
    *dst = NULL;
    if (!src) return 0;
    *dst = strdup(src);
    return *dst ? 0 : -1;
}

int stp_view_copy(struct stp_view *dst, const struct stp_view *src)
{
    stp_view_free(dst);
    int rc = 0;
    for (size_t i = 0; i < SV_BROKER_FIELDS; i++) rc |= copy_text(&dst->values[i], src->values[i]);
    if (src->peer_count) {
        dst->peers = calloc(src->peer_count, sizeof *dst->peers);
        if (!dst->peers) rc = -1;
    }
    for (size_t k = 0; dst->peers && k < src->peer_count; k++) {
        dst->peer_count++;
        rc |= copy_text(&dst->peers[k].id, src->peers[k].id);
        for (size_t i = 0; i < SV_PEER_FIELDS; i++)
            rc |= copy_text(&dst->peers[k].values[i], src->peers[k].values[i]);
    }
    dst->peer_cap = dst->peer_count;
    if (rc != 0) stp_view_free(dst);
    return rc ? -1 : 0;
}

/* The index of the field named `name` (len bytes) in a table, or -1. */
static int field_index(const struct stp_view_field *fields, size_t count, const char *name,
                       size_t len)
{
    for (size_t i = 0; i < count; i++)
        if (strlen(fields[i].topic) == len && memcmp(fields[i].topic, name, len) == 0)
            return (int)i;
    return -1;
}

/* Replaces *slot with the value (NULL when empty). */
static int set_value(char **slot, const void *payload, size_t len)
{
    char *value = NULL;
    if (len > 0) {
        value = strndup(payload, len);
        if (!value) return -1;
    }
    free(*slot);
    *slot = value;
    return 1;
}

static size_t peer_position(const struct stp_view *v, const char *id, bool *found)
{
    size_t lo = 0, hi = v->peer_count;
    *found = false;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int cmp = stp_identity_compare(v->peers[mid].id, id);
        if (cmp == 0) {
            *found = true;
            return mid;
        }
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Inserts a peer named id (taking it over) at position at. */
static int peer_insert(struct stp_view *v, size_t at, char *id)
{
    if (v->peer_count == v->peer_cap) {
        size_t cap = v->peer_cap ? v->peer_cap * 2 : 8;
        struct stp_view_peer *grown = realloc(v->peers, cap * sizeof *grown);
        if (!grown) return -1;
        v->peers = grown;
        v->peer_cap = cap;
    }
    memmove(&v->peers[at + 1], &v->peers[at], (v->peer_count - at) * sizeof *v->peers);
    memset(&v->peers[at], 0, sizeof *v->peers);
    v->peers[at].id = id;
    v->peer_count++;
    return 0;
}

static void peer_remove_if_empty(struct stp_view *v, size_t at)
{
    for (size_t i = 0; i < SV_PEER_FIELDS; i++)
        if (v->peers[at].values[i]) return;
    peer_free(&v->peers[at]);
    memmove(&v->peers[at], &v->peers[at + 1], (v->peer_count - at - 1) * sizeof *v->peers);
    v->peer_count--;
}

/* rest: "<id>/<field>" below peers/. */
static int apply_peer(struct stp_view *v, const char *rest, size_t len, const void *payload,
                      size_t payload_len)
{
    const char *slash = memchr(rest, '/', len);
    if (!slash || slash == rest) return 0;
    size_t id_len = (size_t)(slash - rest);
    int f = field_index(stp_view_peer_fields, SV_PEER_FIELDS, slash + 1, len - id_len - 1);
    if (f < 0 || memchr(rest, '\0', id_len)) return 0;
    char *id = strndup(rest, id_len);
    if (!id) return -1;
    bool found;
    size_t at = peer_position(v, id, &found);
    if (found) {
        free(id);
    } else if (payload_len == 0) {
        free(id); /* clearing what is not there */
        return 1;
    } else if (peer_insert(v, at, id) != 0) {
        free(id);
        return -1;
    }
    int rc = set_value(&v->peers[at].values[f], payload, payload_len);
    if (rc > 0) peer_remove_if_empty(v, at);
    return rc;
}

int stp_view_apply(struct stp_view *v, const char *topic, size_t topic_len, const void *payload,
                   size_t payload_len)
{
    size_t prefix = strlen(STP_SYS_PREFIX);
    if (topic_len <= prefix || memcmp(topic, STP_SYS_PREFIX, prefix) != 0) return 0;
    const char *rest = topic + prefix;
    size_t len = topic_len - prefix;
    size_t peers = strlen(PEERS_PART);
    if (len > peers && memcmp(rest, PEERS_PART, peers) == 0)
        return apply_peer(v, rest + peers, len - peers, payload, payload_len);
    int f = field_index(stp_view_broker_fields, SV_BROKER_FIELDS, rest, len);
    if (f < 0) return 0;
    return set_value(&v->values[f], payload, payload_len);
}

bool stp_view_has_stp(const struct stp_view *v)
{
    return v->values[SV_ID] != NULL;
}

bool stp_view_is_root(const struct stp_view *v)
{
    const char *id = v->values[SV_ID], *root = v->values[SV_ROOT_ID];
    return id && root && strcmp(id, root) == 0;
}

const char *stp_view_get(const struct stp_view *v, enum stp_view_broker_field f)
{
    return v->values[f];
}

bool stp_view_parse_u64(const char *text, uint64_t *out)
{
    if (!text || !*text) return false;
    uint64_t value = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9') return false;
        unsigned digit = (unsigned)(*p - '0');
        if (value > (UINT64_MAX - digit) / 10) return false;
        value = value * 10 + digit;
    }
    *out = value;
    return true;
}

bool stp_view_number(const struct stp_view *v, enum stp_view_broker_field f, uint64_t *out)
{
    return stp_view_parse_u64(v->values[f], out);
}

const struct stp_view_peer *stp_view_peer_find(const struct stp_view *v, const char *id)
{
    bool found;
    size_t at = peer_position(v, id, &found);
    return found ? &v->peers[at] : NULL;
}

const char *stp_view_peer_get(const struct stp_view_peer *p, enum stp_view_peer_field f)
{
    return p->values[f];
}

bool stp_view_peer_number(const struct stp_view_peer *p, enum stp_view_peer_field f,
                          uint64_t *out)
{
    return stp_view_parse_u64(p->values[f], out);
}

bool stp_view_peer_forwarding(const struct stp_view_peer *p)
{
    const char *value = p->values[SV_PEER_FORWARDING];
    return value && strcmp(value, "1") == 0;
}

int stp_identity_split(const char *id, char *host, size_t host_len, uint16_t *port)
{
    const char *colon = strrchr(id, ':');
    if (!colon) return -1;
    const char *start = id, *end = colon;
    if (id[0] == '[') {
        if (colon == id || colon[-1] != ']') return -1;
        start = id + 1;
        end = colon - 1;
    } else if (memchr(id, ':', (size_t)(colon - id))) {
        return -1; /* an IPv6 address needs brackets */
    }
    uint64_t number;
    if (!stp_view_parse_u64(colon + 1, &number) || number == 0 || number > 65535) return -1;
    size_t len = (size_t)(end - start);
    if (len == 0 || len >= host_len) return -1;
    memcpy(host, start, len);
    host[len] = '\0';
    *port = (uint16_t)number;
    return 0;
}

static bool parse_identity(const char *text, struct stp_broker_id *id)
{
    char host[STP_BROKER_ID_STRLEN];
    uint16_t port;
    return stp_identity_split(text, host, sizeof host, &port) == 0 &&
           stp_broker_id_parse(id, host, port) == 0;
}

int stp_identity_compare(const char *a, const char *b)
{
    struct stp_broker_id ia, ib;
    bool va = parse_identity(a, &ia), vb = parse_identity(b, &ib);
    if (va && vb) {
        int cmp = stp_broker_id_compare(&ia, &ib);
        if (cmp != 0) return cmp;
    } else if (va != vb) {
        return va ? -1 : 1;
    }
    return strcmp(a, b);
}
