/*
 * peer_sys.c: the spanning tree as $SYS topics (man/arbor.8, "$SYS TOPICS"): this broker's
 * identity and capability, its root and path to it, counters, and per peer link its state,
 * role, forwarding, smoothed RTT and cost. Published with the rest of $SYS and at once when
 * the tree changes; values are published only when they change, and a peer that goes away
 * has its topics cleared.
 */
#include <inttypes.h>
#include <stdio.h>

#include "peer.h"
#include "peer_net.h"
#include "sys_tree.h"

#define STP_SYS "$SYS/broker/stp/"

static void publish_u64(struct broker *broker, const char *name, uint64_t value)
{
    char topic[128];
    snprintf(topic, sizeof topic, STP_SYS "%s", name);
    sys_tree_publish_value(broker, topic, "%" PRIu64, value);
}

static void publish_text(struct broker *broker, const char *name, const char *value)
{
    char topic[128];
    snprintf(topic, sizeof topic, STP_SYS "%s", name);
    sys_tree_publish_value(broker, topic, "%s", value);
}

static void publish_peer(struct broker *broker, const struct peer_link *link, const char *name,
                         const char *value)
{
    char topic[192];
    snprintf(topic, sizeof topic, STP_SYS "peers/%s/%s", link->name, name);
    sys_tree_publish_value(broker, topic, "%s", value);
}

static const char *link_state(const struct peer_link *link)
{
    if (link->stp_id) return "up";
    if (link->out || link->in) return "connecting";
    return "down";
}

#define SYS_FILTERS_LISTED 100 /* interest/filters lists at most this many */

static void summary_count(const struct interest_summary *s, char *out, size_t size)
{
    if (s->everything)
        snprintf(out, size, "everything");
    else
        snprintf(out, size, "%zu", s->count); /* filters */
}

/* A filter as a line of interest/filters: a backslash and a line feed (a filter may hold
 * either) as "\\" and "\n", so that lines split the list exactly. */
static void append_escaped(struct abuf *list, const char *filter, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (filter[i] == '\\' || filter[i] == '\n') {
            abuf_append_u8(list, '\\');
            abuf_append_u8(list, filter[i] == '\n' ? 'n' : '\\');
        } else {
            abuf_append_u8(list, (uint8_t)filter[i]);
        }
    }
    abuf_append_u8(list, '\n');
}

/* interest/wanted, interest/filters (what the neighbour announced) and interest/announced
 * (what this broker told it). */
static void publish_interest(struct peer_net *net, struct peer_link *link)
{
    struct broker *broker = net->broker;
    char text[64];
    const struct peer_wanted *w = peer_interest_wanted(link);
    struct interest_summary s = {0};
    struct abuf list = {0};
    if (!w) {
        snprintf(text, sizeof text, "unknown");
    } else if (w->everything) {
        snprintf(text, sizeof text, "everything");
    } else if (interest_list(&w->filters, &s) == 0) { /* a summary already: no cover to find */
        summary_count(&s, text, sizeof text);
        for (size_t i = 0; i < s.count && i < SYS_FILTERS_LISTED; i++)
            append_escaped(&list, s.filters[i], s.lengths[i]);
        if (s.count > SYS_FILTERS_LISTED) {
            char more[48];
            int n = snprintf(more, sizeof more, "(%zu more)\n", s.count - SYS_FILTERS_LISTED);
            abuf_append(&list, more, (size_t)n);
        }
        interest_summary_free(&s);
    } else {
        snprintf(text, sizeof text, "unknown"); /* out of memory: said so next time */
    }
    publish_peer(broker, link, "interest/wanted", text);
    char topic[192];
    snprintf(topic, sizeof topic, STP_SYS "peers/%s/interest/filters", link->name);
    /* no LF after the last */
    sys_tree_publish_bytes(broker, topic, list.len ? (const char *)list.data : "",
                           list.len ? list.len - 1 : 0);
    abuf_free(&list);
    const struct peer_announced *a = link->out ? &link->out->announced : NULL;
    if (a && a->sent) summary_count(&a->summary, text, sizeof text);
    publish_peer(broker, link, "interest/announced", a && a->sent ? text : "");
}

/* shares: the shared groups the neighbour announced, a line "<distance> <group>/<filter>"
 * each (escaped as interest/filters), at most SYS_FILTERS_LISTED */
static void publish_shares(struct peer_net *net, struct peer_link *link)
{
    const struct peer_share_table *t = link->in ? &link->in->shares : NULL;
    struct abuf list = {0};
    for (size_t i = 0; t && i < t->count && i < SYS_FILTERS_LISTED; i++) {
        char distance[8];
        int n = snprintf(distance, sizeof distance, "%u ", t->items[i].distance);
        abuf_append(&list, distance, (size_t)n);
        append_escaped(&list, t->items[i].key, t->items[i].len);
    }
    if (t && t->count > SYS_FILTERS_LISTED) {
        char more[48];
        int n = snprintf(more, sizeof more, "(%zu more)\n", t->count - SYS_FILTERS_LISTED);
        abuf_append(&list, more, (size_t)n);
    }
    char topic[192];
    snprintf(topic, sizeof topic, STP_SYS "peers/%s/shares", link->name);
    sys_tree_publish_bytes(net->broker, topic, list.len ? (const char *)list.data : "",
                           list.len ? list.len - 1 : 0);
    abuf_free(&list);
}

