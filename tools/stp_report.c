/*
 * stp_report.c: the table and the JSON object of `arbor_stp show` (stp_report.h). Both walk
 * the field tables of stp_view.c, so a topic added there shows up here in both forms.
 */
#include <stdlib.h>
#include <string.h>

#include "stp_report.h"

#define ABSENT "-"

static const char *text_or_absent(const char *value)
{
    return value ? value : ABSENT;
}

static const char *peer_cell(const struct stp_view_peer *p, size_t f)
{
    const char *value = p->values[f];
    if (value && stp_view_peer_fields[f].kind == STP_VIEW_FLAG)
        return strcmp(value, "1") == 0 ? "yes" : strcmp(value, "0") == 0 ? "no" : value;
    return text_or_absent(value);
}

static size_t max_size(size_t a, size_t b)
{
    return a > b ? a : b;
}

static bool in_table(size_t f)
{
    return stp_view_peer_fields[f].kind != STP_VIEW_LIST;
}

/* A list field of each peer that has one, after the table: "<peer> <label>:" and an item
 * per line. */
static void print_lists(FILE *out, const struct stp_view *v)
{
    for (size_t f = 0; f < SV_PEER_FIELDS; f++) {
        if (in_table(f)) continue;
        for (size_t k = 0; k < v->peer_count; k++) {
            const char *items = v->peers[k].values[f];
            if (!items || !*items) continue;
            fprintf(out, "\n%s %s:\n", v->peers[k].id, stp_view_peer_fields[f].label);
            for (const char *p = items; *p;) {
                size_t len = strcspn(p, "\n");
                fprintf(out, "  %.*s\n", (int)len, p);
                p += len + (p[len] == '\n');
            }
        }
    }
}

static void print_peers(FILE *out, const struct stp_view *v)
{
    size_t width[1 + SV_PEER_FIELDS];
    width[0] = strlen("peer");
    for (size_t f = 0; f < SV_PEER_FIELDS; f++)
        width[1 + f] = strlen(stp_view_peer_fields[f].label);
    for (size_t k = 0; k < v->peer_count; k++) {
        width[0] = max_size(width[0], strlen(v->peers[k].id));
        for (size_t f = 0; f < SV_PEER_FIELDS; f++)
            width[1 + f] = max_size(width[1 + f], strlen(peer_cell(&v->peers[k], f)));
    }
    fprintf(out, "%-*s", (int)width[0], "peer");
    for (size_t f = 0; f < SV_PEER_FIELDS; f++) {
        if (!in_table(f)) continue;
        bool number = stp_view_peer_fields[f].kind == STP_VIEW_NUMBER;
        fprintf(out, number ? "  %*s" : "  %-*s", (int)width[1 + f], stp_view_peer_fields[f].label);
    }
    fputc('\n', out);
    for (size_t k = 0; k < v->peer_count; k++) {
        /* the last column is a number, so no line ends in blanks */
        fprintf(out, "%-*s", (int)width[0], v->peers[k].id);
        for (size_t f = 0; f < SV_PEER_FIELDS; f++) {
            if (!in_table(f)) continue;
            bool number = stp_view_peer_fields[f].kind == STP_VIEW_NUMBER;
            fprintf(out, number ? "  %*s" : "  %-*s", (int)width[1 + f],
                    peer_cell(&v->peers[k], f));
        }
        fputc('\n', out);
    }
    print_lists(out, v);
}

void stp_report_table(FILE *out, const struct stp_view *v)
{
    size_t label_width = 0;
    for (size_t f = 0; f < SV_BROKER_FIELDS; f++)
        label_width = max_size(label_width, strlen(stp_view_broker_fields[f].label));
    for (size_t f = 0; f < SV_BROKER_FIELDS; f++)
        fprintf(out, "%-*s  %s\n", (int)label_width, stp_view_broker_fields[f].label,
                text_or_absent(v->values[f]));
    fputc('\n', out);
    if (v->peer_count == 0)
        fputs("no peer links\n", out);
    else
        print_peers(out, v);
}

