/*
 * acl.c: Mosquitto 2.0's acl_file, parsed once and compiled per client.
 *
 * Grammar, one directive a line (leading blanks ignored, '#' starts a comment line):
 *   user <username>                          following topic lines are this user's
 *   topic [read|write|readwrite|deny] <filter>  before any user line: anonymous clients'
 *   pattern [read|write|readwrite|deny] <filter>  every client, %c = client id, %u = username
 * The access word is optional (readwrite); the filter is the rest of the line. Deny entries win
 * over granting ones; no matching entry means denied.
 *
 * Compiled, a client's list is two arrays: its section's (its user's or the anonymous topic
 * lines plus the patterns without %c/%u, shared by every client of that section) and its own
 * substituted patterns. The per-message check walks them (acl_client_allows); on a fan-out the
 * section's verdict is computed once per message (acl_client_may_read), so each recipient
 * costs a cache lookup plus its own few patterns. Nothing is allocated there. Must not log or
 * know about connections.
 */
#include "acl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash_table.h"

#include "text_file.h"
#include "topic.h"

#define ACL_FILE_MAX_BYTES (64 * 1024 * 1024)

struct acl_rule {
    char *filter;
    unsigned access; /* ACL_READ | ACL_WRITE; 0: deny */
};

struct acl_list {
    struct acl_rule *items;
    size_t count, cap;
};

struct acl_entry {
    const char *filter;
    size_t len;
    size_t literal_len; /* bytes before the first wildcard: a cheap first test */
    unsigned access;
};

/* The entries every client of one section shares: the section's topic lines plus the
 * patterns without %c or %u. Reference-counted: the rules hold one reference, each compiled
 * client one (a session may outlive the rules it was compiled from). One block with its
 * strings. */
struct acl_section {
    atomic_uint refs; /* clients on any event loop hold it */
    size_t count;
    struct acl_entry entries[];
};

struct acl_user {
    UT_hash_handle hh;
    char *name;
    struct acl_list list;
    struct acl_section *section;
};

struct acl_rules {
    struct acl_list anonymous; /* topic lines before the first user line */
    struct acl_list patterns;
    struct acl_user *users;             /* by name */
    struct acl_section *anonymous_section;
    struct acl_section *unknown_section; /* a user name no user line names: patterns only */
};

/* A client's list: its section, shared, and its own patterns with %c/%u substituted. */
struct acl_client {
    struct acl_section *section;
    char *username;
    bool own_denies; /* some own entry is a deny: a granted section still needs a look */
    size_t count;
    struct acl_entry entries[];
};

enum verdict { VERDICT_NONE, VERDICT_GRANTED, VERDICT_DENIED };

/* ------------------------------------------------------------------------------------------
 * Parsing
 */

struct parser {
    struct acl_rules *rules;
    struct acl_list *current; /* where topic lines go */
    char *err;
    size_t errlen;
};

static int fail(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct parser *p, const char *fmt, ...)
{
    if (p->err && p->errlen) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(p->err, p->errlen, fmt, args);
        va_end(args);
    }
    return -1;
}

static void list_free(struct acl_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        free(list->items[i].filter);
    free(list->items);
    memset(list, 0, sizeof *list);
}

