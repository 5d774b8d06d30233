/*
 * interest.c: a set of topic filters as a tree of levels (interest.h). Each node is one level
 * of one or more filters ('+' and '#' are levels like any other); a node's count says how
 * many times the filter that ends there was added. Matching and covering walk the tree along
 * the topic or filter, trying the '#', '+' and literal children of each node, so their cost
 * grows with the depth of what is asked about and the wildcards on the way, not with the
 * number of filters; each question has a budget of steps, past which it gives the safe
 * answer (interest.h).
 */
#include "interest.h"

#include <stdlib.h>
#include <string.h>

#include "hash_table.h"
#include "topic.h"

struct interest_node {
    UT_hash_handle hh; /* in the parent's children, keyed by the level */
    struct interest_node *parent;
    struct interest_node *children;
    uint32_t count; /* the filter ending here, added this many times */
    size_t level_len;
    char level[]; /* not NUL-terminated */
};

struct level {
    const char *p;
    size_t len;
};
#define MAX_LEVELS (TOPIC_MAX_SEPARATORS + 1)

/* Split s into its levels; -1 when it has more than MAX_LEVELS. */
static int split(const char *s, size_t len, struct level *out)
{
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '/') continue;
        if (n == MAX_LEVELS) return -1;
        out[n].p = s + start;
        out[n].len = i - start;
        n++;
        start = i + 1;
    }
    return n;
}

static bool is(struct level l, char c)
{
    return l.len == 1 && l.p[0] == c;
}

static bool is_dollar(struct level l)
{
    return l.len > 0 && l.p[0] == '$';
}

static struct interest_node *child(const struct interest_node *n, const char *level, size_t len)
{
    struct interest_node *c = NULL;
    if (n) HASH_FIND(hh, n->children, level, len, c);
    return c;
}

static struct interest_node *node_new(struct interest_node *parent, struct level l)
{
    struct interest_node *n = calloc(1, sizeof *n + l.len + 1);
    if (!n) return NULL;
    n->parent = parent;
    n->level_len = l.len;
    memcpy(n->level, l.p, l.len);
    if (parent) HASH_ADD(hh, parent->children, level[0], n->level_len, n);
    return n;
}

/* Free n and its ancestors while they hold nothing (never the root). */
static void prune(struct interest_set *set, struct interest_node *n)
{
    while (n && n != set->root && n->count == 0 && !n->children) {
        struct interest_node *parent = n->parent;
        HASH_DEL(parent->children, n);
        free(n);
        n = parent;
    }
}

static void free_tree(struct interest_node *n)
{
    struct interest_node *c, *tmp;
    HASH_ITER(hh, n->children, c, tmp)
    {
        HASH_DEL(n->children, c);
        free_tree(c);
    }
    free(n);
}

void interest_set_init(struct interest_set *set)
{
    memset(set, 0, sizeof *set);
}

void interest_set_free(struct interest_set *set)
{
    if (set->root) free_tree(set->root);
    memset(set, 0, sizeof *set);
}

static struct interest_node *find(const struct interest_set *set, const char *filter, size_t len)
{
    struct level lv[MAX_LEVELS];
    int n = split(filter, len, lv);
    if (n < 0) return NULL;
    const struct interest_node *node = set->root;
    for (int i = 0; i < n && node; i++) node = child(node, lv[i].p, lv[i].len);
    return (struct interest_node *)node;
}

int interest_add(struct interest_set *set, const char *filter, size_t len)
{
    struct level lv[MAX_LEVELS];
    int n = split(filter, len, lv);
    if (n < 0) return -1;
    if (!set->root && !(set->root = node_new(NULL, (struct level){"", 0}))) return -1;
    struct interest_node *node = set->root;
    for (int i = 0; i < n; i++) {
        struct interest_node *c = child(node, lv[i].p, lv[i].len);
        if (!c && !(c = node_new(node, lv[i]))) {
            prune(set, node);
            return -1;
        }
        node = c;
    }
    if (node->count == UINT32_MAX) return -1;
    if (node->count++ == 0) set->distinct++;
    return 0;
}

bool interest_remove(struct interest_set *set, const char *filter, size_t len)
{
    struct interest_node *node = find(set, filter, len);
    if (!node || node->count == 0) return false;
    if (--node->count == 0) set->distinct--;
    prune(set, node);
    return true;
}

