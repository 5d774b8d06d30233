/*
 * peer.c: the MQTT-ST network of this broker: start-up (its identity, its capability, the stp
 * core), the core's callbacks (BPDUs go out as PINGREQ on a link's outgoing connection; its
 * events become log lines, $SYS updates and a settling period), the timers, reload of the
 * peer lines and shutdown. Links, dialling, accepting and flooding live in the other peer_*.c
 * files (peer_net.h lists them); this file must not know packet formats.
 */
#include "peer.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <math.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "capability.h"
#include "connection.h"
#include "host_resources.h"
#include "log.h"
#include "peer_net.h"
#include "sys_tree.h"
#include "transport_tls.h"

/* How long after a change the tree may still be settling: messages go on every live link (and
 * are accepted from every live link) meanwhile, duplicates being suppressed per origin. */
#define SETTLE_MIN_MS 500

int64_t peer_now_us(void)
{
    return clock_monotonic_us();
}

/* "a.b.c.d:port" or "[v6]:port" (the text stp_broker_id_format writes). */
/* ---- identity and capability ---------------------------------------------------------- */

bool peer_net_self(const struct broker *broker, struct stp_broker_id *id, uint32_t *capability)
{
    const struct peer_net *net = broker->shared->peers;
    if (!net) return false;
    *id = net->self;
    *capability = net->capability;
    return true;
}