static int list_add(struct acl_list *list, const char *filter, size_t len, unsigned access)
{
    if (list->count == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 8;
        struct acl_rule *items = realloc(list->items, cap * sizeof *items);
        if (!items) return -1;
        list->items = items;
        list->cap = cap;
    }
    char *copy = strndup(filter, len);
    if (!copy) return -1;
    list->items[list->count++] = (struct acl_rule){copy, access};
    return 0;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* The next word of [*pos, end): returns its length and moves *pos past it and the blanks. */
static size_t next_word(const char **pos, const char *end, const char **word)
{
    const char *s = *pos;
    while (s < end && is_blank(*s))
        s++;
    *word = s;
    while (s < end && !is_blank(*s))
        s++;
    size_t len = (size_t)(s - *word);
    while (s < end && is_blank(*s))
        s++;
    *pos = s;
    return len;
}

static bool word_is(const char *word, size_t len, const char *name)
{
    return strlen(name) == len && memcmp(word, name, len) == 0;
}

static int parse_access(const char *word, size_t len, unsigned *access)
{
    if (word_is(word, len, "read"))
        *access = ACL_READ;
    else if (word_is(word, len, "write"))
        *access = ACL_WRITE;
    else if (word_is(word, len, "readwrite"))
        *access = ACL_READ | ACL_WRITE;
    else if (word_is(word, len, "deny"))
        *access = 0;
    else
        return -1;
    return 0;
}

/* "topic ..." or "pattern ...": rest is what follows the keyword, blanks trimmed. */
static int parse_topic_line(struct parser *p, const char *rest, const char *end, bool pattern)
{
    if (rest == end) return fail(p, "empty topic");
    const char *pos = rest, *word;
    size_t word_len = next_word(&pos, end, &word);
    unsigned access = ACL_READ | ACL_WRITE;
    const char *filter = rest;
    if (pos < end) { /* two words or more: the first is the access type */
        if (parse_access(word, word_len, &access) != 0)
            return fail(p, "invalid topic access type \"%.*s\"", (int)word_len, word);
        filter = pos;
    }
    size_t len = (size_t)(end - filter);
    if (!topic_filter_is_valid(filter, len))
        return fail(p, "invalid topic filter \"%.*s\"", (int)len, filter);
    struct acl_list *list = pattern ? &p->rules->patterns : p->current;
    return list_add(list, filter, len, access) ? fail(p, "out of memory") : 0;
}

static int parse_user_line(struct parser *p, const char *rest, const char *end)
{
    if (rest == end) return fail(p, "missing username");
    size_t len = (size_t)(end - rest);
    struct acl_user *user;
    HASH_FIND(hh, p->rules->users, rest, len, user);
    if (!user) { /* a user named again continues its list */
        user = calloc(1, sizeof *user);
        if (!user || !(user->name = strndup(rest, len))) {
            free(user);
            return fail(p, "out of memory");
        }
        HASH_ADD_KEYPTR(hh, p->rules->users, user->name, len, user);
    }
    p->current = &user->list;
    return 0;
}

static int parse_line(struct parser *p, const char *line, const char *end)
{
    while (end > line && is_blank(end[-1]))
        end--;
    const char *pos = line, *word;
    size_t word_len = next_word(&pos, end, &word);
    if (word_len == 0 || word[0] == '#') return 0;
    if (word_is(word, word_len, "user")) return parse_user_line(p, pos, end);
    if (word_is(word, word_len, "topic")) return parse_topic_line(p, pos, end, false);
    if (word_is(word, word_len, "pattern")) return parse_topic_line(p, pos, end, true);
    return fail(p, "invalid line \"%.*s\" (user, topic or pattern expected)", (int)word_len,
                word);
}

static struct acl_entry make_entry(const char *filter, size_t len, unsigned access)
{
    size_t literal = strcspn(filter, "+#");
    return (struct acl_entry){filter, len, literal < len ? literal : len, access};
}

static bool has_substitution(const char *pattern)
{
    return strstr(pattern, "%c") || strstr(pattern, "%u");
}

static void section_unref(struct acl_section *section)
{
    if (section && atomic_fetch_sub_explicit(&section->refs, 1, memory_order_acq_rel) == 1)
        free(section);
}

/* own's rules plus the patterns without substitutions, in one block. */
static struct acl_section *section_create(const struct acl_list *own,
                                          const struct acl_list *patterns)
{
    size_t count = own->count, bytes = 0;
    for (size_t i = 0; i < own->count; i++)
        bytes += strlen(own->items[i].filter) + 1;
    for (size_t i = 0; i < patterns->count; i++) {
        if (has_substitution(patterns->items[i].filter)) continue;
        count++;
        bytes += strlen(patterns->items[i].filter) + 1;
    }
    size_t head = sizeof(struct acl_section) + count * sizeof(struct acl_entry);
    struct acl_section *section = malloc(head + bytes);
    if (!section) return NULL;
    atomic_init(&section->refs, 1);
    section->count = 0;
    char *strings = (char *)section + head;
    const struct acl_list *lists[2] = {own, patterns};
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; i < lists[l]->count; i++) {
            const struct acl_rule *r = &lists[l]->items[i];
            if (l == 1 && has_substitution(r->filter)) continue;
            size_t len = strlen(r->filter);
            memcpy(strings, r->filter, len + 1);
            section->entries[section->count++] = make_entry(strings, len, r->access);
            strings += len + 1;
        }
    }
    return section;
}