uint32_t interest_count(const struct interest_set *set, const char *filter, size_t len)
{
    const struct interest_node *node = find(set, filter, len);
    return node ? node->count : 0;
}

/* ---- matching ------------------------------------------------------------------------------ */

/* Steps (nodes visited) one match may take: a set crafted with '+' at many levels would make
 * a match try both branches at each ('+' and the literal); past this it answers true. */
#define MATCH_STEPS 4096

static bool match_from(const struct interest_node *n, const struct level *lv, int i, int count,
                       int *steps)
{
    if (--*steps < 0) return true; /* too costly to decide: the message goes (safe) */
    if (i == count) { /* the whole topic: a filter ends here, or goes on with "/#" */
        const struct interest_node *hash = child(n, "#", 1);
        return n->count > 0 || (hash && hash->count > 0);
    }
    /* a topic starting with '$' is not matched by a wildcard first level */
    if (!(i == 0 && is_dollar(lv[0]))) {
        const struct interest_node *hash = child(n, "#", 1);
        if (hash && hash->count > 0) return true;
        const struct interest_node *plus = child(n, "+", 1);
        if (plus && match_from(plus, lv, i + 1, count, steps)) return true;
    }
    const struct interest_node *lit = child(n, lv[i].p, lv[i].len);
    return lit && match_from(lit, lv, i + 1, count, steps);
}

bool interest_matches(const struct interest_set *set, const char *topic, size_t len)
{
    struct level lv[MAX_LEVELS];
    int n = split(topic, len, lv);
    if (n < 0 || !set->root) return false;
    int steps = MATCH_STEPS;
    return match_from(set->root, lv, 0, n, &steps);
}

/* ---- covering ------------------------------------------------------------------------------ */

static bool counts(const struct interest_node *n, const struct interest_node *exclude)
{
    return n && n->count > 0 && n != exclude;
}

/* Steps one cover question may take (as MATCH_STEPS): COVER_STEPS and COVER_STEPS_PER_LEVEL
 * for each level of the filter asked about (an ordinary filter needs about as many as it has
 * levels; each question has its own, so the answer does not depend on the order asked). */
#define COVER_STEPS 4096
#define COVER_STEPS_PER_LEVEL 8

/* Whether a filter of the tree below n, other than exclude's, covers the filter levels lv[i..]. */
static bool cover_from(const struct interest_node *n, const struct level *lv, int i, int count,
                       const struct interest_node *exclude, long *steps)
{
    if (--*steps < 0) return false; /* too costly to decide: not covered (kept: safe) */
    const struct interest_node *hash = child(n, "#", 1);
    if (i == count) /* "x" is covered by "x" and by "x/#" */
        return counts(n, exclude) || counts(hash, exclude);
    bool dollar = i == 0 && is_dollar(lv[0]); /* only a literal first level covers it */
    if (!dollar && counts(hash, exclude)) return true;
    const struct interest_node *plus = child(n, "+", 1);
    /* '#' is covered by '#' only, but for "+/#" covering "#": with no level above, '#'
     * matches one level or more, as "+/#" does ("x/#" matches "x") */
    if (is(lv[i], '#')) return i == 0 && plus && counts(child(plus, "#", 1), exclude);
    if (!dollar && plus && cover_from(plus, lv, i + 1, count, exclude, steps)) return true;
    if (is(lv[i], '+')) return false; /* a literal level does not cover '+' */
    const struct interest_node *lit = child(n, lv[i].p, lv[i].len);
    return lit && cover_from(lit, lv, i + 1, count, exclude, steps);
}

bool interest_covers(const struct interest_set *set, const char *filter, size_t len)
{
    struct level lv[MAX_LEVELS];
    int n = split(filter, len, lv);
    if (n < 0 || !set->root) return false;
    long steps = COVER_STEPS + COVER_STEPS_PER_LEVEL * n;
    return cover_from(set->root, lv, 0, n, NULL, &steps);
}

