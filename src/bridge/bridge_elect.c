/*
 * bridge_elect.c: fingerprint, announcement text and election of a bridge shared by the tree
 * (bridge_elect.h; docs/mqtt-st-protocol.md 7.5). The text is read strictly (one blank
 * between fields, LF after each line, digits only where numbers are), like the origin
 * property (peer_origin.c), so that one announcement has one meaning on every broker.
 */
#include "bridge_elect.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bridge_config.h"

/* ---- fingerprint -------------------------------------------------------------------------- */

#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME UINT64_C(0x100000001b3)

static uint64_t fnv_field(uint64_t h, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        h = (h ^ *p) * FNV_PRIME;
    return h * FNV_PRIME; /* the NUL that ends the field: h ^ 0 == h */
}

uint64_t bridge_fingerprint(const struct bridge_config *cfg)
{
    static const char *const directions[] = {"", "out", "in", "both"};
    uint64_t h = FNV_OFFSET;
    char number[8];
    for (size_t i = 0; i < cfg->address_count; i++) {
        h = fnv_field(h, cfg->addresses[i].host);
        snprintf(number, sizeof number, "%u", (unsigned)cfg->addresses[i].port);
        h = fnv_field(h, number);
    }
    for (size_t i = 0; i < cfg->topic_count; i++) {
        const struct bridge_topic *t = &cfg->topics[i];
        h = fnv_field(h, directions[t->direction & BRIDGE_BOTH]);
        snprintf(number, sizeof number, "%u", (unsigned)t->qos);
        h = fnv_field(h, number);
        h = fnv_field(h, t->local_filter);
        h = fnv_field(h, t->remote_filter);
    }
    return h;
}

/* ---- the announcement's text -------------------------------------------------------------- */

static int append_text(struct abuf *out, const char *text, int n)
{
    return n < 0 ? -1 : abuf_append(out, text, (size_t)n);
}

int bridge_announcement_format(struct abuf *out, const struct bridge_announcement *a)
{
    char text[256];
    char health[40] = "ok";
    if (a->failing) snprintf(health, sizeof health, "failing %" PRIu64, a->failing_for_ms);
    int n = snprintf(text, sizeof text,
                     "bridge %d\nfingerprint %016" PRIx64 "\nrole %s\nhealth %s\npriority %u\n"
                     "capability %" PRIu32 "\n",
                     BRIDGE_ANNOUNCE_VERSION, a->fingerprint, a->holder ? "holder" : "standby",
                     health, (unsigned)a->priority, a->capability);
    return append_text(out, text, n);
}

int bridge_announcement_add_delivered(struct abuf *out, const struct bridge_delivered *d)
{
    char id[STP_BROKER_ID_STRLEN], text[STP_BROKER_ID_STRLEN + 64];
    stp_broker_id_format(&d->origin, id, sizeof id);
    int n = snprintf(text, sizeof text, "delivered %s %016" PRIx64 " %" PRIu64 "\n", id,
                     d->incarnation, d->sequence);
    return append_text(out, text, n);
}

/* A line split into its blank-separated fields. */
#define LINE_FIELDS_MAX 4
struct line {
    const char *field[LINE_FIELDS_MAX];
    size_t len[LINE_FIELDS_MAX];
    size_t count;
};

/* The next line of text (up to LF) into l (its first LINE_FIELDS_MAX fields; count is all of
 * them); false at the end, or when the line is malformed (no LF, an empty field, a control
 * character). */
static bool next_line(const uint8_t **pos, const uint8_t *end, struct line *l, bool *bad)
{
    *bad = false;
    if (*pos == end) return false;
    const uint8_t *nl = memchr(*pos, '\n', (size_t)(end - *pos));
    if (!nl) return !(*bad = true);
    l->count = 0;
    const uint8_t *p = *pos;
    while (p <= nl) {
        const uint8_t *start = p;
        while (p < nl && *p != ' ') {
            if (*p < 0x20 || *p == 0x7f) return !(*bad = true);
            p++;
        }
        if (p == start) return !(*bad = true);
        if (l->count < LINE_FIELDS_MAX) {
            l->field[l->count] = (const char *)start;
            l->len[l->count] = (size_t)(p - start);
        }
        l->count++;
        p++; /* the blank or the LF */
    }
    *pos = nl + 1;
    return true;
}

static bool is(const struct line *l, size_t i, const char *word)
{
    return i < l->count && i < LINE_FIELDS_MAX && l->len[i] == strlen(word) && memcmp(l->field[i], word, l->len[i]) == 0;
}

static bool decimal(const struct line *l, size_t i, uint64_t max, uint64_t *out)
{
    if (i >= l->count || i >= LINE_FIELDS_MAX || l->len[i] == 0 || l->len[i] > 20) return false;
    uint64_t v = 0;
    for (size_t k = 0; k < l->len[i]; k++) {
        char c = l->field[i][k];
        if (c < '0' || c > '9') return false;
        unsigned digit = (unsigned)(c - '0');
        if (v > (max - digit) / 10) return false;
        v = v * 10 + digit;
    }
    *out = v;
    return true;
}

