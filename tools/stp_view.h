/*
 * stp_view.h: one broker's spanning tree as it publishes it under $SYS/broker/stp/ (man/arbor.8,
 * "$SYS TOPICS"), rebuilt from the retained values and the updates a subscriber receives.
 * An empty value clears a topic (root/link at the root, a peer's role while its link is not
 * up, every topic of a peer whose link is gone); a peer with no topic left is forgotten.
 *
 * Pure data: no sockets, no output, no clocks. Values are kept as the text the broker sent;
 * the accessors read them as numbers or flags where the topic is one.
 */
#ifndef ARBOR_STP_VIEW_H
#define ARBOR_STP_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STP_SYS_PREFIX "$SYS/broker/stp/"
#define STP_SYS_FILTER "$SYS/broker/stp/#"

enum stp_view_kind {
    STP_VIEW_TEXT,
    STP_VIEW_NUMBER, /* decimal unsigned integer */
    STP_VIEW_FLAG,   /* "1" or "0" */
    STP_VIEW_LIST,   /* items, one per line: listed after the table, an array in JSON */
};

/* One topic: its name below the prefix (the broker's) or below peers/<id>/ (a peer's), how the
 * table labels it and what its value is. */
struct stp_view_field {
    const char *topic;
    const char *label;
    enum stp_view_kind kind;
};

enum stp_view_broker_field {
    SV_ID,
    SV_CAPABILITY,
    SV_ROOT_ID,
    SV_ROOT_CAPABILITY,
    SV_ROOT_COST,
    SV_ROOT_LINK,
    SV_HOPS,
    SV_EPOCH,
    SV_TOPOLOGY_CHANGES,
    SV_SETTLING,
    SV_BPDUS_SENT,
    SV_BPDUS_RECEIVED,
    SV_BPDUS_REJECTED,
    SV_MESSAGES_FORWARDED,
    SV_MESSAGES_RECEIVED,
    SV_MESSAGES_DUPLICATES,
    SV_MESSAGES_DISCARDED,
    SV_MESSAGES_OFF_TREE,
    SV_MESSAGES_RESYNCED,
    SV_MESSAGES_LOST,
    SV_MESSAGES_DROPPED,
    SV_MESSAGES_SKIPPED,
    SV_MESSAGES_SKIP_NOTICES,
    SV_BROKER_FIELDS
};

enum stp_view_peer_field {
    SV_PEER_STATE,
    SV_PEER_ROLE,
    SV_PEER_FORWARDING,
    SV_PEER_WANTS,
    SV_PEER_TOLD,
    SV_PEER_SRTT,
    SV_PEER_COST,
    SV_PEER_BPDUS_SENT,
    SV_PEER_BPDUS_RECEIVED,
    SV_PEER_RESYNC_MESSAGES,
    SV_PEER_RESYNC_BYTES,
    SV_PEER_WANTED_FILTERS,
    SV_PEER_SHARES,
    SV_PEER_FIELDS
};

extern const struct stp_view_field stp_view_broker_fields[SV_BROKER_FIELDS];
extern const struct stp_view_field stp_view_peer_fields[SV_PEER_FIELDS];

struct stp_view_peer {
    char *id;                    /* the neighbour's identity, as in the topic */
    char *values[SV_PEER_FIELDS]; /* NULL: absent (cleared or never published) */
};

struct stp_view {
    char *values[SV_BROKER_FIELDS];
    struct stp_view_peer *peers; /* in identity order (docs/mqtt-st-protocol.md, 3.2) */
    size_t peer_count, peer_cap;
};

void stp_view_init(struct stp_view *v);
void stp_view_free(struct stp_view *v);
/* dst (initialised or freed) becomes a deep copy of src. 0, or -1 when memory ran out (dst is
 * then empty). */
int stp_view_copy(struct stp_view *dst, const struct stp_view *src);

/* Applies one message: topic is the whole topic name, payload its value (empty clears it).
 * Returns 1 when the topic is one of the view's, 0 when it is not (ignored), -1 when memory
 * ran out. */
int stp_view_apply(struct stp_view *v, const char *topic, size_t topic_len, const void *payload,
                   size_t payload_len);

/* The broker publishes MQTT-ST topics at all (its identity is known). */
bool stp_view_has_stp(const struct stp_view *v);
/* Its root is itself. */
bool stp_view_is_root(const struct stp_view *v);

const char *stp_view_get(const struct stp_view *v, enum stp_view_broker_field f);
bool stp_view_number(const struct stp_view *v, enum stp_view_broker_field f, uint64_t *out);

const struct stp_view_peer *stp_view_peer_find(const struct stp_view *v, const char *id);
const char *stp_view_peer_get(const struct stp_view_peer *p, enum stp_view_peer_field f);
bool stp_view_peer_number(const struct stp_view_peer *p, enum stp_view_peer_field f,
                          uint64_t *out);
bool stp_view_peer_forwarding(const struct stp_view_peer *p);

/* Parses a decimal unsigned integer with nothing around it. */
bool stp_view_parse_u64(const char *text, uint64_t *out);

/* Room for the host part of any identity stp_identity_split accepts from a broker. */
#define STP_VIEW_HOST_MAX 64

/* Splits an identity "a.b.c.d:port" or "[v6]:port" into the host (without brackets) and the
 * port. 0, or -1 when it has no such form or the host does not fit. */
int stp_identity_split(const char *id, char *host, size_t host_len, uint16_t *port);
/* Order of identities as the protocol sorts them (address, then port); text that is not an
 * identity sorts after every identity, by its bytes. */
int stp_identity_compare(const char *a, const char *b);

#endif