bool interest_filter_covers(const char *a, size_t alen, const char *b, size_t blen)
{
    struct level la[MAX_LEVELS], lb[MAX_LEVELS];
    int na = split(a, alen, la), nb = split(b, blen, lb);
    if (na < 0 || nb < 0) return false;
    bool dollar = is_dollar(lb[0]);
    for (int i = 0; i < nb; i++) {
        if (i >= na) return false;
        if (is(la[i], '#')) return !(i == 0 && dollar);
        if (is(lb[i], '#')) /* see cover_from */
            return i == 0 && na == 2 && is(la[0], '+') && is(la[1], '#');
        if (is(la[i], '+')) {
            if (i == 0 && dollar) return false;
            continue;
        }
        if (is(lb[i], '+') || la[i].len != lb[i].len || memcmp(la[i].p, lb[i].p, la[i].len) != 0)
            return false;
    }
    return na == nb || (na == nb + 1 && is(la[nb], '#'));
}

/* ---- summaries ----------------------------------------------------------------------------- */

struct collect {
    const struct interest_set *set;
    struct interest_summary *out; /* the uncovered filters go here, or */
    void (*fn)(void *ctx, const char *filter, size_t len); /* every filter to this */
    void *ctx;
    bool every; /* to out: every filter, covered or not */
    size_t cap;
    char path[65536 + 1]; /* a filter is an MQTT string: at most 65,535 bytes */
    struct level levels[MAX_LEVELS]; /* here, not in each frame of the recursion */
    bool failed;
};

static int summary_push(struct interest_summary *s, size_t *cap, const char *f, size_t len)
{
    if (s->count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        char **nf = realloc(s->filters, ncap * sizeof *nf);
        if (!nf) return -1;
        s->filters = nf;
        size_t *nl = realloc(s->lengths, ncap * sizeof *nl);
        if (!nl) return -1;
        s->lengths = nl;
        *cap = ncap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, f, len);
    copy[len] = '\0';
    s->filters[s->count] = copy;
    s->lengths[s->count] = len;
    s->count++;
    return 0;
}

/* Every filter of the tree below n (whose path is c->path[0..len)) that no other covers, or
 * every filter to c->fn. */
static void collect_uncovered(struct collect *c, const struct interest_node *n, size_t len)
{
    if (c->failed) return;
    if (n->count > 0 && c->fn) {
        c->fn(c->ctx, c->path, len);
    } else if (n->count > 0) {
        struct level *lv = c->levels;
        int count = split(c->path, len, lv);
        /* "#" and "+/#" cover each other: "#" stays */
        bool all = c->every || (len == 1 && c->path[0] == '#');
        long steps = COVER_STEPS + COVER_STEPS_PER_LEVEL * count;
        if (count > 0 && (all || !cover_from(c->set->root, lv, 0, count, n, &steps)) &&
            summary_push(c->out, &c->cap, c->path, len) != 0)
            c->failed = true;
    }
    const struct interest_node *ch, *tmp;
    HASH_ITER(hh, n->children, ch, tmp)
    {
        size_t at = n == c->set->root ? 0 : len + 1;
        if (at + ch->level_len > sizeof c->path - 1) continue; /* cannot be a valid filter */
        if (at) c->path[len] = '/';
        memcpy(c->path + at, ch->level, ch->level_len);
        collect_uncovered(c, ch, at + ch->level_len);
    }
}

static int compare_strings(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    int c = memcmp(a, b, n);
    if (c) return c;
    return alen < blen ? -1 : alen > blen;
}

struct sorted_filter {
    char *filter;
    size_t len;
};

static int compare_sorted(const void *pa, const void *pb)
{
    const struct sorted_filter *a = pa, *b = pb;
    return compare_strings(a->filter, a->len, b->filter, b->len);
}

/* Sort the summary's filters and their lengths together. */
static int sort_summary(struct interest_summary *s)
{
    if (s->count < 2) return 0;
    struct sorted_filter *v = malloc(s->count * sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < s->count; i++) v[i] = (struct sorted_filter){s->filters[i], s->lengths[i]};
    qsort(v, s->count, sizeof *v, compare_sorted);
    for (size_t i = 0; i < s->count; i++) {
        s->filters[i] = v[i].filter;
        s->lengths[i] = v[i].len;
    }
    free(v);
    return 0;
}

/* One walk of the set's tree: the uncovered filters (or every one) to out, or every filter to
 * fn. 0, or -1 when out of memory. */
static int walk(const struct interest_set *set, struct interest_summary *out, bool every,
                void (*fn)(void *ctx, const char *filter, size_t len), void *ctx)
{
    if (!set->root) return 0;
    struct collect *c = calloc(1, sizeof *c);
    if (!c) return -1;
    c->set = set;
    c->out = out;
    c->every = every;
    c->fn = fn;
    c->ctx = ctx;
    collect_uncovered(c, set->root, 0);
    bool failed = c->failed;
    free(c);
    return failed ? -1 : 0;
}

