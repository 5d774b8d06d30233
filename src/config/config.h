/*
 * config.h: the broker's configuration, parsed from mosquitto.conf syntax.
 *
 * Parsing is a pure function from text to a struct arbor_config plus an error message with
 * file:line; it never logs, exits or touches sockets. The daemon decides what to do with
 * errors (refuse to start, or keep the old config on SIGHUP).
 */
#ifndef ARBOR_CONFIG_H
#define ARBOR_CONFIG_H

/* The most event loops (the loops directive); broker_shared.h sizes its tables by it. */
#define ARBOR_CONFIG_MAX_LOOPS 64

#include "bridge_config.h"
#include "config_types.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct password_table;
struct acl_rules;
struct psk_table;

/* log_type bits (mosquitto's names) */
enum arbor_log_type {
    ARBOR_LOG_DEBUG = 1 << 0,
    ARBOR_LOG_ERROR = 1 << 1,
    ARBOR_LOG_WARNING = 1 << 2,
    ARBOR_LOG_NOTICE = 1 << 3,
    ARBOR_LOG_INFORMATION = 1 << 4,
    ARBOR_LOG_SUBSCRIBE = 1 << 5,
    ARBOR_LOG_UNSUBSCRIBE = 1 << 6,
    ARBOR_LOG_WEBSOCKETS = 1 << 7,
    ARBOR_LOG_ALL = 0xff,
};

/* log_dest bits */
enum arbor_log_dest {
    ARBOR_LOG_DEST_NONE = 0,
    ARBOR_LOG_DEST_STDERR = 1 << 0,
    ARBOR_LOG_DEST_STDOUT = 1 << 1,
    ARBOR_LOG_DEST_FILE = 1 << 2,
    ARBOR_LOG_DEST_SYSLOG = 1 << 3,
    ARBOR_LOG_DEST_TOPIC = 1 << 4, /* $SYS/broker/log/<level> (log_topic.c) */
};

/* Settings that may be given per listener when per_listener_settings is true, and globally
 * otherwise. */
struct arbor_security_settings {
    bool allow_anonymous;
    bool allow_anonymous_set; /* given explicitly in the config */
    bool allow_zero_length_clientid;
    bool use_username_as_clientid; /* the client id becomes the user name (none: refused) */
    char *auto_id_prefix;     /* default "auto-" (NULL only if memory ran out: treat as "auto-") */
    bool auto_id_prefix_set;  /* given explicitly in the config */
    char **clientid_prefixes; /* NULL-terminated list, or NULL for no restriction */
    size_t clientid_prefix_count;
    char *password_file;              /* password_file path; NULL: none */
    struct password_table *passwords; /* its users, loaded by the daemon (main.c) after
                                         parsing; freed with the config */
    char *acl_file;          /* acl_file as given, NULL: no access control */
    struct acl_rules *acl;   /* its rules, read when the config was loaded (acl.h) */
    char *psk_file;          /* psk_file path; NULL: none */
    struct psk_table *psks;  /* its keys, loaded by the daemon (main.c) after parsing */
};

/* The longest path a unix socket listener may have (sockaddr_un's sun_path, less its NUL). */
#define UNIX_SOCKET_PATH_MAX 107

/* What a listener speaks (`protocol`). */
enum arbor_listener_protocol {
    ARBOR_PROTOCOL_MQTT = 0,   /* MQTT on the TCP stream */
    ARBOR_PROTOCOL_WEBSOCKETS, /* MQTT in WebSocket binary frames, plus http_dir (websocket.c) */
};

struct arbor_listener {
    uint16_t port;          /* 0 for a unix socket listener */
    bool unix_socket;       /* `listener 0 <path>`: bind_address is the socket's path */
    enum arbor_listener_protocol protocol;
    char *bind_address;                      /* NULL: all addresses */
    char *bind_interface;                    /* NULL unless bind_interface given */
    int max_connections;                     /* -1: unlimited */
    char *mount_point;                       /* NULL unless given */
    char *http_dir; /* websockets: directory served to plain HTTP GET (relative paths taken
                       from arbor_config.base_dir); NULL: no HTTP, only upgrades */
    const char *http_dir_file; /* where http_dir was given (owned by source_files), for the */
    int http_dir_line;         /* check that the listener speaks websockets */
    struct arbor_security_settings security; /* used when per_listener_settings is true */
    const char *file;                        /* where it was declared, for messages (owned by
                                                arbor_config.source_files) */
    int line;
    /* added by config.c: */
    bool max_connections_set; /* given in this listener's block; otherwise max_connections was
                                 copied from the global max_connections when loading ended */
    uint16_t max_topic_alias; /* same rule: own value, or the global one */
    bool max_topic_alias_set;
    int socket_domain;        /* AF_UNSPEC (default: both), AF_INET or AF_INET6 */
    bool is_default_listener; /* made by the deprecated port/bind_address directives */
    struct arbor_tls_settings tls;
};

