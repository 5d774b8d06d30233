/*
 * bridge_config.c: the bridge directives of bridge_config.h, with Mosquitto 2.0's meanings and
 * defaults (checked against mosquitto 2.0.11: a keepalive_interval under 5 is raised to 5 with
 * a warning; the remote client id defaults to <hostname>.<connection name>).
 */
#include "bridge_config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "psk_file.h"
#include "topic.h"

static const char *const bridge_directives[] = {
    "connection",
    "address",
    "addresses",
    "topic",
    "bridge_protocol_version",
    "cleansession",
    "local_cleansession",
    "keepalive_interval",
    "idle_timeout",
    "start_type",
    "threshold",
    "restart_timeout",
    "round_robin",
    "notifications",
    "notifications_local_only",
    "notification_topic",
    "remote_clientid",
    "clientid",
    "remote_username",
    "username",
    "remote_password",
    "password",
    "local_clientid",
    "local_username",
    "local_password",
    "try_private",
    "bridge_attempt_unsubscribe",
    "bridge_outgoing_retain",
    "bridge_max_packet_size",
    "bridge_bind_address",
    "bridge_cafile",
    "bridge_capath",
    "bridge_certfile",
    "bridge_keyfile",
    "bridge_insecure",
    "bridge_tls_version",
    "bridge_alpn",
    "bridge_identity",
    "bridge_psk",
    "bridge_require_ocsp",
    "bridge_priority",
};

bool bridge_directive_known(const char *name)
{
    for (size_t i = 0; i < sizeof bridge_directives / sizeof bridge_directives[0]; i++)
        if (strcmp(name, bridge_directives[i]) == 0) return true;
    return false;
}

#define FAIL(...) (snprintf(why, why_len, __VA_ARGS__), -1)

static void topic_free(struct bridge_topic *t)
{
    free(t->pattern);
    free(t->local_prefix);
    free(t->remote_prefix);
    free(t->local_filter);
    free(t->remote_filter);
}

static void one_free(struct bridge_config *b)
{
    free(b->name);
    for (size_t i = 0; i < b->address_count; i++)
        free(b->addresses[i].host);
    free(b->addresses);
    for (size_t i = 0; i < b->topic_count; i++)
        topic_free(&b->topics[i]);
    free(b->topics);
    free(b->notification_topic);
    free(b->remote_clientid);
    free(b->remote_username);
    free(b->remote_password);
    free(b->local_clientid);
    free(b->local_username);
    free(b->local_password);
    free(b->bind_address);
    free(b->tls.cafile.value);
    free(b->tls.capath.value);
    free(b->tls.certfile.value);
    free(b->tls.keyfile.value);
    free(b->tls.alpn.value);
    free(b->tls.psk_identity.value);
    if (b->tls.psk.value) OPENSSL_cleanse(b->tls.psk.value, strlen(b->tls.psk.value));
    free(b->tls.psk.value);
}

bool bridge_config_uses_tls(const struct bridge_config *b)
{
    return b->tls.cafile.value || b->tls.capath.value || b->tls.psk.value;
}

void bridge_config_free(struct bridge_config *bridges, size_t count)
{
    for (size_t i = 0; i < count; i++)
        one_free(&bridges[i]);
    free(bridges);
}

static char *concat(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *out = malloc(la + lb + 1);
    if (!out) return NULL;
    memcpy(out, a, la);
    memcpy(out + la, b, lb + 1);
    return out;
}

/* "" in the file is Mosquitto's place marker for an empty value. */
static const char *unmark(const char *word)
{
    return strcmp(word, "\"\"") == 0 ? "" : word;
}

static int parse_bool(const char *word, bool *out)
{
    if (strcmp(word, "true") == 0)
        *out = true;
    else if (strcmp(word, "false") == 0)
        *out = false;
    else
        return -1;
    return 0;
}

