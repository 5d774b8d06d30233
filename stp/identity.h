/*
 * identity.h: the identity of an MQTT-ST broker (advertised IPv4 or IPv6 address and port)
 * and its total order. Every broker must sort identities the same way, so the order is
 * defined on one canonical form: IPv4 addresses are held as IPv4-mapped IPv6 (::ffff:a.b.c.d)
 * and compared as 16 big-endian bytes, then the port.
 * Pure functions only: no allocation, no name resolution, no state.
 */
#ifndef ARBOR_STP_IDENTITY_H
#define ARBOR_STP_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stp_broker_id {
    uint8_t addr[16]; /* network byte order; IPv4 as ::ffff:a.b.c.d */
    uint16_t port;    /* host byte order */
};

/* Longest text stp_broker_id_format writes, with the terminating NUL ("[v6]:65535"). */
#define STP_BROKER_ID_STRLEN 56

void stp_broker_id_from_ipv4(struct stp_broker_id *id, const uint8_t addr[4], uint16_t port);
/* An IPv4-mapped IPv6 address is accepted and is the same identity as the IPv4 address. */
void stp_broker_id_from_ipv6(struct stp_broker_id *id, const uint8_t addr[16], uint16_t port);

/* Parses a numeric IPv4 or IPv6 address (no brackets, no host names). 0 on success, -1 if the
 * text is not an address, the address is unspecified (0.0.0.0, ::) or the port is 0. */
int stp_broker_id_parse(struct stp_broker_id *id, const char *address, uint16_t port);

/* Parses the text form stp_broker_id_format writes ("a.b.c.d:port" or "[v6]:port", numeric
 * addresses only); false when it is not one. */
bool stp_broker_id_from_text(struct stp_broker_id *id, const char *text);

bool stp_broker_id_is_ipv4(const struct stp_broker_id *id);

/* True when the identity could be advertised: a specified address and a non-zero port. */
bool stp_broker_id_is_valid(const struct stp_broker_id *id);

/* <0 when a sorts first (is "lower"), 0 when equal, >0 otherwise. */
int stp_broker_id_compare(const struct stp_broker_id *a, const struct stp_broker_id *b);
bool stp_broker_id_equal(const struct stp_broker_id *a, const struct stp_broker_id *b);

/* "a.b.c.d:port" or "[v6]:port"; returns buf. buf_len >= STP_BROKER_ID_STRLEN never truncates. */
char *stp_broker_id_format(const struct stp_broker_id *id, char *buf, size_t buf_len);

#endif