static int compile_sections(struct acl_rules *rules)
{
    static const struct acl_list none;
    rules->anonymous_section = section_create(&rules->anonymous, &rules->patterns);
    rules->unknown_section = section_create(&none, &rules->patterns);
    if (!rules->anonymous_section || !rules->unknown_section) return -1;
    for (struct acl_user *user = rules->users; user; user = user->hh.next)
        if (!(user->section = section_create(&user->list, &rules->patterns))) return -1;
    return 0;
}

int acl_rules_parse(const char *text, size_t len, struct acl_rules **out, int *line, char *err,
                    size_t errlen)
{
    *out = NULL;
    *line = 0;
    struct acl_rules *rules = calloc(1, sizeof *rules);
    if (!rules) {
        struct parser p = {.err = err, .errlen = errlen};
        return fail(&p, "out of memory");
    }
    struct parser p = {rules, &rules->anonymous, err, errlen};
    const char *pos = text, *end = text + len;
    for (int number = 1; pos < end; number++) {
        const char *eol = memchr(pos, '\n', (size_t)(end - pos));
        if (!eol) eol = end;
        int status = memchr(pos, '\0', (size_t)(eol - pos)) ? fail(&p, "NUL byte in line")
                                                             : parse_line(&p, pos, eol);
        if (status != 0) {
            *line = number;
            acl_rules_free(rules);
            return -1;
        }
        pos = eol < end ? eol + 1 : end;
    }
    if (compile_sections(rules) != 0) {
        acl_rules_free(rules);
        return fail(&p, "out of memory");
    }
    *out = rules;
    return 0;
}

int acl_rules_load(const char *path, struct acl_rules **out, int *line, char *err, size_t errlen)
{
    *out = NULL;
    *line = 0;
    struct parser p = {.err = err, .errlen = errlen};
    char *text;
    size_t len;
    switch (text_file_read(path, ACL_FILE_MAX_BYTES, 0, &text, &len)) {
    case TEXT_FILE_OK:
        break;
    case TEXT_FILE_CANNOT_OPEN:
        return fail(&p, "unable to open acl_file: %s", strerror(errno));
    case TEXT_FILE_CANNOT_READ:
        return fail(&p, "unable to read acl_file: %s", strerror(errno));
    case TEXT_FILE_NUL_BYTE:
        return fail(&p, "acl_file contains a NUL byte");
    default:
        return fail(&p, "out of memory or acl_file too large");
    }
    int status = acl_rules_parse(text, len, out, line, err, errlen);
    text_file_free(text, len, 0);
    return status;
}

void acl_rules_free(struct acl_rules *rules)
{
    if (!rules) return;
    list_free(&rules->anonymous);
    list_free(&rules->patterns);
    section_unref(rules->anonymous_section);
    section_unref(rules->unknown_section);
    struct acl_user *user, *tmp;
    HASH_ITER(hh, rules->users, user, tmp)
    {
        HASH_DEL(rules->users, user);
        list_free(&user->list);
        section_unref(user->section);
        free(user->name);
        free(user);
    }
    free(rules);
}

/* ------------------------------------------------------------------------------------------
 * Compiling for one client
 */

/* Length of pattern with %c and %u substituted, or 0 when it cannot apply to this client: %u
 * without a username, or a value holding a wildcard (it would widen the filter). */
static size_t substituted_length(const char *pattern, const char *client_id, const char *username)
{
    size_t len = 0;
    for (const char *s = pattern; *s; s++) {
        if (s[0] == '%' && (s[1] == 'c' || s[1] == 'u')) {
            const char *value = s[1] == 'c' ? client_id : username;
            if (!value || strpbrk(value, "+#")) return 0;
            len += strlen(value);
            s++;
        } else {
            len++;
        }
    }
    return len;
}