static int parse_uint(const char *word, unsigned long long max, unsigned long long *out)
{
    if (word[0] < '0' || word[0] > '9') return -1;
    char *end;
    unsigned long long v = strtoull(word, &end, 10);
    if (*end != '\0' || v > max) return -1;
    *out = v;
    return 0;
}

/* host[:port] (an IPv6 address needs brackets when a port follows, or is taken whole). */
static int parse_address(const char *word, struct bridge_address *out, char *why, size_t why_len)
{
    const char *host = word, *port = NULL;
    size_t host_len = strlen(word);
    if (word[0] == '[') {
        const char *close = strchr(word, ']');
        if (!close) return FAIL("address \"%s\": missing ']'", word);
        host = word + 1;
        host_len = (size_t)(close - host);
        if (close[1] == ':')
            port = close + 2;
        else if (close[1] != '\0')
            return FAIL("address \"%s\": expected ':' after ']'", word);
    } else {
        const char *colon = strchr(word, ':');
        if (colon && strchr(colon + 1, ':') == NULL) {
            host_len = (size_t)(colon - word);
            port = colon + 1;
        }
    }
    if (host_len == 0) return FAIL("address \"%s\": missing host", word);
    unsigned long long p = 1883;
    if (port && (parse_uint(port, 65535, &p) != 0 || p == 0))
        return FAIL("address \"%s\": invalid port", word);
    out->host = strndup(host, host_len);
    if (!out->host) return FAIL("out of memory");
    out->port = (uint16_t)p;
    return 0;
}

static int add_topic(struct bridge_config *b, const struct bridge_line *line, char *why,
                     size_t why_len)
{
    const char *const *w = line->words;
    size_t n = line->word_count;
    if (n == 0) return FAIL("missing value (a topic pattern)");
    if (n > 5) return FAIL("too many values (pattern [direction [qos [local remote]]])");
    if (n == 4) return FAIL("a local prefix needs a remote prefix after it");
    struct bridge_topic t = {.direction = BRIDGE_OUT, .qos = 0};
    if (n >= 2) {
        if (strcmp(w[1], "out") == 0)
            t.direction = BRIDGE_OUT;
        else if (strcmp(w[1], "in") == 0)
            t.direction = BRIDGE_IN;
        else if (strcmp(w[1], "both") == 0)
            t.direction = BRIDGE_BOTH;
        else
            return FAIL("direction \"%s\" is not in, out or both", w[1]);
    }
    if (n >= 3) {
        unsigned long long q;
        if (parse_uint(w[2], 2, &q) != 0) return FAIL("QoS \"%s\" is not 0, 1 or 2", w[2]);
        t.qos = (uint8_t)q;
    }
    const char *pattern = unmark(w[0]);
    const char *local = n == 5 ? unmark(w[3]) : "";
    const char *remote = n == 5 ? unmark(w[4]) : "";
    /* Mosquitto's table: an empty pattern needs both prefixes, which are then whole topics. */
    if (pattern[0] == '\0' && (local[0] == '\0' || remote[0] == '\0'))
        return FAIL("an empty (\"\") pattern needs both a local and a remote prefix");
    if (strpbrk(local, "+#") || strpbrk(remote, "+#"))
        return FAIL("a prefix may not hold a wildcard (+ or #)");
    t.pattern = strdup(pattern);
    t.local_prefix = strdup(local);
    t.remote_prefix = strdup(remote);
    t.local_filter = concat(local, pattern);
    t.remote_filter = concat(remote, pattern);
    if (!t.pattern || !t.local_prefix || !t.remote_prefix || !t.local_filter ||
        !t.remote_filter) {
        topic_free(&t);
        return FAIL("out of memory");
    }
    if (!topic_filter_is_valid(t.local_filter, strlen(t.local_filter)) ||
        !topic_filter_is_valid(t.remote_filter, strlen(t.remote_filter))) {
        int rc = FAIL("\"%s\" with its prefixes is not a valid topic filter", pattern);
        topic_free(&t);
        return rc;
    }
    struct bridge_topic *grown = realloc(b->topics, (b->topic_count + 1) * sizeof *grown);
    if (!grown) {
        topic_free(&t);
        return FAIL("out of memory");
    }
    b->topics = grown;
    b->topics[b->topic_count++] = t;
    return 0;
}

