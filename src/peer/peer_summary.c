/*
 * peer_summary.c: summary, lost and skip notice text, and the stream line of the state kept across
 * restarts (peer_summary.h). Read strictly, as the origin
 * property is (peer_origin.c): one blank between fields, LF after each line, decimal numbers
 * without signs, ranges ascending and apart.
 */
#include "peer_summary.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int peer_summary_format_header(struct abuf *out, enum peer_summary_kind kind, bool want,
                               bool fresh)
{
    const char *text = kind == PEER_SUMMARY_LOST   ? "lost 1\n"
                       : kind == PEER_SUMMARY_SKIP ? "skip 1\n"
                       : want ? (fresh ? "summary 1 want fresh\n" : "summary 1 want\n")
                              : (fresh ? "summary 1 reply fresh\n" : "summary 1 reply\n");
    return abuf_append(out, text, strlen(text));
}

int peer_summary_format_run(struct abuf *out, const struct stp_broker_id *broker,
                            uint64_t incarnation, const struct seqset *seqs)
{
    if (!seqs->count) return 0;
    char id[STP_BROKER_ID_STRLEN], text[STP_BROKER_ID_STRLEN + 48];
    stp_broker_id_format(broker, id, sizeof id);
    int n = snprintf(text, sizeof text, "run %s %016" PRIx64 " ", id, incarnation);
    if (n < 0 || abuf_append(out, text, (size_t)n) != 0) return -1;
    for (size_t i = 0; i < seqs->count; i++) {
        const struct seq_range *r = &seqs->ranges[i];
        n = r->lo == r->hi ? snprintf(text, sizeof text, "%s%" PRIu64, i ? "," : "", r->lo)
                           : snprintf(text, sizeof text, "%s%" PRIu64 "-%" PRIu64, i ? "," : "",
                                      r->lo, r->hi);
        if (n < 0 || abuf_append(out, text, (size_t)n) != 0) return -1;
    }
    return abuf_append(out, "\n", 1);
}

/* ---- parsing ------------------------------------------------------------------------------ */

struct cursor {
    const char *p, *end; /* the current line, without its LF */
};

/* The next field of the line (up to a blank or the line's end); false when there is none or
 * it is empty. */
static bool field(struct cursor *c, const char **start, size_t *len)
{
    if (c->p >= c->end) return false;
    *start = c->p;
    while (c->p < c->end && *c->p != ' ') c->p++;
    *len = (size_t)(c->p - *start);
    if (c->p < c->end) {
        c->p++; /* the blank: a field must follow */
        if (c->p == c->end) return false;
    }
    return *len > 0;
}

static bool word(struct cursor *c, const char *expected)
{
    const char *f;
    size_t len;
    return field(c, &f, &len) && len == strlen(expected) && memcmp(f, expected, len) == 0;
}

static bool decimal(const char **p, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    const char *start = *p;
    while (*p < end && **p >= '0' && **p <= '9') {
        unsigned digit = (unsigned)(**p - '0');
        if (v > (UINT64_MAX - digit) / 10) return false;
        v = v * 10 + digit;
        (*p)++;
    }
    *out = v;
    return *p > start;
}

static bool parse_ranges(const char *p, const char *end, struct seqset *set)
{
    uint64_t last = 0;
    bool first = true;
    while (p < end) {
        uint64_t lo, hi;
        if (!first && *p++ != ',') return false;
        if (!decimal(&p, end, &lo) || lo == 0) return false;
        hi = lo;
        if (p < end && *p == '-' && (++p, !decimal(&p, end, &hi))) return false;
        if (hi < lo || (!first && lo <= last)) return false;
        if (seqset_add_range(set, lo, hi) != 0) return false;
        last = hi;
        first = false;
    }
    return !first;
}

static bool hex16(const char *f, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (len != 16) return false;
    for (size_t i = 0; i < len; i++) {
        int d = f[i] >= '0' && f[i] <= '9' ? f[i] - '0' : f[i] >= 'a' && f[i] <= 'f' ? f[i] - 'a' + 10 : -1;
        if (d < 0) return false;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return true;
}

static bool parse_run(struct cursor *c, struct peer_summary *s)
{
    const char *f;
    size_t len;
    char id[STP_BROKER_ID_STRLEN];
    if (!word(c, "run") || !field(c, &f, &len) || len >= sizeof id) return false;
    memcpy(id, f, len);
    id[len] = '\0';
    struct peer_summary_run run;
    memset(&run, 0, sizeof run);
    if (!stp_broker_id_from_text(&run.broker, id)) return false;
    if (!field(c, &f, &len) || !hex16(f, len, &run.incarnation)) return false;
    if (c->p >= c->end || peer_summary_find(s, &run.broker, run.incarnation)) return false;
    if (!parse_ranges(c->p, c->end, &run.seqs)) {
        seqset_free(&run.seqs);
        return false;
    }
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        struct peer_summary_run *runs = realloc(s->runs, cap * sizeof *runs);
        if (!runs) {
            seqset_free(&run.seqs);
            return false;
        }
        s->runs = runs;
        s->cap = cap;
    }
    s->runs[s->count++] = run;
    return true;
}