static void publish_link(struct peer_net *net, struct peer_link *link)
{
    struct broker *broker = net->broker;
    struct stp_link_status st = {0};
    bool up = link->stp_id && stp_get_link_status(net->stp, link->stp_id, &st) == STP_OK;
    char number[24];
    publish_peer(broker, link, "state", link_state(link));
    publish_peer(broker, link, "role", up ? stp_role_name(st.role) : "");
    publish_peer(broker, link, "forwarding", up && st.forwarding ? "1" : "0");
    snprintf(number, sizeof number, "%u", up ? st.srtt_us : 0);
    publish_peer(broker, link, "srtt_us", number);
    snprintf(number, sizeof number, "%u", up ? st.cost_us : 0);
    publish_peer(broker, link, "cost_us", number);
    snprintf(number, sizeof number, "%" PRIu64, link->bpdus_sent);
    publish_peer(broker, link, "bpdus/sent", number);
    snprintf(number, sizeof number, "%" PRIu64, link->bpdus_received);
    publish_peer(broker, link, "bpdus/received", number);
    snprintf(number, sizeof number, "%" PRIu64, link->resync == RESYNC_WALKING ? link->walk_messages : 0);
    publish_peer(broker, link, "resync/messages", number);
    snprintf(number, sizeof number, "%" PRIu64, link->resync == RESYNC_WALKING ? link->walk_bytes : 0);
    publish_peer(broker, link, "resync/bytes", number);
    publish_interest(net, link);
    publish_shares(net, link);
    link->sys_published = true;
}

void peer_sys_clear_link(struct peer_net *net, struct peer_link *link)
{
    static const char *const names[] = {"state",          "role",           "forwarding",
                                        "srtt_us",        "cost_us",        "bpdus/sent",
                                        "bpdus/received", "resync/messages", "resync/bytes",
                                        "interest/wanted", "interest/filters",
                                        "interest/announced", "shares"};
    if (!link->sys_published || net->broker->config->sys_interval <= 0) return;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        publish_peer(net->broker, link, names[i], "");
    link->sys_published = false;
}

void peer_sys_publish(void *ctx)
{
    struct peer_net *net = ctx;
    struct broker *broker = net->broker;
    struct stp_status st;
    stp_get_status(net->stp, &st);
    char root[STP_BROKER_ID_STRLEN];
    stp_broker_id_format(&st.root.root_id, root, sizeof root);
    struct peer_link *root_link = peer_link_by_stp(net, st.root_link);
    publish_text(broker, "id", net->self_name);
    publish_u64(broker, "capability", st.capability);
    publish_text(broker, "root/id", root);
    publish_u64(broker, "root/capability", st.root.root_capability);
    publish_u64(broker, "root/cost_us", st.root.root_cost_us);
    publish_text(broker, "root/link", root_link ? root_link->name : "");
    publish_u64(broker, "hops", st.hops);
    publish_u64(broker, "epoch", st.epoch);
    publish_u64(broker, "topology_changes", st.topology_changes);
    net->settling_published = net->broker->now_ms < net->settle_until_ms;
    publish_text(broker, "settling", net->settling_published ? "1" : "0");
    publish_u64(broker, "bpdus/sent", st.bpdus_sent);
    publish_u64(broker, "bpdus/received", st.bpdus_received);
    publish_u64(broker, "bpdus/rejected", st.bpdus_rejected);
    publish_u64(broker, "messages/forwarded", net->counters.forwarded);
    publish_u64(broker, "messages/received", net->counters.received);
    publish_u64(broker, "messages/duplicates", net->counters.duplicates);
    publish_u64(broker, "messages/discarded", net->counters.discarded);
    publish_u64(broker, "messages/off_tree", net->counters.off_tree);
    publish_u64(broker, "messages/resynced", net->counters.resynced);
    publish_u64(broker, "messages/lost", net->counters.lost);
    publish_u64(broker, "log/messages", net->log->len);
    publish_u64(broker, "log/bytes", net->log->bytes);
    publish_u64(broker, "log/evicted", net->log->evicted);
    publish_u64(broker, "messages/dropped", net->counters.dropped);
    publish_u64(broker, "messages/skipped", net->counters.skipped);
    publish_u64(broker, "messages/skip_notices", net->counters.skip_notices);
    publish_u64(broker, "interest/announcements", net->interest.sent);
    publish_u64(broker, "interest/bytes", net->interest.bytes_sent);
    const struct peer_shares *sh = &net->shares;
    const struct {
        const char *name;
        uint64_t value;
    } shares[] = {{"shares/delivered", sh->here},     {"shares/assigned", sh->assigned},
                  {"shares/reassigned", sh->reassigned}, {"shares/unassigned", sh->unassigned},
                  {"shares/returned", sh->returned},
                  {"shares/tables", sh->sent},         {"shares/bytes", sh->bytes_sent}};
    for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++)
        publish_u64(broker, shares[i].name, shares[i].value);
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp) publish_link(net, link);
}