static int add_addresses(struct bridge_config *b, const struct bridge_line *line, char *why,
                         size_t why_len)
{
    if (line->word_count == 0) return FAIL("missing value (host[:port] ...)");
    for (size_t i = 0; i < line->word_count; i++) {
        struct bridge_address a;
        if (parse_address(line->words[i], &a, why, why_len) != 0) return -1;
        struct bridge_address *grown =
            realloc(b->addresses, (b->address_count + 1) * sizeof *grown);
        if (!grown) {
            free(a.host);
            return FAIL("out of memory");
        }
        b->addresses = grown;
        b->addresses[b->address_count++] = a;
    }
    return 0;
}

static int set_text(char **slot, const struct bridge_line *line, char *why, size_t why_len)
{
    if (line->rest[0] == '\0') return FAIL("missing value");
    char *copy = strdup(line->rest);
    if (!copy) return FAIL("out of memory");
    free(*slot);
    *slot = copy;
    return 0;
}

static int set_path(struct arbor_setting *slot, const struct bridge_line *line, char *why,
                    size_t why_len)
{
    if (line->rest[0] == '\0') return FAIL("missing value (a path)");
    const char *base = line->base_dir;
    char *path = line->rest[0] != '/' && base && base[0] ? NULL : strdup(line->rest);
    if (!path) {
        size_t size = strlen(base ? base : "") + strlen(line->rest) + 2;
        path = malloc(size);
        if (path) snprintf(path, size, "%s/%s", base, line->rest);
    }
    if (!path) return FAIL("out of memory");
    free(slot->value);
    slot->value = path;
    slot->at = line->at;
    return 0;
}

static int one_word(const struct bridge_line *line, const char *what, char *why, size_t why_len)
{
    if (line->word_count == 0) return FAIL("missing value (%s)", what);
    if (line->word_count > 1) return FAIL("one value expected (%s)", what);
    return 0;
}

/* A text value with its place, for the checks made once the bridge is complete. */
static int set_setting(struct arbor_setting *slot, const char *value,
                       const struct bridge_line *line, char *why, size_t why_len)
{
    if (value[0] == '\0') return FAIL("missing value");
    char *copy = strdup(value);
    if (!copy) return FAIL("out of memory");
    free(slot->value);
    slot->value = copy;
    slot->at = line->at;
    return 0;
}

/* bridge_psk: checked here as psk_file's keys are (the TLS transport reads it again). */
static int set_psk(struct arbor_setting *slot, const struct bridge_line *line, char *why,
                   size_t why_len)
{
    if (one_word(line, "a key in hexadecimal", why, why_len) != 0) return -1;
    uint8_t key[PSK_KEY_MAX_BYTES];
    size_t len;
    const char *reason;
    int rc = psk_key_from_hex(line->words[0], key, &len, &reason);
    OPENSSL_cleanse(key, sizeof key);
    if (rc != 0) return FAIL("%s", reason);
    if (slot->value) OPENSSL_cleanse(slot->value, strlen(slot->value));
    return set_setting(slot, line->words[0], line, why, why_len);
}

static int set_bool(bool *slot, const struct bridge_line *line, char *why, size_t why_len)
{
    if (one_word(line, "true or false", why, why_len) != 0) return -1;
    if (parse_bool(line->words[0], slot) != 0)
        return FAIL("value \"%s\" is not true or false", line->words[0]);
    return 0;
}

static int set_uint(uint32_t *slot, unsigned long long max, const struct bridge_line *line,
                    char *why, size_t why_len)
{
    if (one_word(line, "a number", why, why_len) != 0) return -1;
    unsigned long long v;
    if (parse_uint(line->words[0], max, &v) != 0)
        return FAIL("value \"%s\" is not a number from 0 to %llu", line->words[0], max);
    *slot = (uint32_t)v;
    return 0;
}