/* A list item as it was before it was written on a line: "\\n" is a line feed, "\\\\" a
 * backslash (peer_sys.c). */
static char *unescape(const char *p, size_t len)
{
    char *out = malloc(len + 1);
    if (!out) return NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\\' && i + 1 < len && (p[i + 1] == 'n' || p[i + 1] == '\\'))
            out[n++] = p[++i] == 'n' ? '\n' : '\\';
        else
            out[n++] = p[i];
    }
    out[n] = '\0';
    return out;
}

/* The JSON form of one value: a number or a boolean where the topic is one and the text reads
 * as one, else the text; null when absent. */
static cJSON *json_value(const char *value, enum stp_view_kind kind)
{
    uint64_t number;
    if (!value) return cJSON_CreateNull();
    if (kind == STP_VIEW_NUMBER && stp_view_parse_u64(value, &number))
        return cJSON_CreateNumber((double)number);
    if (kind == STP_VIEW_FLAG && (strcmp(value, "0") == 0 || strcmp(value, "1") == 0))
        return cJSON_CreateBool(value[0] == '1');
    if (kind == STP_VIEW_LIST) {
        cJSON *items = cJSON_CreateArray();
        for (const char *p = value; items && *p;) {
            size_t len = strcspn(p, "\n");
            char *item = unescape(p, len);
            cJSON *s = item ? cJSON_CreateString(item) : NULL;
            free(item);
            if (!s || !cJSON_AddItemToArray(items, s)) {
                cJSON_Delete(s);
                cJSON_Delete(items);
                return NULL;
            }
            p += len + (p[len] == '\n');
        }
        return items;
    }
    return cJSON_CreateString(value);
}

/* Puts value at a topic-like path ("root/cost_us") below object, creating the objects between.
 * Takes over value (also on failure). */
static bool json_put(cJSON *object, const char *path, cJSON *value)
{
    if (!value) return false;
    const char *slash;
    while ((slash = strchr(path, '/')) != NULL) {
        char name[64];
        size_t len = (size_t)(slash - path);
        if (len >= sizeof name) break;
        memcpy(name, path, len);
        name[len] = '\0';
        cJSON *inner = cJSON_GetObjectItemCaseSensitive(object, name);
        if (!inner) inner = cJSON_AddObjectToObject(object, name);
        if (!cJSON_IsObject(inner)) break;
        object = inner;
        path = slash + 1;
    }
    if (slash || !cJSON_AddItemToObject(object, path, value)) {
        cJSON_Delete(value);
        return false;
    }
    return true;
}

static cJSON *json_peer(const struct stp_view_peer *p)
{
    cJSON *object = cJSON_CreateObject();
    bool ok = object && cJSON_AddStringToObject(object, "id", p->id);
    for (size_t f = 0; ok && f < SV_PEER_FIELDS; f++)
        ok = json_put(object, stp_view_peer_fields[f].topic,
                      json_value(p->values[f], stp_view_peer_fields[f].kind));
    if (!ok) {
        cJSON_Delete(object);
        return NULL;
    }
    return object;
}

cJSON *stp_report_json(const struct stp_view *v)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    for (size_t f = 0; ok && f < SV_BROKER_FIELDS; f++)
        ok = json_put(root, stp_view_broker_fields[f].topic,
                      json_value(v->values[f], stp_view_broker_fields[f].kind));
    cJSON *peers = ok ? cJSON_AddArrayToObject(root, "peers") : NULL;
    ok = peers != NULL;
    for (size_t k = 0; ok && k < v->peer_count; k++) {
        cJSON *peer = json_peer(&v->peers[k]);
        ok = peer && cJSON_AddItemToArray(peers, peer);
        if (peer && !ok) cJSON_Delete(peer);
    }
    if (!ok) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
