/*
 * identity.c: broker identities (address + port), their canonical form and total order.
 * Must stay pure: inet_pton/inet_ntop only convert text, nothing here resolves names.
 */
#include "identity.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static const uint8_t ipv4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

void stp_broker_id_from_ipv4(struct stp_broker_id *id, const uint8_t addr[4], uint16_t port)
{
    memcpy(id->addr, ipv4_mapped_prefix, sizeof ipv4_mapped_prefix);
    memcpy(id->addr + 12, addr, 4);
    id->port = port;
}

void stp_broker_id_from_ipv6(struct stp_broker_id *id, const uint8_t addr[16], uint16_t port)
{
    memcpy(id->addr, addr, 16);
    id->port = port;
}

int stp_broker_id_parse(struct stp_broker_id *id, const char *address, uint16_t port)
{
    uint8_t bytes[16];
    if (address == NULL) return -1;
    if (inet_pton(AF_INET, address, bytes) == 1) {
        stp_broker_id_from_ipv4(id, bytes, port);
    } else if (inet_pton(AF_INET6, address, bytes) == 1) {
        stp_broker_id_from_ipv6(id, bytes, port);
    } else {
        return -1;
    }
    return stp_broker_id_is_valid(id) ? 0 : -1;
}

bool stp_broker_id_is_ipv4(const struct stp_broker_id *id)
{
    return memcmp(id->addr, ipv4_mapped_prefix, sizeof ipv4_mapped_prefix) == 0;
}

bool stp_broker_id_is_valid(const struct stp_broker_id *id)
{
    static const uint8_t zero[16];
    if (id->port == 0) return false;
    if (stp_broker_id_is_ipv4(id)) return memcmp(id->addr + 12, zero, 4) != 0;
    return memcmp(id->addr, zero, 16) != 0;
}

int stp_broker_id_compare(const struct stp_broker_id *a, const struct stp_broker_id *b)
{
    int by_address = memcmp(a->addr, b->addr, sizeof a->addr);
    if (by_address != 0) return by_address;
    return (a->port > b->port) - (a->port < b->port);
}

bool stp_broker_id_equal(const struct stp_broker_id *a, const struct stp_broker_id *b)
{
    return stp_broker_id_compare(a, b) == 0;
}

char *stp_broker_id_format(const struct stp_broker_id *id, char *buf, size_t buf_len)
{
    char text[INET6_ADDRSTRLEN];
    if (buf_len == 0) return buf;
    if (stp_broker_id_is_ipv4(id)) {
        inet_ntop(AF_INET, id->addr + 12, text, sizeof text);
        snprintf(buf, buf_len, "%s:%u", text, (unsigned)id->port);
    } else {
        inet_ntop(AF_INET6, id->addr, text, sizeof text);
        snprintf(buf, buf_len, "[%s]:%u", text, (unsigned)id->port);
    }
    return buf;
}

bool stp_broker_id_from_text(struct stp_broker_id *id, const char *text)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon;
    const char *start = text;
    size_t host_len;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':') return false;
        start = text + 1;
        host_len = (size_t)(close - start);
        colon = close + 1;
    } else {
        colon = strchr(text, ':');
        if (!colon || strchr(colon + 1, ':')) return false; /* IPv6 is written in brackets */
        host_len = (size_t)(colon - text);
    }
    if (host_len == 0 || host_len >= sizeof host) return false;
    memcpy(host, start, host_len);
    host[host_len] = '\0';
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end != '\0' || colon[1] == '\0' || port == 0 || port > 65535) return false;
    return stp_broker_id_parse(id, host, (uint16_t)port) == 0;
}