static int start_bridge(struct bridge_config **bridges, size_t *count,
                        const struct bridge_line *line, char *why, size_t why_len)
{
    if (one_word(line, "a name", why, why_len) != 0) return -1;
    for (size_t i = 0; i < *count; i++)
        if (strcmp((*bridges)[i].name, line->words[0]) == 0)
            return FAIL("a bridge named \"%s\" is already given at line %d", line->words[0],
                        (*bridges)[i].at.line);
    struct bridge_config *grown = realloc(*bridges, (*count + 1) * sizeof *grown);
    if (!grown) return FAIL("out of memory");
    *bridges = grown;
    struct bridge_config *b = &grown[*count];
    *b = (struct bridge_config){
        .at = line->at,
        .protocol_version = 4,
        .keepalive = 60,
        .idle_timeout_s = 60,
        .threshold = 10,
        .restart_base_s = 5,
        .restart_cap_s = 30,
        .notifications = true,
        .try_private = true,
        .attempt_unsubscribe = true,
        .outgoing_retain = true,
        .tls.min_version = ARBOR_TLS_V1_2,
    };
    if (!(b->name = strdup(line->words[0]))) return FAIL("out of memory");
    (*count)++;
    return 0;
}

int bridge_config_line(struct bridge_config **bridges, size_t *count,
                       const struct bridge_line *line, char *why, size_t why_len, char *warning,
                       size_t warning_len)
{
    const char *name = line->name;
    if (warning_len) warning[0] = '\0';
    if (strcmp(name, "connection") == 0) return start_bridge(bridges, count, line, why, why_len);
    if (*count == 0) return FAIL("only allowed after a connection line (a bridge)");
    struct bridge_config *b = &(*bridges)[*count - 1];
    if (strcmp(name, "address") == 0 || strcmp(name, "addresses") == 0)
        return add_addresses(b, line, why, why_len);
    if (strcmp(name, "topic") == 0) return add_topic(b, line, why, why_len);
    if (strcmp(name, "bridge_protocol_version") == 0) {
        if (one_word(line, "mqttv50, mqttv311 or mqttv31", why, why_len) != 0) return -1;
        const char *v = line->words[0];
        if (strcmp(v, "mqttv31") == 0)
            b->protocol_version = 3;
        else if (strcmp(v, "mqttv311") == 0)
            b->protocol_version = 4;
        else if (strcmp(v, "mqttv50") == 0)
            b->protocol_version = 5;
        else
            return FAIL("value \"%s\" is not mqttv50, mqttv311 or mqttv31", v);
        return 0;
    }
    if (strcmp(name, "cleansession") == 0) return set_bool(&b->cleansession, line, why, why_len);
    if (strcmp(name, "local_cleansession") == 0) {
        b->local_cleansession_set = true;
        return set_bool(&b->local_cleansession, line, why, why_len);
    }
    if (strcmp(name, "keepalive_interval") == 0) {
        uint32_t v;
        if (set_uint(&v, 65535, line, why, why_len) != 0) return -1;
        if (v < 5) {
            snprintf(warning, warning_len, "keepalive interval too low, using 5 seconds.");
            v = 5;
        }
        b->keepalive = (uint16_t)v;
        return 0;
    }
    if (strcmp(name, "idle_timeout") == 0)
        return set_uint(&b->idle_timeout_s, UINT32_MAX, line, why, why_len);
    if (strcmp(name, "threshold") == 0) {
        if (set_uint(&b->threshold, UINT32_MAX, line, why, why_len) != 0) return -1;
        if (b->threshold == 0) return FAIL("value 0 is not a number from 1 to %u", UINT32_MAX);
        return 0;
    }
    if (strcmp(name, "bridge_priority") == 0) { /* arbor's own: one uplink per tree */
        uint32_t v;
        if (set_uint(&v, 65535, line, why, why_len) != 0) return -1;
        b->priority = (uint16_t)v;
        return 0;
    }
    if (strcmp(name, "start_type") == 0) {
        if (one_word(line, "automatic, lazy or once", why, why_len) != 0) return -1;
        const char *v = line->words[0];
        if (strcmp(v, "automatic") == 0)
            b->start_type = BRIDGE_START_AUTOMATIC;
        else if (strcmp(v, "lazy") == 0)
            b->start_type = BRIDGE_START_LAZY;
        else if (strcmp(v, "once") == 0)
            b->start_type = BRIDGE_START_ONCE;
        else
            return FAIL("value \"%s\" is not automatic, lazy or once", v);
        return 0;
    }
    if (strcmp(name, "restart_timeout") == 0) {
        unsigned long long base, cap;
        if (line->word_count < 1 || line->word_count > 2)
            return FAIL("expected a constant, or a base and a cap (seconds)");
        if (parse_uint(line->words[0], UINT32_MAX, &base) != 0 || base == 0)
            return FAIL("value \"%s\" is not a number of seconds from 1", line->words[0]);
        if (line->word_count == 1) {
            b->restart_constant = true;
            b->restart_base_s = b->restart_cap_s = (uint32_t)base;
            return 0;
        }
        if (parse_uint(line->words[1], UINT32_MAX, &cap) != 0 || cap < base)
            return FAIL("cap \"%s\" is not a number of seconds at least the base",
                        line->words[1]);
        b->restart_constant = false;
        b->restart_base_s = (uint32_t)base;
        b->restart_cap_s = (uint32_t)cap;
        return 0;
    }
    if (strcmp(name, "round_robin") == 0) return set_bool(&b->round_robin, line, why, why_len);
    if (strcmp(name, "notifications") == 0)
        return set_bool(&b->notifications, line, why, why_len);
    if (strcmp(name, "notifications_local_only") == 0)
        return set_bool(&b->notifications_local_only, line, why, why_len);
    if (strcmp(name, "notification_topic") == 0) {
        if (one_word(line, "a topic", why, why_len) != 0) return -1;
        if (!topic_name_is_valid(line->words[0], strlen(line->words[0])))
            return FAIL("\"%s\" is not a valid topic name", line->words[0]);
        return set_text(&b->notification_topic, line, why, why_len);
    }
    if (strcmp(name, "remote_clientid") == 0 || strcmp(name, "clientid") == 0)
        return set_text(&b->remote_clientid, line, why, why_len);
    if (strcmp(name, "remote_username") == 0 || strcmp(name, "username") == 0)
        return set_text(&b->remote_username, line, why, why_len);
    if (strcmp(name, "remote_password") == 0 || strcmp(name, "password") == 0)
        return set_text(&b->remote_password, line, why, why_len);
    if (strcmp(name, "local_clientid") == 0)
        return set_text(&b->local_clientid, line, why, why_len);
    if (strcmp(name, "local_username") == 0)
        return set_text(&b->local_username, line, why, why_len);
    if (strcmp(name, "local_password") == 0)
        return set_text(&b->local_password, line, why, why_len);
    if (strcmp(name, "try_private") == 0) return set_bool(&b->try_private, line, why, why_len);
    if (strcmp(name, "bridge_attempt_unsubscribe") == 0)
        return set_bool(&b->attempt_unsubscribe, line, why, why_len);
    if (strcmp(name, "bridge_outgoing_retain") == 0)
        return set_bool(&b->outgoing_retain, line, why, why_len);
    if (strcmp(name, "bridge_max_packet_size") == 0)
        return set_uint(&b->max_packet_size, 268435455 + 5, line, why, why_len);
    if (strcmp(name, "bridge_bind_address") == 0)
        return set_text(&b->bind_address, line, why, why_len);
    if (strcmp(name, "bridge_cafile") == 0) return set_path(&b->tls.cafile, line, why, why_len);
    if (strcmp(name, "bridge_capath") == 0) return set_path(&b->tls.capath, line, why, why_len);
    if (strcmp(name, "bridge_certfile") == 0)
        return set_path(&b->tls.certfile, line, why, why_len);
    if (strcmp(name, "bridge_keyfile") == 0) return set_path(&b->tls.keyfile, line, why, why_len);
    if (strcmp(name, "bridge_insecure") == 0) return set_bool(&b->insecure, line, why, why_len);
    if (strcmp(name, "bridge_tls_version") == 0) {
        if (one_word(line, "tlsv1.3, tlsv1.2 or tlsv1.1", why, why_len) != 0) return -1;
        const char *v = line->words[0];
        if (strcmp(v, "tlsv1.3") == 0)
            b->tls.min_version = ARBOR_TLS_V1_3;
        else if (strcmp(v, "tlsv1.2") == 0)
            b->tls.min_version = ARBOR_TLS_V1_2;
        else if (strcmp(v, "tlsv1.1") == 0)
            b->tls.min_version = ARBOR_TLS_V1_1;
        else
            return FAIL("value \"%s\" is not tlsv1.3, tlsv1.2 or tlsv1.1", v);
        return 0;
    }
    if (strcmp(name, "bridge_alpn") == 0) {
        if (one_word(line, "a protocol name", why, why_len) != 0) return -1;
        if (strlen(line->words[0]) > 255) return FAIL("a protocol name has at most 255 bytes");
        return set_setting(&b->tls.alpn, line->words[0], line, why, why_len);
    }
    if (strcmp(name, "bridge_identity") == 0) {
        if (strlen(line->rest) > PSK_IDENTITY_MAX_BYTES)
            return FAIL("an identity has at most %d bytes", PSK_IDENTITY_MAX_BYTES);
        return set_setting(&b->tls.psk_identity, line->rest, line, why, why_len);
    }
    if (strcmp(name, "bridge_psk") == 0) return set_psk(&b->tls.psk, line, why, why_len);
    if (strcmp(name, "bridge_require_ocsp") == 0) {
        b->tls.require_ocsp_at = line->at;
        return set_bool(&b->tls.require_ocsp, line, why, why_len);
    }
    return FAIL("unknown bridge directive");
}