/* The uncovered filters of set (or every one), unsorted, with no bound. */
static int uncovered(const struct interest_set *set, struct interest_summary *out, bool every)
{
    memset(out, 0, sizeof *out);
    if (walk(set, out, every, NULL, NULL) == 0) return 0;
    interest_summary_free(out);
    return -1;
}

int interest_for_each(const struct interest_set *set,
                      void (*fn)(void *ctx, const char *filter, size_t len), void *ctx)
{
    return walk(set, NULL, false, fn, ctx);
}

/* Filter f cut to its first d levels and '#' when it has more than d (d >= 1). */
static int add_cut(struct interest_set *set, const char *f, size_t len, int d)
{
    int levels = 1;
    size_t i = 0;
    for (; i < len; i++)
        if (f[i] == '/' && levels++ == d) break;
    if (i == len) return interest_add(set, f, len);
    char *cut = malloc(i + 2);
    if (!cut) return -1;
    memcpy(cut, f, i + 1); /* up to and with the '/' after level d */
    cut[i + 1] = '#';
    int rc = interest_add(set, cut, i + 2);
    free(cut);
    return rc;
}

size_t interest_summary_bytes(const struct interest_summary *s)
{
    size_t bytes = 0;
    for (size_t i = 0; !s->everything && i < s->count; i++)
        bytes += s->lengths[i] + INTEREST_FILTER_OVERHEAD;
    return bytes;
}

static bool fits(size_t filters, size_t bytes, struct interest_bound bound)
{
    return (!bound.filters || filters <= bound.filters) && (!bound.bytes || bytes <= bound.bytes);
}

/* What cutting a set to d levels leaves, for every d at once, from one walk of its tree: a
 * filter of at most d levels stays itself; every deeper one becomes the first d levels of it
 * and '#', one filter for each node at depth d with children. Cutting to d - 1 is cutting the
 * cut to d again, so fewer levels never leave more filters. */
struct cut_counts {
    size_t ends[MAX_LEVELS + 1], ends_bytes[MAX_LEVELS + 1]; /* filters of exactly k levels */
    size_t cuts[MAX_LEVELS + 1], cuts_bytes[MAX_LEVELS + 1]; /* nodes at depth k with children */
    int deepest;
};

static void count_cuts(const struct interest_node *n, int depth, size_t len, struct cut_counts *c)
{
    if (depth > c->deepest) c->deepest = depth;
    if (depth > 0 && n->count > 0) {
        c->ends[depth]++;
        c->ends_bytes[depth] += len + INTEREST_FILTER_OVERHEAD;
    }
    if (depth > 0 && n->children) {
        c->cuts[depth]++;
        c->cuts_bytes[depth] += len + 2 + INTEREST_FILTER_OVERHEAD; /* "/#" */
    }
    const struct interest_node *ch, *tmp;
    HASH_ITER(hh, n->children, ch, tmp)
    {
        size_t at = depth ? len + 1 : 0; /* the child's level after this path and a '/' */
        if (depth < MAX_LEVELS) count_cuts(ch, depth + 1, at + ch->level_len, c);
    }
}

/* The most levels (>= 1) the filters of s may keep so that the cut fits the bound before
 * what it covers is left out (*fits_before; 0 when even one level does not), and the depth
 * past which cutting changes nothing (*deepest). */
static int deepest_cut_that_fits(const struct interest_summary *s, struct interest_bound bound,
                                 int *fits_before, int *deepest)
{
    struct interest_set set;
    interest_set_init(&set);
    struct cut_counts *c = calloc(1, sizeof *c);
    int rc = c ? 0 : -1;
    for (size_t k = 0; k < s->count && rc == 0; k++)
        rc = interest_add(&set, s->filters[k], s->lengths[k]);
    *fits_before = 0;
    *deepest = 0;
    if (rc == 0 && set.root) {
        count_cuts(set.root, 0, 0, c);
        size_t filters = 0, bytes = 0; /* of the filters ending at depth <= d */
        for (int d = 1; d < c->deepest; d++) {
            filters += c->ends[d];
            bytes += c->ends_bytes[d];
            if (fits(filters + c->cuts[d], bytes + c->cuts_bytes[d], bound)) *fits_before = d;
        }
        *deepest = c->deepest;
    }
    free(c);
    interest_set_free(&set);
    return rc;
}