/* One `peer` line: a broker this one links with (MQTT-ST). */
struct arbor_peer {
    char *host;     /* name or address literal, IPv6 without brackets */
    uint16_t port;  /* default 1883 */
    const char *file; /* where it was declared (owned by arbor_config.source_files) */
    int line;
};

struct arbor_config {
    /* where this config came from (NULL for defaults / command line only) */
    char *config_file;
    /* directory a relative include_dir is read from: set by the caller before loading to the
     * directory the broker started in (Mosquitto reads it from its working directory, which a
     * daemon leaves for /); NULL: the current directory. Owned by the config. */
    char *base_dir;

    struct arbor_listener *listeners;
    size_t listener_count;

    bool per_listener_settings;
    struct arbor_security_settings security; /* global (per_listener_settings false) */

    /* limits */
    int max_connections;              /* -1 unlimited (default) */
    uint16_t max_inflight_messages;   /* 0 unlimited; default 20 */
    uint64_t max_inflight_bytes;      /* 0 unlimited */
    int max_queued_messages;          /* 0 unlimited; default 1000 */
    uint32_t max_publisher_backlog;   /* arbor's: publisher_pressure.h; 0 off */
    unsigned loops;                   /* arbor's: event loop threads, 1 (default) .. 64 */
    bool loops_auto;                  /* loops auto: config_settle_loops chooses (0 until) */
    uint32_t max_publisher_hold_ms;   /* arbor's: a subscriber behind this long is cut loose */
    uint64_t max_queued_bytes;        /* 0 unlimited */
    bool queue_qos0_messages;         /* default false */
    uint32_t message_size_limit;      /* 0 = MQTT maximum (268435455) */
    uint32_t max_packet_size;         /* 0 = no limit besides protocol */
    uint16_t max_keepalive;           /* default 65535 */
    uint16_t max_topic_alias;         /* default 10 */
    bool retain_available;            /* default true */
    bool check_retain_source;         /* default true: re-check a retained message's publisher */
    uint8_t max_qos;                  /* highest QoS clients may use; default 2 */
    bool upgrade_outgoing_qos;        /* default false */
    int64_t persistent_client_expiry; /* seconds; -1 never (default) */
    uint64_t memory_limit;            /* heap bytes the broker may use; 0 no limit (default) */

    /* persistence (persist.h; arbor.conf(5) PERSISTENCE) */
    bool persistence;                 /* default false */
    char *persistence_file;           /* NULL: "arbor.db" */
    char *persistence_location;       /* directory; NULL: the directory arbor started in */
    int64_t autosave_interval;        /* seconds, or changes with autosave_on_changes; 1800 */
    bool autosave_on_changes;         /* default false */
    enum arbor_persistence_mode {
        ARBOR_PERSIST_SNAPSHOT, /* Mosquitto's: saved at shutdown and on autosave (default) */
        ARBOR_PERSIST_DURABLE,  /* every acknowledged change on disk before the ack */
    } persistence_mode;
    bool set_tcp_nodelay;             /* default false */
    int sys_interval;                 /* seconds; 0 disables $SYS; default 10 */

    /* WebSockets (global, as in Mosquitto; websocket.c) */
    uint16_t websockets_headers_size; /* HTTP header bytes a request may have; 0: 1024 */
    int websockets_log_level;         /* libwebsockets' lws_log_levels bits logged; default 0 */

    /* logging */
    unsigned log_dest;          /* arbor_log_dest bits; default stderr */
    char *log_file;             /* for ARBOR_LOG_DEST_FILE */
    unsigned log_type;          /* arbor_log_type bits; default error|warning|notice|information */
    int log_facility;           /* syslog facility local0..local7 (0-7); -1: daemon (default) */
    bool log_timestamp;         /* default true */
    char *log_timestamp_format; /* strftime format or NULL for epoch seconds */
    bool connection_messages;   /* default true */
    bool reason_strings;        /* MQTT 5 reason strings on acks/DISCONNECT; default false */
    bool topic_alias_outgoing;  /* topic aliases towards MQTT 5 clients; default false */

    /* process */
    char *pid_file;
    char *user; /* NULL unless given (then "arbor", else "nobody"); only used when root */

    /* bridges: `connection` blocks (bridge_config.h, arbor.conf(5) "BRIDGES") */
    struct bridge_config *bridges;
    size_t bridge_count;