static bool hex16(const struct line *l, size_t i, uint64_t *out)
{
    if (i >= l->count || i >= LINE_FIELDS_MAX || l->len[i] != 16) return false;
    uint64_t v = 0;
    for (size_t k = 0; k < 16; k++) {
        char c = l->field[i][k];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return true;
}

static bool delivered_line(const struct line *l, struct bridge_delivered *d)
{
    char id[STP_BROKER_ID_STRLEN];
    if (l->count != 4 || l->len[1] >= sizeof id) return false;
    memcpy(id, l->field[1], l->len[1]);
    id[l->len[1]] = '\0';
    return stp_broker_id_from_text(&d->origin, id) && hex16(l, 2, &d->incarnation) &&
           decimal(l, 3, UINT64_MAX, &d->sequence) && d->sequence > 0;
}

/* The six lines every announcement starts with, in order. */
static bool header_line(size_t index, const struct line *l, struct bridge_announcement *a)
{
    uint64_t v;
    switch (index) {
    case 0:
        return l->count == 2 && is(l, 0, "bridge") && decimal(l, 1, 999, &v) &&
               v == BRIDGE_ANNOUNCE_VERSION;
    case 1:
        return l->count == 2 && is(l, 0, "fingerprint") && hex16(l, 1, &a->fingerprint);
    case 2:
        a->holder = is(l, 1, "holder");
        return l->count == 2 && is(l, 0, "role") && (a->holder || is(l, 1, "standby"));
    case 3:
        a->failing = is(l, 1, "failing");
        if (!a->failing) return l->count == 2 && is(l, 0, "health") && is(l, 1, "ok");
        return l->count == 3 && is(l, 0, "health") && decimal(l, 2, UINT64_MAX, &a->failing_for_ms);
    case 4:
        if (l->count != 2 || !is(l, 0, "priority") || !decimal(l, 1, 65535, &v)) return false;
        a->priority = (uint16_t)v;
        return true;
    default:
        if (l->count != 2 || !is(l, 0, "capability") || !decimal(l, 1, UINT32_MAX, &v))
            return false;
        a->capability = (uint32_t)v;
        return true;
    }
}

/* One pass over the text: checks everything; hands delivered lines over when asked to. */
static int parse_pass(const uint8_t *text, size_t len, struct bridge_announcement *a,
                      void (*on_delivered)(void *ctx, const struct bridge_delivered *d), void *ctx)
{
    const uint8_t *pos = text, *end = text + len;
    struct line l;
    bool bad;
    size_t index = 0;
    memset(a, 0, sizeof *a);
    while (next_line(&pos, end, &l, &bad)) {
        if (index < 6) {
            if (!header_line(index++, &l, a)) return -1;
            continue;
        }
        if (!is(&l, 0, "delivered")) continue; /* a later version's line */
        struct bridge_delivered d;
        if (!delivered_line(&l, &d)) return -1;
        if (on_delivered) on_delivered(ctx, &d);
    }
    return bad || index < 6 ? -1 : 0;
}

int bridge_announcement_parse(const uint8_t *text, size_t len, struct bridge_announcement *a,
                              void (*on_delivered)(void *ctx, const struct bridge_delivered *d),
                              void *ctx)
{
    if (parse_pass(text, len, a, NULL, NULL) != 0) return -1;
    return on_delivered ? parse_pass(text, len, a, on_delivered, ctx) : 0;
}

/* ---- the election ------------------------------------------------------------------------- */

/* >0 when a ranks above b. */
static int rank(const struct bridge_contender *a, const struct bridge_contender *b)
{
    if (a->priority != b->priority) return a->priority > b->priority ? 1 : -1;
    if (a->capability != b->capability) return a->capability > b->capability ? 1 : -1;
    return -stp_broker_id_compare(&a->id, &b->id); /* the lower identity ranks higher */
}

/* The best-ranked candidate with the given properties, or n when there is none. */
static size_t best(const struct bridge_contender *c, size_t n, bool need_holder,
                   bool need_healthy)
{
    size_t chosen = n;
    for (size_t i = 0; i < n; i++) {
        if ((need_holder && !c[i].holder) || (need_healthy && !c[i].healthy)) continue;
        if (chosen == n || rank(&c[i], &c[chosen]) > 0) chosen = i;
    }
    return chosen;
}

size_t bridge_elect(const struct bridge_contender *c, size_t n)
{
    size_t chosen;
    if ((chosen = best(c, n, true, true)) < n) return chosen;
    if ((chosen = best(c, n, false, true)) < n) return chosen;
    if ((chosen = best(c, n, true, false)) < n) return chosen;
    return best(c, n, false, false);
}