/* The first address of this host that other hosts can reach: IPv4 first, then global IPv6. */
static bool host_address(char *out, size_t len)
{
    struct ifaddrs *list, *ifa;
    if (getifaddrs(&list) != 0) return false;
    bool found = false;
    for (int family_pass = 0; family_pass < 2 && !found; family_pass++) {
        int family = family_pass == 0 ? AF_INET : AF_INET6;
        for (ifa = list; ifa && !found; ifa = ifa->ifa_next) {
            if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != family) continue;
            if ((ifa->ifa_flags & IFF_LOOPBACK) || !(ifa->ifa_flags & IFF_UP)) continue;
            const void *addr;
            if (family == AF_INET) {
                addr = &((const struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
            } else {
                const struct in6_addr *a6 = &((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;
                if (IN6_IS_ADDR_LINKLOCAL(a6)) continue;
                addr = a6;
            }
            found = inet_ntop(family, addr, out, (socklen_t)len) != NULL;
        }
    }
    freeifaddrs(list);
    return found;
}

/* The listener peers dial. Peers speak MQTT on the TCP stream (never WebSockets): with peer
 * TLS, the first TLS listener that asks for client certificates (a peer proves itself with
 * one); without, the first plain listener. */
static bool peer_listener_fits(const struct arbor_listener *listener, bool peer_tls)
{
    /* peers dial a TCP port: never a unix socket listener (port 0) */
    if (listener->protocol != ARBOR_PROTOCOL_MQTT || listener->unix_socket) return false;
    if (!peer_tls) return !config_listener_uses_tls(listener);
    return listener->tls.certfile.value && listener->tls.keyfile.value &&
           listener->tls.require_certificate;
}

static const struct arbor_listener *peer_listener(const struct arbor_config *cfg)
{
    for (size_t i = 0; i < cfg->listener_count; i++)
        if (peer_listener_fits(&cfg->listeners[i], config_peer_uses_tls(cfg)))
            return &cfg->listeners[i];
    return NULL;
}

/* peer_identity, else the peer listener's specific bind address, else the host's first
 * reachable address; the port is peer_identity's or the peer listener's. */
static int derive_identity(struct peer_net *net)
{
    const struct arbor_config *cfg = net->broker->config;
    const struct arbor_listener *first = peer_listener(cfg);
    uint16_t port = cfg->peer_identity_port ? cfg->peer_identity_port : first ? first->port : 0;
    char address[INET6_ADDRSTRLEN] = "";
    if (cfg->peer_identity_address) {
        snprintf(address, sizeof address, "%s", cfg->peer_identity_address);
    } else if (first && first->bind_address &&
               stp_broker_id_parse(&net->self, first->bind_address, port ? port : 1) == 0) {
        snprintf(address, sizeof address, "%s", first->bind_address);
    } else if (!host_address(address, sizeof address)) {
        log_error("Error: peer_identity: cannot be derived (this host has no address other "
                  "peers can reach); set peer_identity.");
        return -1;
    }
    if (port == 0) {
        if (config_peer_uses_tls(cfg))
            log_error("Error: peer_identity: no port (peer links use TLS, and no TLS listener "
                      "with require_certificate true is configured); set peer_identity "
                      "<address>:<port>.");
        else
            log_error("Error: peer_identity: no port (no listener without TLS is configured, "
                      "and peer links are plain TCP); set peer_identity <address>:<port>.");
        return -1;
    }
    if (stp_broker_id_parse(&net->self, address, port) != 0) {
        log_error("Error: peer_identity: %s is not an address peers can dial.", address);
        return -1;
    }
    stp_broker_id_format(&net->self, net->self_name, sizeof net->self_name);
    return 0;
}

/* A peer_identity whose port is one of this broker's listeners, but not one peers can dial
 * the way this broker's peer settings say they will (TLS asking for a certificate, or plain),
 * is most likely a mistake: said once at start-up. */
static void check_identity_listener(const struct arbor_config *cfg)
{
    if (!cfg->peer_identity_port) return;
    bool peer_tls = config_peer_uses_tls(cfg);
    for (size_t i = 0; i < cfg->listener_count; i++) {
        const struct arbor_listener *l = &cfg->listeners[i];
        if (l->port != cfg->peer_identity_port) continue;
        if (peer_listener_fits(l, peer_tls)) return;
        log_warning("Warning: MQTT-ST: peer_identity names port %u, whose listener %s; peers "
                    "%s.",
                    l->port,
                    l->protocol != ARBOR_PROTOCOL_MQTT ? "speaks WebSockets"
                    : peer_tls                         ? "is not TLS with require_certificate true"
                                                       : "uses TLS",
                    peer_tls ? "dial with TLS and a certificate" : "dial it without TLS");
        return;
    }
}

static uint32_t measure_capability(const struct arbor_config *cfg)
{
    if (cfg->stp_capability_set) return cfg->stp_capability;
    struct stp_host_resources res;
    if (host_resources_read(NULL, NULL, &res) != 0) {
        log_warning("Warning: MQTT-ST: cannot read /proc/cpuinfo or /proc/meminfo; capability 0 "
                    "(set stp_capability).");
        return 0;
    }
    return stp_capability_compute(&res, cfg->stp_cpu_weight, cfg->stp_memory_weight);
}

/* ---- the core's callbacks ---------------------------------------------------------------- */

static void send_bpdu(void *context, stp_link_id link_id, const uint8_t *bytes, size_t len,
                      enum stp_send_reason reason)
{
    (void)reason;
    struct peer_net *net = context;
    struct peer_link *link = peer_link_by_stp(net, link_id);
    if (link && link->out) {
        peer_dialer_send_bpdu(link->out, bytes, len);
        link->bpdus_sent++;
    }
}

static const char *link_name(struct peer_net *net, stp_link_id id)
{
    struct peer_link *link = peer_link_by_stp(net, id);
    return link ? link->name : "?";
}

void peer_note_change(struct peer_net *net)
{
    int64_t settle = net->broker->config->stp_hello_ms;
    if (settle < SETTLE_MIN_MS) settle = SETTLE_MIN_MS;
    net->settle_until_ms = net->broker->now_ms + settle;
    net->sys_dirty = true;
    peer_interest_note_change(net);
    peer_share_note_change(net);
}

static void log_root(struct peer_net *net)
{
    struct stp_status st;
    stp_get_status(net->stp, &st);
    if (st.root_link == STP_LINK_LOCAL) {
        log_notice("MQTT-ST: root is now this broker (capability %u).", st.capability);
        return;
    }
    char root[STP_BROKER_ID_STRLEN];
    stp_broker_id_format(&st.root.root_id, root, sizeof root);
    log_notice("MQTT-ST: root is now %s (capability %u) via %s, cost %u us.", root,
               st.root.root_capability, link_name(net, st.root_link), st.root.root_cost_us);
}

static void on_event(void *context, const struct stp_event *event)
{
    struct peer_net *net = context;
    switch (event->type) {
    case STP_EVENT_TOPOLOGY_CHANGE:
        if (event->tc_reason == STP_TC_RECEIVED)
            log_notice("MQTT-ST: topology change, epoch %u (announced by %s).", event->epoch,
                       link_name(net, event->link));
        else
            log_notice("MQTT-ST: topology change, epoch %u (%s).", event->epoch,
                       stp_tc_reason_name(event->tc_reason));
        break;
    case STP_EVENT_ROOT_CHANGED:
        log_root(net);
        break;
    case STP_EVENT_ROLE_CHANGED:
        log_info("MQTT-ST: link to %s is now %s.", link_name(net, event->link),
                 stp_role_name(event->new_role));
        break;
    case STP_EVENT_FORWARDING_CHANGED:
        log_notice("MQTT-ST: link to %s is now %s, %s.", link_name(net, event->link),
                   stp_role_name(stp_link_role(net->stp, event->link)),
                   event->forwarding ? "forwarding" : "not forwarding");
        if (event->forwarding) {
            struct peer_link *link = peer_link_by_stp(net, event->link);
            peer_resync_start(net, link);
            peer_flood_offer_retained(net, link);
        }
        break;
    case STP_EVENT_INFO_EXPIRED:
        log_notice("MQTT-ST: nothing heard from %s for stp_max_age.", link_name(net, event->link));
        break;
    case STP_EVENT_BPDU_REJECTED:
        log_warning("MQTT-ST: rejected BPDU from %s: %s.", link_name(net, event->link),
                    event->own_identity ? "it claims this broker's identity"
                        : stp_bpdu_status_text(event->bpdu_status));
        net->sys_dirty = true;
        return; /* nothing changed */
    }
    peer_note_change(net);
}

/* ---- start, reload, stop ------------------------------------------------------------------- */

static int create_core(struct peer_net *net)
{
    const struct arbor_config *cfg = net->broker->config;
    struct stp_config sc;
    stp_config_defaults(&sc);
    sc.id = net->self;
    sc.capability = net->capability;
    sc.hello_ms = cfg->stp_hello_ms;
    sc.max_age_ms = cfg->stp_max_age_ms;
    sc.local_repair = cfg->stp_local_repair;
    sc.send_bpdu = send_bpdu;
    sc.on_event = on_event;
    sc.context = net;
    net->stp = stp_create(&sc, (uint64_t)net->broker->now_ms);
    return net->stp ? 0 : -1;
}

static void add_configured_dialers(struct peer_net *net)
{
    const struct arbor_config *cfg = net->broker->config;
    for (size_t i = 0; i < cfg->peer_count; i++)
        peer_dialer_add(net, cfg->peers[i].host, cfg->peers[i].port, true);
}

int peer_net_start(struct broker *broker)
{
    const struct arbor_config *cfg = broker->config;
    if (!config_peering_configured(cfg)) return 0;
    struct peer_net *net = calloc(1, sizeof *net);
    if (!net) return -1;
    net->broker = broker;
    net->log = &broker->shared->message_log; /* before anything can fail: peer_net_free uses it */
    broker->shared->peers = net;
    if (derive_identity(net) != 0) return -1;
    net->capability = measure_capability(cfg);
    if (getrandom(&net->incarnation, sizeof net->incarnation, 0) != sizeof net->incarnation)
        net->incarnation = (uint64_t)clock_monotonic_us() ^ ((uint64_t)time(NULL) << 20);
    net->incarnation &= ~(uint64_t)PEER_STREAM_QOS0; /* even: the QoS 1/2 stream (7.1) */
    net->next_link_id = 1;
    net->pressure.high = PEER_BACKLOG_HIGH;
    net->pressure.low = PEER_BACKLOG_LOW;
    net->log->enabled = true;
    net->log->max_messages = cfg->peer_log_max_messages;
    net->log->max_bytes = cfg->peer_log_max_bytes;
    /* With memory_limit the log takes at most half of it, so that what it holds for resyncs
     * never makes the broker refuse new messages. */
    if (cfg->memory_limit && net->log->max_bytes > cfg->memory_limit / 2)
        net->log->max_bytes = cfg->memory_limit / 2 ? cfg->memory_limit / 2 : 1;
    net->log->max_age_ms = (int64_t)cfg->peer_log_max_age_s * 1000;
    if (create_core(net) != 0) {
        log_error("Error: MQTT-ST: invalid spanning-tree parameters or out of memory.");
        return -1;
    }
    net->tls = tls_context_ref(broker->tls ? broker->tls->peer : NULL); /* built by main.c */
    log_notice("MQTT-ST: identity %s, capability %u.", net->self_name, net->capability);
    check_identity_listener(cfg);
    const char *key_log = getenv("SSLKEYLOGFILE");
    if (net->tls) {
        log_notice("MQTT-ST: peer links use TLS; peers authenticate with a certificate of the "
                   "peer CA%s.",
                   cfg->peer_secret ? " and peer_secret" : "");
        if (key_log && *key_log)
            log_warning("Warning: MQTT-ST: SSLKEYLOGFILE is set: the TLS secrets of the peer "
                        "connections this broker dials are written to %s (for debugging only).",
                        key_log);
    } else if (!cfg->peer_secret) {
        log_warning("Warning: MQTT-ST: peer_allow_unauthenticated is set: any broker that can "
                    "reach this one may join the tree and inject messages.");
    }
    if (peer_flood_register(net) != 0 || sys_tree_add_source(broker, peer_sys_publish, net)) {
        log_error("Error: MQTT-ST: no room for its forwarder or its $SYS topics.");
        return -1;
    }
    peer_state_register(net);
    add_configured_dialers(net);
    net->sys_dirty = true;
    return 0;
}

static bool dialer_matches(const struct peer_dialer *d, const struct arbor_peer *p)
{
    return d->configured && d->port == p->port && strcmp(d->host, p->host) == 0;
}

/* New dials and new incoming peers use the certificate, key and CA certificates as the files
 * hold them now (a reload whose files fail to load keeps the old configuration, main.c);
 * links already up keep their session. Turning TLS on or off takes a restart, as the
 * identity (a TLS listener or a plain one) depends on it. */
static void reload_tls(struct peer_net *net)
{
    struct tls_context *fresh = net->broker->tls ? net->broker->tls->peer : NULL;
    if ((fresh != NULL) != (net->tls != NULL)) {
        log_warning("Warning: MQTT-ST: peer TLS is %s in the new config; that takes a restart, "
                    "peer links go on %s until then.",
                    fresh ? "configured" : "not configured",
                    net->tls ? "with TLS as configured at start" : "without TLS");
        return;
    }
    if (!fresh) return;
    struct tls_context *old = net->tls;
    net->tls = tls_context_ref(fresh);
    tls_context_release(old);
}

void peer_net_reload(struct broker *broker)
{
    struct peer_net *net = broker->shared->peers;
    const struct arbor_config *cfg = broker->config;
    if (!net) {
        if (config_peering_configured(cfg))
            log_warning("Warning: MQTT-ST peering was not configured at start-up; restart arbor "
                        "to enable it.");
        return;
    }
    reload_tls(net);
    for (struct peer_dialer *d = net->dialers; d; d = d->next) {
        if (!d->configured || d->removed) continue;
        bool kept = false;
        for (size_t i = 0; i < cfg->peer_count && !kept; i++)
            kept = dialer_matches(d, &cfg->peers[i]);
        if (!kept) {
            log_notice("MQTT-ST: peer %s removed from the configuration.", d->target);
            d->removed = true;
            peer_dialer_close(d, "peer removed from the configuration");
        }
    }
    for (size_t i = 0; i < cfg->peer_count; i++) {
        bool present = false;
        for (struct peer_dialer *d = net->dialers; d && !present; d = d->next)
            present = !d->removed && dialer_matches(d, &cfg->peers[i]);
        if (!present) {
            log_notice("MQTT-ST: peer %s:%u added by the configuration.", cfg->peers[i].host,
                       cfg->peers[i].port);
            peer_dialer_add(net, cfg->peers[i].host, cfg->peers[i].port, true);
        }
    }
    peer_interest_note_change(net); /* peer_routing or peer_interest_max_filters may differ */
    net->interest.local_built = false; /* and the bridges' topic lines */
    net->next_run_ms = broker->now_ms;
}

void peer_net_stopping(struct broker *broker)
{
    if (broker->shared->peers) broker->shared->peers->stopping = true;
}

void peer_net_free(struct broker *broker)
{
    struct peer_net *net = broker->shared->peers;
    if (!net) return;
    while (net->dialers) {
        struct peer_dialer *d = net->dialers;
        net->dialers = d->next;
        peer_dialer_free(d);
    }
    peer_links_free(net);
    route_remove_forwarder(broker, &net->forwarder);
    sys_tree_remove_source(broker, net);
    peer_share_free(net);
    peer_flood_free(net);
    peer_interest_free(net);
    tls_context_release(net->tls);
    stp_destroy(net->stp);
    free(net);
    broker->shared->peers = NULL;
}

/* ---- timers ------------------------------------------------------------------------------- */

static void run_dialers(struct peer_net *net)
{
    int64_t now = net->broker->now_ms;
    if (now < net->next_run_ms) return;
    /* Recomputed by this pass; a dialer whose connection closes during it (schedule_retry)
     * may bring it forward on its own, which the end of the pass must not undo. */
    net->next_run_ms = TIMER_NONE;
    int64_t next = TIMER_NONE;
    struct peer_dialer **link = &net->dialers;
    while (*link) {
        struct peer_dialer *d = *link;
        if (d->removed && !d->conn) { /* its connection is gone: forget it */
            *link = d->next;
            peer_dialer_free(d);
            continue;
        }
        int64_t due = peer_dialer_run(d, now);
        if (due < next) next = due;
        link = &d->next;
    }
    if (next < net->next_run_ms) net->next_run_ms = next;
    peer_link_consider_connect_back(net); /* may bring next_run_ms forward */
}

/* Every loop's clients waited for the links: this loop's resume now, the others' at their
 * next turn (held_wake; one already posted releases them too). */
static void release_held_everywhere(struct broker *broker)
{
    struct broker_shared *shared = broker->shared;
    for (unsigned i = 0; i < shared->loop_count; i++) {
        struct broker *loop = shared->loops[i];
        if (loop == broker)
            connection_release_held(broker);
        else
            mailbox_post(&loop->mailbox, &loop->held_wake);
    }
}

void peer_net_run(struct broker *broker)
{
    struct peer_net *net = broker->shared->peers;
    if (!net || net->stopping) return;
    int64_t now = broker->now_ms;
    if ((uint64_t)now >= stp_next_deadline(net->stp)) stp_tick(net->stp, (uint64_t)now);
    run_dialers(net);
    peer_flood_expire(net, now);
    peer_state_tick(net, now);
    if (net->state_dirty && net->next_state_write_ms < net->next_run_ms)
        net->next_run_ms = net->next_state_write_ms;
    int64_t walk = peer_resync_pump(net);
    if (walk < net->next_run_ms) net->next_run_ms = walk;
    int64_t interest = peer_interest_run(net);
    if (interest < net->next_run_ms) net->next_run_ms = interest;
    int64_t shares = peer_share_run(net);
    if (shares < net->next_run_ms) net->next_run_ms = shares;
    int64_t skips = peer_skip_run(net);
    if (skips < net->next_run_ms) net->next_run_ms = skips;
    if (net->pressure.release_pending) {
        net->pressure.release_pending = false;
        net->pressure.engaged = false;
        atomic_store_explicit(&broker->shared->peer_backlog, false, memory_order_relaxed);
        log_debug("MQTT-ST: the peer links are down to %u messages: clients are read again.",
                  (unsigned)net->pressure.queued);
        release_held_everywhere(broker);
    }
    /* $SYS/broker/stp/settling follows the settling period, to its end */
    bool sys = broker->config->sys_interval > 0;
    bool settling = now < net->settle_until_ms;
    if (sys && settling != net->settling_published) net->sys_dirty = true;
    if (sys && settling && net->settle_until_ms < net->next_run_ms)
        net->next_run_ms = net->settle_until_ms;
    if (net->sys_dirty) { /* (without $SYS, only forgotten: it would wake the loop at once) */
        net->sys_dirty = false;
        if (sys) peer_sys_publish(net);
    }
}

int64_t peer_net_next_deadline(const struct broker *broker)
{
    const struct peer_net *net = broker->shared->peers;
    if (!net) return TIMER_NONE;
    int64_t next = (int64_t)stp_next_deadline(net->stp);
    if (net->next_run_ms < next) next = net->next_run_ms;
    bool due_now = net->sys_dirty || net->pressure.release_pending;
    if (due_now && broker->now_ms < next) next = broker->now_ms;
    return next;
}
