/*
 * bpdu.c: encodes and decodes MQTT-ST BPDUs, byte for byte as in docs/mqtt-st-protocol.md.
 * Every read is preceded by a length check; the decoder rejects anything it does not fully
 * understand rather than guessing. No state, no allocation, no policy.
 */
#include "bpdu.h"

#include <string.h>

#define FLAG_TOPOLOGY_CHANGE 0x80u
#define FLAG_TOPOLOGY_CHANGE_ACK 0x40u
#define FLAG_ROLE_SHIFT 4
#define FLAG_ROLE_MASK 0x30u
#define FLAG_ROOT_IPV6 0x08u
#define FLAG_SENDER_IPV6 0x04u
#define FLAG_RESERVED 0x03u

#define OFFSET_VERSION 0
#define OFFSET_FLAGS 1
#define OFFSET_MESSAGE_AGE 2
#define OFFSET_EPOCH 3
#define OFFSET_ROOT_CAPABILITY 7
#define OFFSET_ROOT_COST 11
#define OFFSET_SENDER_CAPABILITY 15
#define OFFSET_IDENTITIES STP_BPDU_HEADER_LEN

static const uint8_t ipv4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static void put_u32(uint8_t *out, uint32_t value)
{
    out[0] = (uint8_t)(value >> 24);
    out[1] = (uint8_t)(value >> 16);
    out[2] = (uint8_t)(value >> 8);
    out[3] = (uint8_t)value;
}

