/*
 * acl.h: access control lists in Mosquitto 2.0's acl_file format (mosquitto.conf(5),
 * arbor.conf(5) "ACCESS CONTROL"): parsed once into rules, compiled per client at CONNECT into
 * a short list of filters (its user's or the anonymous section's topics plus every pattern with
 * %c/%u substituted), which the publish, delivery, retained and will paths check.
 *
 * Must not: log, touch sessions or sockets. The caller decides what a refusal means.
 */
#ifndef ARBOR_ACL_H
#define ARBOR_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum acl_access {
    ACL_READ = 1 << 0,
    ACL_WRITE = 1 << 1,
};

struct acl_rules;  /* one parsed acl_file */
struct acl_client; /* the rules that apply to one client, compiled */

/* Parse text (name is the file name, kept for messages). Returns 0 and *out, or -1 with *line
 * (1-based, 0 when no line is to blame) and a message in err (errlen bytes). */
int acl_rules_parse(const char *text, size_t len, struct acl_rules **out, int *line, char *err,
                    size_t errlen);
/* Read and parse the file at path; same contract ("unable to open" when it cannot be read). */
int acl_rules_load(const char *path, struct acl_rules **out, int *line, char *err, size_t errlen);
void acl_rules_free(struct acl_rules *rules);

/* The list for a client (username NULL: anonymous). NULL only when out of memory. A client
 * no rule names gets an empty list: everything denied. */
struct acl_client *acl_client_compile(const struct acl_rules *rules, const char *client_id,
                                      const char *username);
void acl_client_free(struct acl_client *acl);
/* The username the list was compiled for (NULL: anonymous), to compile it again on reload. */
const char *acl_client_username(const struct acl_client *acl);

/* May the client read (ACL_READ) or write (ACL_WRITE) topic? A matching deny entry wins;
 * otherwise an entry granting the access must match. $-topics are matched only by entries
 * that name them (no leading wildcard matches them). */
bool acl_client_allows(const struct acl_client *acl, const char *topic, size_t topic_len,
                       unsigned access);

/* The same check for ACL_READ across the recipients of one message: clients of the same
 * user (or all anonymous ones) share the part of their list that comes from the file as
 * written, so its verdict is computed once per message and kept here; only each client's
 * substituted patterns are matched per recipient. Zero it (= {0}) for each message (topic). */
#define ACL_READ_CACHE_SLOTS 8
struct acl_read_cache {
    const void *sections[ACL_READ_CACHE_SLOTS];
    uint8_t verdicts[ACL_READ_CACHE_SLOTS];
    unsigned count, next_victim;
};
bool acl_client_may_read(const struct acl_client *acl, const char *topic, size_t topic_len,
                         struct acl_read_cache *cache);

#endif
