/*
 * bridge_config.h: Mosquitto's bridge directives (mosquitto.conf(5), "Configuring Bridges";
 * arbor.conf(5), BRIDGES): a `connection` line opens a bridge, the lines after it configure
 * it. This file parses and checks them (bridge_config.c) with Mosquitto's defaults; config.c
 * hands it the lines and reports its errors with file:line. The bridges themselves run in
 * src/bridge/.
 */
#ifndef ARBOR_BRIDGE_CONFIG_H
#define ARBOR_BRIDGE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_types.h"

enum bridge_direction {
    BRIDGE_OUT = 1, /* local -> remote */
    BRIDGE_IN = 2,  /* remote -> local */
    BRIDGE_BOTH = BRIDGE_OUT | BRIDGE_IN,
};

/* One `topic` line. The filters are the pattern with each side's prefix; a message on a
 * topic the local filter matches goes out with local_prefix replaced by remote_prefix, and
 * the other way in. With the pattern "" the prefixes are whole topics (no wildcards). */
struct bridge_topic {
    char *pattern;       /* "" for the place marker */
    char *local_prefix;  /* "" when none */
    char *remote_prefix; /* "" when none */
    char *local_filter;  /* local_prefix + pattern */
    char *remote_filter; /* remote_prefix + pattern */
    enum bridge_direction direction;
    uint8_t qos;
};

struct bridge_address {
    char *host; /* name or address literal, IPv6 without brackets */
    uint16_t port;
};

enum bridge_start_type { BRIDGE_START_AUTOMATIC, BRIDGE_START_LAZY, BRIDGE_START_ONCE };

struct bridge_config {
    char *name;                       /* the connection line's */
    struct arbor_place at;            /* the connection line */
    struct bridge_address *addresses; /* address/addresses, in order */
    size_t address_count;
    bool round_robin;
    struct bridge_topic *topics;
    size_t topic_count;
    uint8_t protocol_version; /* 3 (mqttv31), 4 (mqttv311, default) or 5 (mqttv50) */
    bool cleansession;        /* default false */
    bool local_cleansession;  /* default: cleansession */
    bool local_cleansession_set;
    uint16_t keepalive; /* seconds, default 60, at least 5 */
    enum bridge_start_type start_type;
    uint32_t idle_timeout_s; /* lazy: stop after this long idle; default 60 */
    uint32_t threshold;      /* lazy: start with this many queued; default 10 */
    uint16_t priority;       /* bridge_priority (arbor's own): rank as a holder of the tree's
                                one uplink (docs/mqtt-st-protocol.md 7.5); default 0 */
    bool restart_constant;   /* restart_timeout <constant> */
    uint32_t restart_base_s; /* the constant, or the jitter's base; default 5 */
    uint32_t restart_cap_s;  /* the jitter's cap; default 30 */
    bool notifications;      /* default true */
    bool notifications_local_only;
    char *notification_topic; /* default $SYS/broker/connection/<remote_clientid>/state */
    char *remote_clientid;    /* default <hostname>.<name> */
    char *remote_username;
    char *remote_password;
    char *local_clientid; /* default local.<remote_clientid> */
    char *local_username;
    char *local_password;
    bool try_private;         /* default true */
    bool attempt_unsubscribe; /* bridge_attempt_unsubscribe, default true */
    bool outgoing_retain;     /* bridge_outgoing_retain, default true */
    uint32_t max_packet_size; /* bridge_max_packet_size, 0: no limit */
    char *bind_address;       /* bridge_bind_address */
    struct arbor_tls_settings tls; /* bridge_cafile, _capath, _certfile, _keyfile, _tls_version,
                                      _alpn, _identity, _psk, _require_ocsp */
    bool insecure;                 /* bridge_insecure */
};

/* Is name one of the bridge directives (connection and the lines that may follow it)? */
bool bridge_directive_known(const char *name);

/* Where a bridge line comes from, and what the parser needs from the rest of the config. */
struct bridge_line {
    const char *name;
    const char *const *words;
    size_t word_count;
    const char *rest; /* the whole value, trimmed */
    struct arbor_place at;
    const char *base_dir; /* relative file names are taken from here (NULL: as given) */
};

/* Apply one bridge line to the list (*bridges, *count): `connection` appends a bridge, the
 * others change the last one. Returns 0, or -1 with what is wrong in why (without file, line
 * or directive name). A line worth a warning (a value Mosquitto also corrects) sets warning
 * (else it is left empty). */
int bridge_config_line(struct bridge_config **bridges, size_t *count,
                       const struct bridge_line *line, char *why, size_t why_len, char *warning,
                       size_t warning_len);

/* Where bridge_config_finish found a fault: a bridge's connection line, or the line of the
 * directive that the rest of the bridge makes wrong (bridge_psk beside bridge_cafile). */
struct bridge_fault {
    struct arbor_place at;
    const char *directive; /* "connection", "bridge_psk", ... */
};

/* After the whole config: fill in the defaults that depend on other lines (client ids,
 * notification topic) and check each bridge (an address, a topic, TLS lines that go
 * together). Returns 0, or -1 with the place in *fault and what is wrong in why. */
int bridge_config_finish(struct bridge_config *bridges, size_t count, struct bridge_fault *fault,
                         char *why, size_t why_len);

/* Does the bridge speak TLS: bridge_cafile or bridge_capath, or bridge_identity and
 * bridge_psk, given? */
bool bridge_config_uses_tls(const struct bridge_config *b);

void bridge_config_free(struct bridge_config *bridges, size_t count);

#endif