/* A fault of a directive that the rest of its bridge makes wrong: reported at its line. */
#define FAULT(place, name, ...) (fault->at = (place), fault->directive = (name), FAIL(__VA_ARGS__))

/* A pre-shared key goes with an identity and with no certificate (mosquitto.conf(5): "Only
 * one of certificate and PSK based encryption can be used on one bridge at once"). */
static int check_psk(const struct bridge_config *b, struct bridge_fault *fault, char *why,
                     size_t why_len)
{
    const struct arbor_tls_settings *tls = &b->tls;
    if (!tls->psk.value)
        return FAULT(tls->psk_identity.at, "bridge_identity",
                     "needs bridge_psk (TLS with a pre-shared key needs both)");
    if (!tls->psk_identity.value)
        return FAULT(tls->psk.at, "bridge_psk",
                     "needs bridge_identity (TLS with a pre-shared key needs both)");
    const struct {
        const struct arbor_setting *setting;
        const char *name;
    } certificate_lines[] = {{&tls->cafile, "bridge_cafile"},
                             {&tls->capath, "bridge_capath"},
                             {&tls->certfile, "bridge_certfile"},
                             {&tls->keyfile, "bridge_keyfile"}};
    for (size_t i = 0; i < sizeof certificate_lines / sizeof certificate_lines[0]; i++) {
        const struct arbor_setting *given = certificate_lines[i].setting;
        if (given->value)
            return FAULT(tls->psk.at, "bridge_psk",
                         "certificate and pre-shared key based TLS cannot be used on one "
                         "bridge at once, and %s is given at %s:%d",
                         certificate_lines[i].name, given->at.file ? given->at.file : "config",
                         given->at.line);
    }
    if (b->insecure)
        return FAULT(tls->psk.at, "bridge_psk",
                     "bridge_insecure is about certificates, and a pre-shared key has none");
    return 0;
}