static uint32_t get_u32(const uint8_t *in)
{
    return (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
}

static size_t identity_len(bool ipv6)
{
    return ipv6 ? 18 : 6;
}

static size_t put_identity(uint8_t *out, const struct stp_broker_id *id)
{
    size_t address_len = stp_broker_id_is_ipv4(id) ? 4 : 16;
    memcpy(out, id->addr + (16 - address_len), address_len);
    out[address_len] = (uint8_t)(id->port >> 8);
    out[address_len + 1] = (uint8_t)id->port;
    return address_len + 2;
}

static int get_identity(const uint8_t *in, bool ipv6, struct stp_broker_id *id)
{
    if (ipv6) {
        /* One identity, one encoding: a mapped IPv4 address must use the short form. */
        if (memcmp(in, ipv4_mapped_prefix, sizeof ipv4_mapped_prefix) == 0) return STP_BPDU_BAD_ID;
        stp_broker_id_from_ipv6(id, in, (uint16_t)(in[16] << 8 | in[17]));
    } else {
        stp_broker_id_from_ipv4(id, in, (uint16_t)(in[4] << 8 | in[5]));
    }
    return stp_broker_id_is_valid(id) ? STP_BPDU_OK : STP_BPDU_BAD_ID;
}

size_t stp_bpdu_encoded_len(const struct stp_bpdu *bpdu)
{
    return STP_BPDU_HEADER_LEN + identity_len(!stp_broker_id_is_ipv4(&bpdu->priority.root_id)) +
           identity_len(!stp_broker_id_is_ipv4(&bpdu->priority.sender_id));
}

static uint8_t encode_flags(const struct stp_bpdu *bpdu)
{
    uint8_t flags = (uint8_t)(((unsigned)bpdu->sender_role << FLAG_ROLE_SHIFT) & FLAG_ROLE_MASK);
    if (bpdu->topology_change) flags |= FLAG_TOPOLOGY_CHANGE;
    if (bpdu->topology_change_ack) flags |= FLAG_TOPOLOGY_CHANGE_ACK;
    if (!stp_broker_id_is_ipv4(&bpdu->priority.root_id)) flags |= FLAG_ROOT_IPV6;
    if (!stp_broker_id_is_ipv4(&bpdu->priority.sender_id)) flags |= FLAG_SENDER_IPV6;
    return flags;
}

int stp_bpdu_encode(const struct stp_bpdu *bpdu, uint8_t *out, size_t out_len, size_t *written)
{
    size_t len = stp_bpdu_encoded_len(bpdu);
    if (out_len < len) return STP_BPDU_NO_SPACE;
    out[OFFSET_VERSION] = STP_BPDU_VERSION;
    out[OFFSET_FLAGS] = encode_flags(bpdu);
    out[OFFSET_MESSAGE_AGE] = bpdu->message_age;
    put_u32(out + OFFSET_EPOCH, bpdu->epoch);
    put_u32(out + OFFSET_ROOT_CAPABILITY, bpdu->priority.root_capability);
    put_u32(out + OFFSET_ROOT_COST, bpdu->priority.root_cost_us);
    put_u32(out + OFFSET_SENDER_CAPABILITY, bpdu->priority.sender_capability);
    size_t offset = OFFSET_IDENTITIES;
    offset += put_identity(out + offset, &bpdu->priority.root_id);
    offset += put_identity(out + offset, &bpdu->priority.sender_id);
    *written = offset;
    return STP_BPDU_OK;
}

/* The sender being the root and the path cost being zero must go together. */
static int check_consistency(const struct stp_bpdu *bpdu)
{
    const struct stp_priority *p = &bpdu->priority;
    if (stp_broker_id_equal(&p->root_id, &p->sender_id)) {
        bool is_root_advert = p->root_cost_us == 0 && bpdu->message_age == 0 &&
                              p->root_capability == p->sender_capability &&
                              bpdu->sender_role != STP_ROLE_ROOT;
        return is_root_advert ? STP_BPDU_OK : STP_BPDU_INCONSISTENT;
    }
    if (p->root_cost_us == 0 || bpdu->message_age == 0) return STP_BPDU_INCONSISTENT;
    return STP_BPDU_OK;
}

static int decode_flags(uint8_t flags, struct stp_bpdu *bpdu)
{
    unsigned role = (flags & FLAG_ROLE_MASK) >> FLAG_ROLE_SHIFT;
    if ((flags & FLAG_RESERVED) != 0 || role == 0) return STP_BPDU_BAD_FLAGS;
    bpdu->sender_role = (enum stp_role)role;
    bpdu->topology_change = (flags & FLAG_TOPOLOGY_CHANGE) != 0;
    bpdu->topology_change_ack = (flags & FLAG_TOPOLOGY_CHANGE_ACK) != 0;
    return STP_BPDU_OK;
}

int stp_bpdu_decode(const uint8_t *data, size_t len, struct stp_bpdu *bpdu)
{
    if (data == NULL || len == 0) return STP_BPDU_TRUNCATED;
    if (data[OFFSET_VERSION] != STP_BPDU_VERSION) return STP_BPDU_BAD_VERSION;
    if (len < STP_BPDU_HEADER_LEN) return STP_BPDU_TRUNCATED;

    uint8_t flags = data[OFFSET_FLAGS];
    int status = decode_flags(flags, bpdu);
    if (status != STP_BPDU_OK) return status;
    bool root_ipv6 = (flags & FLAG_ROOT_IPV6) != 0;
    bool sender_ipv6 = (flags & FLAG_SENDER_IPV6) != 0;
    size_t expected = STP_BPDU_HEADER_LEN + identity_len(root_ipv6) + identity_len(sender_ipv6);
    if (len < expected) return STP_BPDU_TRUNCATED;
    if (len > expected) return STP_BPDU_TRAILING_BYTES;

    bpdu->message_age = data[OFFSET_MESSAGE_AGE];
    bpdu->epoch = get_u32(data + OFFSET_EPOCH);
    bpdu->priority.root_capability = get_u32(data + OFFSET_ROOT_CAPABILITY);
    bpdu->priority.root_cost_us = get_u32(data + OFFSET_ROOT_COST);
    bpdu->priority.sender_capability = get_u32(data + OFFSET_SENDER_CAPABILITY);
    size_t offset = OFFSET_IDENTITIES;
    status = get_identity(data + offset, root_ipv6, &bpdu->priority.root_id);
    if (status != STP_BPDU_OK) return status;
    offset += identity_len(root_ipv6);
    status = get_identity(data + offset, sender_ipv6, &bpdu->priority.sender_id);
    if (status != STP_BPDU_OK) return status;
    return check_consistency(bpdu);
}

const char *stp_bpdu_status_text(int status)
{
    switch (status) {
    case STP_BPDU_OK:
        return "ok";
    case STP_BPDU_TRUNCATED:
        return "truncated";
    case STP_BPDU_BAD_VERSION:
        return "unknown version";
    case STP_BPDU_BAD_FLAGS:
        return "reserved flag bits or invalid role";
    case STP_BPDU_TRAILING_BYTES:
        return "trailing bytes";
    case STP_BPDU_BAD_ID:
        return "invalid broker identity";
    case STP_BPDU_INCONSISTENT:
        return "inconsistent fields";
    case STP_BPDU_NO_SPACE:
        return "output buffer too small";
    default:
        return "unknown status";
    }
}
