/*
 * stp_changes.c: change lines for `arbor_stp watch` (stp_changes.h). Each line is built in a
 * memory stream and handed to the caller's callback; nothing here knows about time or output.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stp_changes.h"

static const char *show(const char *value)
{
    return value ? value : "-";
}

static bool same(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

static const char *forwarding_word(const struct stp_view_peer *p)
{
    if (!p || !p->values[SV_PEER_FORWARDING]) return "-";
    return stp_view_peer_forwarding(p) ? "yes" : "no";
}

/* A line being built; emitted (and counted) by line_end. */
struct line {
    char *text;
    size_t len;
    FILE *f;
};

static bool line_start(struct line *l)
{
    l->text = NULL;
    l->f = open_memstream(&l->text, &l->len);
    return l->f != NULL;
}

static size_t line_end(struct line *l, stp_change_fn emit, void *ctx)
{
    bool ok = fclose(l->f) == 0 && l->text;
    if (ok) emit(ctx, l->text);
    free(l->text);
    return ok ? 1 : 0;
}

/* " (this broker)" at the root, else "[ via <link>] (<hops> hops, cost <cost> us)". */
static void path_words(FILE *f, const struct stp_view *v, bool with_link)
{
    if (stp_view_is_root(v)) {
        fputs(" (this broker)", f);
        return;
    }
    const char *hops = show(stp_view_get(v, SV_HOPS));
    if (with_link) fprintf(f, " via %s", show(stp_view_get(v, SV_ROOT_LINK)));
    fprintf(f, " (%s hop%s, cost %s us)", hops, strcmp(hops, "1") == 0 ? "" : "s",
            show(stp_view_get(v, SV_ROOT_COST)));
}

/* The text change of one broker field, "<label> old -> new"; 0 or 1 lines. */
static size_t field_change(const struct stp_view *a, const struct stp_view *b,
                           enum stp_view_broker_field f, stp_change_fn emit, void *ctx)
{
    if (same(a->values[f], b->values[f])) return 0;
    struct line l;
    if (!line_start(&l)) return 0;
    fprintf(l.f, "%s %s -> %s", stp_view_broker_fields[f].label, show(a->values[f]),
            show(b->values[f]));
    return line_end(&l, emit, ctx);
}

static size_t root_change(const struct stp_view *a, const struct stp_view *b, stp_change_fn emit,
                          void *ctx)
{
    bool root_moved = !same(a->values[SV_ROOT_ID], b->values[SV_ROOT_ID]);
    if (!root_moved && same(a->values[SV_ROOT_LINK], b->values[SV_ROOT_LINK])) return 0;
    struct line l;
    if (!line_start(&l)) return 0;
    if (root_moved)
        fprintf(l.f, "root %s -> %s", show(a->values[SV_ROOT_ID]), show(b->values[SV_ROOT_ID]));
    else
        fprintf(l.f, "root link %s -> %s", show(a->values[SV_ROOT_LINK]),
                show(b->values[SV_ROOT_LINK]));
    path_words(l.f, b, root_moved);
    return line_end(&l, emit, ctx);
}

static size_t epoch_change(const struct stp_view *a, const struct stp_view *b, stp_change_fn emit,
                           void *ctx)
{
    bool epoch = !same(a->values[SV_EPOCH], b->values[SV_EPOCH]);
    bool changes = !same(a->values[SV_TOPOLOGY_CHANGES], b->values[SV_TOPOLOGY_CHANGES]);
    if (!epoch && !changes) return 0;
    struct line l;
    if (!line_start(&l)) return 0;
    if (epoch)
        fprintf(l.f, "epoch %s -> %s", show(a->values[SV_EPOCH]), show(b->values[SV_EPOCH]));
    if (changes)
        fprintf(l.f, "%stopology changes %s -> %s", epoch ? ", " : "",
                show(a->values[SV_TOPOLOGY_CHANGES]), show(b->values[SV_TOPOLOGY_CHANGES]));
    return line_end(&l, emit, ctx);
}