    /* MQTT-ST peer networking (docs/mqtt-st-protocol.md, arbor.conf(5) "PEERS") */
    struct arbor_peer *peers; /* `peer` lines, in file order */
    size_t peer_count;
    char *peer_identity_address; /* peer_identity: numeric address; NULL: derived at start-up */
    uint16_t peer_identity_port; /* peer_identity's port; 0: the first listener's port */
    bool stp_capability_set;     /* stp_capability given: use it instead of measuring */
    uint32_t stp_capability;
    double stp_cpu_weight;      /* alpha of C = alpha * MHz + beta * MiB; default 1.0 */
    double stp_memory_weight;   /* beta; default 1.0 */
    uint32_t stp_hello_ms;      /* stp_hello_interval (seconds, decimals allowed); default 2000 */
    uint32_t stp_max_age_ms;    /* stp_max_age; default 7000; must exceed the hello interval */
    bool stp_local_repair;      /* default false */
    char *peer_secret;          /* shared secret of the HMAC peer authentication; NULL: none */
    bool peer_allow_unauthenticated; /* default false: without a secret, no peering */
    uint32_t peer_restart_base_ms;   /* peer_restart_timeout <base> [<max>]; default 1000 */
    uint32_t peer_restart_max_ms;    /* default 30000 */
    /* The message log (docs/mqtt-st-protocol.md 7.3): peer_log_max_messages (default
     * 1 000 000), peer_log_max_bytes (topic and payload bytes, default 256 MiB),
     * peer_log_max_age (seconds, default 86 400; 0: no age limit). */
    uint64_t peer_log_max_messages, peer_log_max_bytes, peer_log_max_age_s;
    /* Interest routing (docs/interest-routing-design.md): peer_routing interest (default,
     * true) or all; peer_interest_max_filters bounds an announcement (default 10 000). */
    bool peer_routing_interest;
    uint32_t peer_interest_max_filters;
    /* Peer links over TLS (config_peer_uses_tls): peer_cafile, peer_capath, peer_certfile,
     * peer_keyfile, peer_ciphers, peer_ciphers_tls1.3 and peer_tls_version fill the fields of
     * the same names (the rest stay unused); needs_tls_directive is the first of them given.
     * The TLS contexts built from these settings are the transport's (transport_tls.h,
     * struct tls_context_set), not the config's. */
    struct arbor_tls_settings peer_tls;

    /* every file (or string name) this config was read from, main file first; owns the
     * strings that arbor_listener.file points to */
    char **source_files;
    size_t source_file_count;

    /* warnings about accepted lines (deprecated or removed Mosquitto options), in
     * Mosquitto's wording, for the daemon to log */
    char **warnings;
    size_t warning_count;
};

/* Fill *cfg with Mosquitto 2.0's defaults (no listeners). */
void config_init_defaults(struct arbor_config *cfg);

/* Parse a file (following include_dir) into *cfg, which must have been initialised with
 * config_init_defaults(). Returns 0 on success; on error returns -1 and writes every error
 * found, one per line ('\n' between them), each of the form "file:line: directive: what is
 * wrong", into err (size errlen; errors that do not fit are left out). After an error cfg
 * still owns what was parsed: release it with config_free(). */
int config_load_file(struct arbor_config *cfg, const char *path, char *err, size_t errlen);

/* Same as config_load_file but from a string; name is used in messages as the file name. */
int config_load_string(struct arbor_config *cfg, const char *text, const char *name, char *err,
                       size_t errlen);

/* Append a listener that did not come from a file (the command line's -p, Mosquitto 2.0's
 * local-only mode) on port, bound to bind_address (NULL: all addresses). It gets what a listener
 * line followed by nothing would get: the global max_connections, max_topic_alias and
 * clientid_prefixes, and a copy of the global security settings. origin names it in messages
 * (e.g. "command line"); cfg keeps a copy. Returns 0, or -1 when out of memory. */
int config_add_listener(struct arbor_config *cfg, uint16_t port, const char *bind_address,
                        const char *origin);

/* Checks that span directives (e.g. listener settings consistency); run after loading.
 * Today: no two listeners with the same port, bind address and interface. (Each listener's
 * TLS directives are checked when loading ends: certfile with keyfile, a CA to check client
 * certificates against, a psk_file for psk_hint, no TLS setting on a plain listener.) */
int config_validate(struct arbor_config *cfg, char *err, size_t errlen);

/* Does the listener speak TLS (certfile and keyfile, or psk_hint, given)? */
bool config_listener_uses_tls(const struct arbor_listener *listener);

/* The number of loops for `loops auto`: one per CPU the process may use (cpus, at most 64).
 * Other configs are left as they are. */
void config_settle_loops(struct arbor_config *cfg, unsigned cpus);
/* Does the config make this broker an MQTT-ST peer (peer lines, or accepting peers)? */
bool config_peering_configured(const struct arbor_config *cfg);
/* Do peer links run over TLS (peer_certfile and peer_keyfile given; loading checks that a
 * peer_cafile or peer_capath comes with them)? */
bool config_peer_uses_tls(const struct arbor_config *cfg);

/* Return the security settings that apply to a listener (its own with per_listener_settings,
 * the global ones otherwise). */
const struct arbor_security_settings *config_security_for(const struct arbor_config *cfg,
                                                          const struct arbor_listener *listener);

/* Free everything owned by cfg (not cfg itself). */
void config_free(struct arbor_config *cfg);

#endif
