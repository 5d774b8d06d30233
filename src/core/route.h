/*
 * route.h: the one routing point (route.c): route_message takes a message from any source to
 * local delivery and to the registered forwarders.
 */
#ifndef ARBOR_ROUTE_H
#define ARBOR_ROUTE_H

#include "broker_shared.h"

/* A forwarder takes messages on beyond this broker (MQTT-ST flooding, peer_flood.c; a
 * bridge). Every hook is optional; ctx is the forwarder's own. */
struct route_forwarder {
    const char *name;
    void *ctx;
    /* Before anything else: give a message that entered here its origin (set before it is
     * published, never after). */
    void (*stamp)(void *ctx, struct message *msg);
    /* May this retained message replace what the store holds for its topic? A forwarder may
     * record what it lets in (MQTT-ST remembers a clear): route_message asks each forwarder
     * at most once per message, and with several forwarders one that says yes has recorded
     * it even if a later one says no (only one forwarder exists today). */
    bool (*retained_wins)(void *ctx, struct message *msg);
    /* After local delivery: send it on. True when it took the message for a destination as a
     * subscription would (a bridge's topic matched): MQTT 5 publishers then hear "no matching
     * subscribers" only when nobody took it. MQTT-ST flooding replicates everything and says
     * false (where the subscribers are is not known here). */
    bool (*forward)(void *ctx, struct message *msg);
    /* Several loops, where forward runs later on loop 0: would forward take it (the answer
     * route_message counts)? Any thread; only what does not change may be read. */
    bool (*takes)(void *ctx, const struct message *msg);
    /* Does this forwarder decide who in a shared group gets the message, network-wide
     * (MQTT-ST, peer_share.c)? Then route_message leaves the shared groups out of local
     * delivery (still counting them as matches), and the forwarder's forward delivers to the
     * groups it keeps here with route_deliver_shares. Any thread; reads only the message and
     * what does not change. */
    bool (*owns_shares)(void *ctx, const struct message *msg);
};

/* Register a forwarder (kept by pointer, called in registration order); -1 when
 * ROUTE_MAX_FORWARDERS are registered already. */
int route_add_forwarder(struct broker *broker, const struct route_forwarder *forwarder);
void route_remove_forwarder(struct broker *broker, const struct route_forwarder *forwarder);

/* Route a message that entered this broker: forwarders' stamps, the retained store if retain
 * (unless a forwarder says what is held is newer), every matching subscription at its QoS,
 * then every forwarder. Returns the number of matching sessions plus the forwarders that took
 * it (0: no matching subscribers). */
size_t route_message(struct broker *broker, struct message *msg);

/* The forwarders' lock: held by route_message around the stamps, the retained decision and
 * (several loops) the post to loop 0. A forwarder's code outside route_message takes it to
 * touch what its stamp or retained_wins touch (MQTT-ST: sequence numbers, clears); never
 * while holding the retained store's or the tree's lock, which route_message takes inside.
 * Recursive: a line logged under it is a message routed under it (log_dest topic). Taken
 * only while several loops run. */
void route_forwarders_lock(struct broker *broker);
void route_forwarders_unlock(struct broker *broker);

/* Deliver msg to one member of each local shared group whose key ("<group>/<filter>")
 * wanted accepts (a forwarder that owns_shares; wanted runs under the subscription tree's read
 * lock). scratch is the caller's match result. The number of groups delivered to. */
size_t route_deliver_shares(struct broker *broker, struct message *msg,
                            struct match_result *scratch,
                            bool (*wanted)(void *ctx, const char *key, size_t len), void *ctx);

/* Route a will (re-timing its message expiry from now) and drop the caller's reference. */
void route_will(struct broker *broker, struct message *will);

#endif