/* s cut to d levels, with what the cut covers left out. */
static int cut_summary(const struct interest_summary *s, int d, struct interest_summary *out)
{
    struct interest_set cut;
    interest_set_init(&cut);
    int rc = 0;
    for (size_t k = 0; k < s->count && rc == 0; k++)
        rc = add_cut(&cut, s->filters[k], s->lengths[k], d);
    if (rc == 0) rc = uncovered(&cut, out, false);
    else memset(out, 0, sizeof *out);
    interest_set_free(&cut);
    return rc;
}

int interest_summarise(const struct interest_set *set, struct interest_bound bound,
                       struct interest_summary *out)
{
    if (uncovered(set, out, false) != 0) return -1;
    if (!fits(out->count, interest_summary_bytes(out), bound)) {
        struct interest_summary full = *out;
        memset(out, 0, sizeof *out);
        int d = 0, deepest = 0;
        int rc = deepest_cut_that_fits(&full, bound, &d, &deepest);
        /* The cut to d fits before what it covers is left out, so it fits after. A deeper cut
         * may fit once covered filters leave ("a/+/#" covering a thousand "a/x/#"): search the
         * depths below for the deepest that does. Fewer levels never leave more filters after
         * covers either, so a binary search: a few cuts, not one per depth. */
        if (rc == 0 && d >= 1) rc = cut_summary(&full, d, out);
        int lo = d + 1, hi = deepest - 1; /* depths still to try */
        while (rc == 0 && lo <= hi) {
            int mid = lo + (hi - lo) / 2;
            struct interest_summary deeper;
            rc = cut_summary(&full, mid, &deeper);
            if (rc == 0 && fits(deeper.count, interest_summary_bytes(&deeper), bound)) {
                interest_summary_free(out);
                *out = deeper;
                d = mid;
                lo = mid + 1;
            } else {
                interest_summary_free(&deeper);
                hi = mid - 1;
            }
        }
        interest_summary_free(&full);
        if (rc != 0) {
            interest_summary_free(out);
            return -1;
        }
        if (d < 1) out->everything = true;
    }
    if (sort_summary(out) != 0) {
        interest_summary_free(out);
        return -1;
    }
    return 0;
}

int interest_list(const struct interest_set *set, struct interest_summary *out)
{
    if (uncovered(set, out, true) != 0) return -1;
    if (sort_summary(out) != 0) {
        interest_summary_free(out);
        return -1;
    }
    return 0;
}

void interest_summary_free(struct interest_summary *s)
{
    for (size_t i = 0; i < s->count; i++) free(s->filters[i]);
    free(s->filters);
    free(s->lengths);
    memset(s, 0, sizeof *s);
}

bool interest_summary_matches(const struct interest_summary *s, const char *topic, size_t len)
{
    if (s->everything) return true;
    for (size_t i = 0; i < s->count; i++)
        if (topic_matches(s->filters[i], s->lengths[i], topic, len)) return true;
    return false;
}

bool interest_summary_diff(const struct interest_summary *old, const struct interest_summary *new_,
                           struct interest_diff *out)
{
    memset(out, 0, sizeof *out);
    if (old->everything || new_->everything) return false;
    out->added_from = new_;
    out->removed_from = old;
    out->added = malloc((new_->count + 1) * sizeof *out->added);
    out->removed = malloc((old->count + 1) * sizeof *out->removed);
    if (!out->added || !out->removed) {
        interest_diff_free(out);
        return false;
    }
    size_t i = 0, j = 0; /* both sorted: a merge */
    while (i < old->count || j < new_->count) {
        int c = i == old->count   ? 1
                : j == new_->count ? -1
                                   : compare_strings(old->filters[i], old->lengths[i],
                                                     new_->filters[j], new_->lengths[j]);
        if (c < 0) out->removed[out->removed_count++] = i++;
        else if (c > 0) out->added[out->added_count++] = j++;
        else i++, j++;
    }
    return true;
}

void interest_diff_free(struct interest_diff *d)
{
    free(d->added);
    free(d->removed);
    memset(d, 0, sizeof *d);
}