/* The TLS lines of b that need others: a fault is reported at the line to change. */
static int check_tls(const struct bridge_config *b, struct bridge_fault *fault, char *why,
                     size_t why_len)
{
    const struct arbor_tls_settings *tls = &b->tls;
    bool psk = tls->psk.value || tls->psk_identity.value;
    if (psk && check_psk(b, fault, why, why_len) != 0) return -1;
    bool certificates = tls->cafile.value || tls->capath.value;
    if (tls->alpn.value && !certificates && !psk)
        return FAULT(tls->alpn.at, "bridge_alpn",
                     "needs TLS: bridge_cafile or bridge_capath, or bridge_identity and "
                     "bridge_psk");
    if (tls->require_ocsp && !certificates)
        return FAULT(tls->require_ocsp_at, "bridge_require_ocsp",
                     psk ? "a pre-shared key has no certificate for OCSP to vouch for"
                         : "needs TLS with certificates: bridge_cafile or bridge_capath");
    return 0;
}

static int finish_one(struct bridge_config *b, const char *hostname, struct bridge_fault *fault,
                      char *why, size_t why_len)
{
    if (check_tls(b, fault, why, why_len) != 0) return -1;
    if (b->address_count == 0) return FAIL("bridge \"%s\" has no address line", b->name);
    if (b->topic_count == 0) return FAIL("bridge \"%s\" has no topic line", b->name);
    if (b->remote_password && !b->remote_username)
        return FAIL("bridge \"%s\": remote_password needs remote_username", b->name);
    if ((b->tls.certfile.value != NULL) != (b->tls.keyfile.value != NULL))
        return FAIL("bridge \"%s\": bridge_certfile and bridge_keyfile go together", b->name);
    if ((b->tls.certfile.value || b->insecure) && !b->tls.cafile.value && !b->tls.capath.value)
        return FAIL("bridge \"%s\": TLS needs bridge_cafile or bridge_capath", b->name);
    if (!b->local_cleansession_set) b->local_cleansession = b->cleansession;
    if (!b->remote_clientid) {
        size_t size = strlen(hostname) + strlen(b->name) + 2;
        if (!(b->remote_clientid = malloc(size))) return FAIL("out of memory");
        snprintf(b->remote_clientid, size, "%s.%s", hostname, b->name);
    }
    if (!b->local_clientid && !(b->local_clientid = concat("local.", b->remote_clientid)))
        return FAIL("out of memory");
    if (!b->notification_topic) {
        size_t size = strlen(b->remote_clientid) + 40;
        if (!(b->notification_topic = malloc(size))) return FAIL("out of memory");
        snprintf(b->notification_topic, size, "$SYS/broker/connection/%s/state",
                 b->remote_clientid);
    }
    return 0;
}

int bridge_config_finish(struct bridge_config *bridges, size_t count, struct bridge_fault *fault,
                         char *why, size_t why_len)
{
    char hostname[HOST_NAME_MAX + 1] = "localhost";
    if (count && gethostname(hostname, sizeof hostname) != 0) strcpy(hostname, "localhost");
    hostname[HOST_NAME_MAX] = '\0';
    for (size_t i = 0; i < count; i++) {
        *fault = (struct bridge_fault){.at = bridges[i].at, .directive = "connection"};
        if (finish_one(&bridges[i], hostname, fault, why, why_len) != 0) return -1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(bridges[i].remote_clientid, bridges[j].remote_clientid) == 0)
                return FAIL("bridge \"%s\" has the remote client id \"%s\" of bridge \"%s\"",
                            bridges[i].name, bridges[i].remote_clientid, bridges[j].name);
    }
    return 0;
}