/* "up root forwarding": a link's state, role and whether it forwards. */
static void link_words(FILE *f, const struct stp_view_peer *p)
{
    fputs(show(p->values[SV_PEER_STATE]), f);
    if (p->values[SV_PEER_ROLE]) fprintf(f, " %s", p->values[SV_PEER_ROLE]);
    if (stp_view_peer_forwarding(p)) fputs(" forwarding", f);
}

static size_t peer_change(const struct stp_view_peer *a, const struct stp_view_peer *b,
                          stp_change_fn emit, void *ctx)
{
    static const enum stp_view_peer_field watched[] = {SV_PEER_STATE, SV_PEER_ROLE};
    const struct stp_view_peer *p = b ? b : a;
    bool any = !a || !b || strcmp(forwarding_word(a), forwarding_word(b)) != 0;
    for (size_t i = 0; a && b && i < sizeof watched / sizeof watched[0]; i++)
        any |= !same(a->values[watched[i]], b->values[watched[i]]);
    if (!any) return 0;
    struct line l;
    if (!line_start(&l)) return 0;
    fprintf(l.f, "peer %s ", p->id);
    if (!a || !b) {
        fputs(a ? "disappeared (was " : "appeared (", l.f);
        link_words(l.f, p);
        fputc(')', l.f);
        return line_end(&l, emit, ctx);
    }
    const char *sep = "";
    for (size_t i = 0; i < sizeof watched / sizeof watched[0]; i++) {
        enum stp_view_peer_field f = watched[i];
        if (same(a->values[f], b->values[f])) continue;
        fprintf(l.f, "%s%s %s -> %s", sep, stp_view_peer_fields[f].label, show(a->values[f]),
                show(b->values[f]));
        sep = ", ";
    }
    if (strcmp(forwarding_word(a), forwarding_word(b)) != 0)
        fprintf(l.f, "%sforwarding %s -> %s", sep, forwarding_word(a), forwarding_word(b));
    return line_end(&l, emit, ctx);
}

size_t stp_changes(const struct stp_view *before, const struct stp_view *after,
                   stp_change_fn emit, void *ctx)
{
    size_t n = field_change(before, after, SV_ID, emit, ctx);
    n += field_change(before, after, SV_CAPABILITY, emit, ctx);
    n += root_change(before, after, emit, ctx);
    n += epoch_change(before, after, emit, ctx);
    size_t i = 0, j = 0;
    while (i < before->peer_count || j < after->peer_count) {
        const struct stp_view_peer *a = i < before->peer_count ? &before->peers[i] : NULL;
        const struct stp_view_peer *b = j < after->peer_count ? &after->peers[j] : NULL;
        int cmp = !a ? 1 : !b ? -1 : stp_identity_compare(a->id, b->id);
        n += peer_change(cmp <= 0 ? a : NULL, cmp >= 0 ? b : NULL, emit, ctx);
        i += cmp <= 0;
        j += cmp >= 0;
    }
    return n;
}

char *stp_changes_describe(const struct stp_view *v)
{
    struct line l;
    if (!line_start(&l)) return NULL;
    fprintf(l.f, "%s: capability %s, root %s", show(stp_view_get(v, SV_ID)),
            show(stp_view_get(v, SV_CAPABILITY)), show(stp_view_get(v, SV_ROOT_ID)));
    path_words(l.f, v, true);
    fprintf(l.f, ", epoch %s, %zu peer link%s", show(stp_view_get(v, SV_EPOCH)), v->peer_count,
            v->peer_count == 1 ? "" : "s");
    for (size_t k = 0; k < v->peer_count; k++) {
        fprintf(l.f, "%s%s ", k ? ", " : ": ", v->peers[k].id);
        link_words(l.f, &v->peers[k]);
    }
    if (fclose(l.f) != 0) {
        free(l.text);
        return NULL;
    }
    return l.text;
}
