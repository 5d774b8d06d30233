/*
 * peer_link.c: links of the spanning tree over real connections. A link to neighbour X is the
 * pair (our outgoing connection to X, X's outgoing connection to us), keyed by X's identity;
 * it is up in the stp core exactly while both halves are, and every time it comes up it gets a
 * new stp link id, so nothing the core remembers of an earlier incarnation applies to it.
 *
 * Connect-back (docs/mqtt-st-protocol.md, section 1.3): when X dials in and we have no outgoing
 * connection to X, we dial X's identity, unless one of our `peer` lines may be the way to X:
 * a peer line's identity is only known once it has answered, so connect-back waits until
 * every peer line has answered (with another identity), or has failed once and stp_max_age
 * has passed since X dialled in. When both sides dial at once, each side's dial is its half
 * of the one link and nobody connects back.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arbor/protocol.h"
#include "log.h"
#include "peer_net.h"

struct peer_link *peer_link_get(struct peer_net *net, const struct stp_broker_id *id)
{
    struct peer_link *link = NULL;
    HASH_FIND(hh, net->links, id, sizeof *id, link);
    if (link) return link;
    link = calloc(1, sizeof *link);
    if (!link) return NULL;
    link->id = *id;
    stp_broker_id_format(id, link->name, sizeof link->name);
    HASH_ADD(hh, net->links, id, sizeof link->id, link);
    return link;
}

struct peer_link *peer_link_by_stp(struct peer_net *net, stp_link_id stp_id)
{
    struct peer_link *link, *tmp;
    if (stp_id == STP_LINK_LOCAL) return NULL;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (link->stp_id == stp_id) return link;
    }
    return NULL;
}

static void detach_in(struct peer_net *net, struct peer_accepted *acc, const char *why,
                      bool drop_dial_backs);

static void link_up_if_complete(struct peer_net *net, struct peer_link *link)
{
    if (link->stp_id || !link->out || !link->in) return;
    link->stp_id = net->next_link_id++;
    peer_resync_link_up(link);
    log_notice("MQTT-ST: link to %s up (rtt %u us).", link->name, link->out->handshake_rtt_us);
    peer_note_change(net);
    stp_link_up(net->stp, link->stp_id, link->out->handshake_rtt_us, (uint64_t)net->broker->now_ms);
    peer_accepted_link_ready(link->in);
}

/* told: the shared groups its neighbour told on the link (its connection to us may be
 * detached already). */
static void link_down(struct peer_net *net, struct peer_link *link, const char *why,
                      const struct peer_share_table *told)
{
    if (!link->stp_id) return;
    stp_link_id id = link->stp_id;
    link->stp_id = 0;
    peer_resync_link_down(net, link);
    peer_share_link_down(net, id, &link->id, told); /* its groups wait for it to return */
    peer_skip_forget(link);
    log_notice("MQTT-ST: link to %s down (%s).", link->name, why);
    peer_note_change(net);
    stp_link_down(net->stp, id, (uint64_t)net->broker->now_ms);
}

/* Neither half left: the link is forgotten (its $SYS topics cleared). */
static void free_if_unused(struct peer_net *net, struct peer_link *link)
{
    if (link->out || link->in) return;
    peer_sys_clear_link(net, link);
    peer_resync_reset(link);
    peer_skip_forget(link);
    HASH_DEL(net->links, link);
    free(link);
}

void peer_link_set_out(struct peer_net *net, struct peer_link *link, struct peer_dialer *dialer)
{
    link->out = dialer;
    dialer->link = link;
    net->sys_dirty = true;
    peer_interest_out_up(net, dialer); /* before the link's resync summary can go */
    peer_share_out_up(net, dialer);
    link_up_if_complete(net, link);
}

