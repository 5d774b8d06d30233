/*
 * bpdu.h: the MQTT-ST BPDU wire codec. A BPDU is the payload of a PINGREQ sent on a peer link;
 * docs/mqtt-st-protocol.md specifies every byte. This file only converts between bytes and a
 * struct: it keeps no state, allocates nothing and never reads or writes outside the buffers
 * it is given. Deciding what a BPDU means is stp.c's job.
 */
#ifndef ARBOR_STP_BPDU_H
#define ARBOR_STP_BPDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "priority.h"

#define STP_BPDU_VERSION 1
#define STP_BPDU_HEADER_LEN 19 /* fixed part before the two identities */
#define STP_BPDU_MIN_LEN 31    /* both identities IPv4 */
#define STP_BPDU_MAX_LEN 55    /* both identities IPv6 */

/* The role of a link as seen from one end. Values are the 2-bit wire encoding. */
enum stp_role {
    STP_ROLE_ROOT = 1,       /* this end's path to the root */
    STP_ROLE_DESIGNATED = 2, /* this end offers the better path on the link */
    STP_ROLE_BLOCKED = 3,    /* neither: the link is not used to forward */
};

struct stp_bpdu {
    bool topology_change;     /* TC: the sender entered a new epoch you have not confirmed */
    bool topology_change_ack; /* TCA: the sender adopted its epoch from your BPDU */
    enum stp_role sender_role;
    uint8_t message_age; /* hops from the root: 0 when the sender is the root */
    uint32_t epoch;      /* topology generation, 0 = not yet in any */
    struct stp_priority priority;
};

enum stp_bpdu_status {
    STP_BPDU_OK = 0,
    STP_BPDU_TRUNCATED = -1,      /* fewer bytes than the header or the flagged identities need */
    STP_BPDU_BAD_VERSION = -2,    /* version byte other than STP_BPDU_VERSION */
    STP_BPDU_BAD_FLAGS = -3,      /* reserved flag bits set, or role bits 00 */
    STP_BPDU_TRAILING_BYTES = -4, /* bytes after the last field */
    STP_BPDU_BAD_ID = -5,       /* port 0, unspecified address, IPv4-mapped address sent as IPv6 */
    STP_BPDU_INCONSISTENT = -6, /* fields contradict each other (see the protocol document) */
    STP_BPDU_NO_SPACE = -7,     /* encode: output buffer too small */
};

/* Bytes the encoding of bpdu takes (31, 43 or 55). */
size_t stp_bpdu_encoded_len(const struct stp_bpdu *bpdu);

/* Writes the encoding into out. STP_BPDU_OK with *written set, or STP_BPDU_NO_SPACE. The
 * encoder does not validate: encoding what decode would reject is the caller's bug. */
int stp_bpdu_encode(const struct stp_bpdu *bpdu, uint8_t *out, size_t out_len, size_t *written);

/* Parses exactly len bytes. STP_BPDU_OK with *bpdu filled, or a negative stp_bpdu_status and
 * *bpdu unspecified. */
int stp_bpdu_decode(const uint8_t *data, size_t len, struct stp_bpdu *bpdu);

const char *stp_bpdu_status_text(int status);

#endif