static size_t substitute(const char *pattern, const char *client_id, const char *username,
                         char *out)
{
    char *o = out;
    for (const char *s = pattern; *s; s++) {
        if (s[0] == '%' && (s[1] == 'c' || s[1] == 'u')) {
            const char *value = s[1] == 'c' ? client_id : username;
            size_t n = strlen(value);
            memcpy(o, value, n);
            o += n;
            s++;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
    return (size_t)(o - out);
}

struct acl_client *acl_client_compile(const struct acl_rules *rules, const char *client_id,
                                      const char *username)
{
    struct acl_section *section = rules->anonymous_section;
    if (username) {
        struct acl_user *user;
        HASH_FIND(hh, rules->users, username, strlen(username), user);
        section = user ? user->section : rules->unknown_section;
    }
    /* One block: header, entries, then the substituted filters. */
    size_t count = 0, bytes = 0;
    for (size_t i = 0; i < rules->patterns.count; i++) {
        const char *filter = rules->patterns.items[i].filter;
        if (!has_substitution(filter)) continue;
        size_t len = substituted_length(filter, client_id, username);
        if (len) count++, bytes += len + 1;
    }
    size_t head = sizeof(struct acl_client) + count * sizeof(struct acl_entry);
    struct acl_client *acl = malloc(head + bytes);
    if (!acl) return NULL;
    acl->username = username ? strdup(username) : NULL;
    if (username && !acl->username) {
        free(acl);
        return NULL;
    }
    acl->section = section;
    atomic_fetch_add_explicit(&section->refs, 1, memory_order_relaxed);
    char *strings = (char *)acl + head;
    size_t n = 0;
    for (size_t i = 0; i < rules->patterns.count; i++) {
        const struct acl_rule *r = &rules->patterns.items[i];
        if (!has_substitution(r->filter) || !substituted_length(r->filter, client_id, username))
            continue;
        size_t len = substitute(r->filter, client_id, username, strings);
        /* A client id with '/' adds levels; one making the filter invalid cannot match. */
        if (topic_filter_is_valid(strings, len)) acl->entries[n++] = make_entry(strings, len, r->access);
        strings += len + 1;
    }
    acl->count = n;
    acl->own_denies = false;
    for (size_t i = 0; i < n; i++)
        if (!acl->entries[i].access) acl->own_denies = true;
    return acl;
}

void acl_client_free(struct acl_client *acl)
{
    if (!acl) return;
    section_unref(acl->section);
    free(acl->username);
    free(acl);
}

const char *acl_client_username(const struct acl_client *acl)
{
    return acl->username;
}

/* What entries say about access to topic: a matching deny wins over any grant. */
static enum verdict evaluate(const struct acl_entry *entries, size_t count, const char *topic,
                             size_t topic_len, unsigned access)
{
    enum verdict verdict = VERDICT_NONE;
    for (size_t i = 0; i < count; i++) {
        const struct acl_entry *e = &entries[i];
        if (verdict == VERDICT_GRANTED && e->access) continue; /* only a deny changes it now */
        /* The filter's literal start must be the topic's (as far as the topic goes: "a/#"
         * also matches "a"). Most entries fail here, without walking levels. */
        size_t literal = e->literal_len < topic_len ? e->literal_len : topic_len;
        if (literal && (e->filter[0] != topic[0] || memcmp(e->filter, topic, literal) != 0))
            continue;
        if (!topic_matches(e->filter, e->len, topic, topic_len)) continue;
        if (!e->access) return VERDICT_DENIED;
        if (e->access & access) verdict = VERDICT_GRANTED;
    }
    return verdict;
}

static bool combine(enum verdict shared, enum verdict own)
{
    if (shared == VERDICT_DENIED || own == VERDICT_DENIED) return false;
    return shared == VERDICT_GRANTED || own == VERDICT_GRANTED;
}

bool acl_client_allows(const struct acl_client *acl, const char *topic, size_t topic_len,
                       unsigned access)
{
    const struct acl_section *section = acl->section;
    enum verdict shared = evaluate(section->entries, section->count, topic, topic_len, access);
    if (shared == VERDICT_DENIED) return false;
    return combine(shared, evaluate(acl->entries, acl->count, topic, topic_len, access));
}

bool acl_client_may_read(const struct acl_client *acl, const char *topic, size_t topic_len,
                         struct acl_read_cache *cache)
{
    const struct acl_section *section = acl->section;
    enum verdict shared = VERDICT_NONE;
    unsigned i = 0;
    while (i < cache->count && cache->sections[i] != section)
        i++;
    if (i < cache->count) {
        shared = cache->verdicts[i];
    } else {
        shared = evaluate(section->entries, section->count, topic, topic_len, ACL_READ);
        unsigned slot = cache->count < ACL_READ_CACHE_SLOTS ? cache->count++
                                                            : cache->next_victim++ %
                                                                  ACL_READ_CACHE_SLOTS;
        cache->sections[slot] = section;
        cache->verdicts[slot] = (uint8_t)shared;
    }
    if (shared == VERDICT_DENIED) return false;
    if (shared == VERDICT_GRANTED && !acl->own_denies) return true;
    return combine(shared, evaluate(acl->entries, acl->count, topic, topic_len, ACL_READ));
}