void peer_link_set_in(struct peer_net *net, struct peer_link *link, struct peer_accepted *acc)
{
    if (link->in && link->in != acc) {
        /* X dialled again: its old connection is dead or dying (e.g. X restarted). */
        struct peer_accepted *old = link->in;
        detach_in(net, old, "replaced by a new connection", false);
        peer_accepted_close(old, MQTT_RC_SESSION_TAKEN_OVER, "replaced by a new connection");
        link = peer_link_get(net, &acc->id);
        if (!link) return;
    }
    link->in = acc;
    acc->link = link;
    net->sys_dirty = true;
    link_up_if_complete(net, link);
    peer_link_consider_connect_back(net);
}

void peer_link_out_gone(struct peer_net *net, struct peer_dialer *dialer, const char *why)
{
    struct peer_link *link = dialer->link;
    dialer->link = NULL;
    if (!link || link->out != dialer) return;
    link->out = NULL;
    net->sys_dirty = true;
    link_down(net, link, why, link->in ? &link->in->shares : NULL);
    free_if_unused(net, link);
}

/* A connect-back dialer to X only lives while X's connection to us does. */
static void drop_connect_backs(struct peer_net *net, const struct stp_broker_id *id)
{
    for (struct peer_dialer *d = net->dialers; d; d = d->next) {
        if (d->configured || d->removed || !d->learned || !stp_broker_id_equal(&d->learned_id, id))
            continue;
        d->removed = true;
        peer_dialer_close(d, "the peer no longer connects to us");
    }
}

static void detach_in(struct peer_net *net, struct peer_accepted *acc, const char *why,
                      bool drop_dial_backs)
{
    struct peer_link *link = acc->link;
    acc->link = NULL;
    if (!link || link->in != acc) return;
    link->in = NULL;
    net->sys_dirty = true;
    link_down(net, link, why, &acc->shares);
    struct stp_broker_id id = link->id;
    free_if_unused(net, link);
    if (drop_dial_backs && !net->stopping) drop_connect_backs(net, &id);
}

void peer_link_in_gone(struct peer_net *net, struct peer_accepted *acc, const char *why)
{
    detach_in(net, acc, why, true);
}

/* May one of our dialers (a peer line, or a connect-back already made) lead to the link's
 * neighbour? A peer line that has never answered may: it is given stp_max_age from the
 * neighbour's arrival to do so (it may be retrying while the neighbour starts up) before we
 * dial back directly. */
static bool dialer_may_reach(struct peer_net *net, const struct peer_link *link)
{
    int64_t grace_end = link->in->arrived_ms + net->broker->config->stp_max_age_ms;
    bool in_grace = net->broker->now_ms < grace_end;
    for (const struct peer_dialer *d = net->dialers; d; d = d->next) {
        if (d->removed) continue;
        if (d->learned && stp_broker_id_equal(&d->learned_id, &link->id)) return true;
        if (d->configured && !d->learned && (!d->attempted || in_grace)) {
            if (grace_end < net->next_run_ms) net->next_run_ms = grace_end; /* decide then */
            return true;
        }
    }
    return false;
}

static void identity_host(const struct stp_broker_id *id, char *out, size_t len)
{
    if (stp_broker_id_is_ipv4(id))
        inet_ntop(AF_INET, id->addr + 12, out, (socklen_t)len);
    else
        inet_ntop(AF_INET6, id->addr, out, (socklen_t)len);
}

void peer_link_consider_connect_back(struct peer_net *net)
{
    if (net->stopping) return;
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        if (!link->in || link->out || dialer_may_reach(net, link)) continue;
        char host[INET6_ADDRSTRLEN];
        identity_host(&link->id, host, sizeof host);
        log_notice("MQTT-ST: connecting back to %s.", link->name);
        struct peer_dialer *d = peer_dialer_add(net, host, link->id.port, false);
        if (d) {
            d->learned = true; /* what it is for; replaced by what answers */
            d->learned_id = link->id;
        }
    }
}

void peer_links_free(struct peer_net *net)
{
    struct peer_link *link, *tmp;
    HASH_ITER(hh, net->links, link, tmp)
    {
        HASH_DEL(net->links, link);
        peer_skip_forget(link);
        free(link);
    }
}