static bool parse_header(struct cursor *c, struct peer_summary *s)
{
    if (s->kind == PEER_SUMMARY_LOST) return word(c, "lost") && word(c, "1") && c->p == c->end;
    if (s->kind == PEER_SUMMARY_SKIP) return word(c, "skip") && word(c, "1") && c->p == c->end;
    if (!word(c, "summary") || !word(c, "1")) return false;
    const char *f;
    size_t len;
    if (!field(c, &f, &len)) return false;
    if (len == 4 && memcmp(f, "want", 4) == 0)
        s->want = true;
    else if (!(len == 5 && memcmp(f, "reply", 5) == 0))
        return false;
    if (c->p == c->end) return true;
    s->fresh = word(c, "fresh");
    return s->fresh && c->p == c->end;
}

int peer_summary_parse(const uint8_t *text, size_t len, enum peer_summary_kind kind,
                       struct peer_summary *out)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    const char *p = (const char *)text, *end = p + len;
    bool header = true;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) break;
        struct cursor c = {p, nl};
        if (!(header ? parse_header(&c, out) : parse_run(&c, out))) break;
        header = false;
        p = nl + 1;
    }
    if (p != end || header || (kind != PEER_SUMMARY_SUMMARY && out->count == 0)) {
        peer_summary_free(out);
        return -1;
    }
    return 0;
}

const struct seqset *peer_summary_find(const struct peer_summary *s,
                                       const struct stp_broker_id *broker, uint64_t incarnation)
{
    for (size_t i = 0; i < s->count; i++)
        if (s->runs[i].incarnation == incarnation && stp_broker_id_equal(&s->runs[i].broker, broker))
            return &s->runs[i].seqs;
    return NULL;
}

void peer_summary_free(struct peer_summary *s)
{
    for (size_t i = 0; i < s->count; i++) seqset_free(&s->runs[i].seqs);
    free(s->runs);
    memset(s, 0, sizeof *s);
}

/* ---- the stream line of the kept state ---------------------------------------------------- */

int peer_state_format_header(struct abuf *out, const struct peer_stream_state *st)
{
    char text[200];
    int n = snprintf(text, sizeof text,
                     "state 1 %016" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
                     " %s %s %s\n",
                     st->incarnation, st->next, st->reserved, st->next0, st->reserved0,
                     st->clean ? "clean" : "running", st->durable ? "durable" : "snapshot",
                     st->joined ? "joined" : "fresh");
    return n < 0 || (size_t)n >= sizeof text ? -1 : abuf_append(out, text, (size_t)n);
}

static bool number_field(struct cursor *c, uint64_t *out)
{
    const char *f;
    size_t len;
    if (!field(c, &f, &len)) return false;
    const char *p = f;
    return decimal(&p, f + len, out) && p == f + len;
}

static bool one_of(struct cursor *c, const char *yes, const char *no, bool *out)
{
    const char *f;
    size_t len;
    if (!field(c, &f, &len)) return false;
    *out = len == strlen(yes) && memcmp(f, yes, len) == 0;
    return *out || (len == strlen(no) && memcmp(f, no, len) == 0);
}

int peer_state_parse_header(const uint8_t *text, size_t len, struct peer_stream_state *st,
                            size_t *used)
{
    memset(st, 0, sizeof *st);
    const char *p = (const char *)text;
    const char *nl = memchr(p, '\n', len);
    if (!nl) return -1;
    struct cursor c = {p, nl};
    const char *f;
    size_t flen;
    bool ok = word(&c, "state") && word(&c, "1") && field(&c, &f, &flen) &&
              hex16(f, flen, &st->incarnation) && number_field(&c, &st->next) &&
              number_field(&c, &st->reserved) && number_field(&c, &st->next0) &&
              number_field(&c, &st->reserved0) && one_of(&c, "clean", "running", &st->clean) &&
              one_of(&c, "durable", "snapshot", &st->durable) &&
              one_of(&c, "joined", "fresh", &st->joined) && c.p == c.end &&
              st->reserved >= st->next && st->reserved0 >= st->next0;
    if (!ok) return -1;
    *used = (size_t)(nl + 1 - p);
    return 0;
}
