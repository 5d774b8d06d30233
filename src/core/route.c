/*
 * route.c: the one routing point (docs/architecture.md, "How a PUBLISH flows"). Every message
 * that enters this broker, whatever its source (a client's PUBLISH, a will, a peer broker's
 * link, a bridge), goes through route_message: the registered forwarders stamp it
 * and may keep an older retained value from replacing a newer one, the retained store is
 * updated, every matching session gets a reference at its own QoS (session_flow.c), and then
 * each forwarder sends it on: MQTT-ST flooding (peer_flood.c), bridges (bridge.c); this
 * file knows none of them by name.
 */
#include "route.h"

#include <string.h>

#include "acl.h"
#include "log.h"
#include "message.h"
#include "persist_hooks.h"
#include "publisher_pressure.h"
#include "retain.h"
#include "session_flow.h"
#include "session_inbox.h"
#include "subs.h"

int route_add_forwarder(struct broker *broker, const struct route_forwarder *forwarder)
{
    if (broker->shared->forwarder_count == ROUTE_MAX_FORWARDERS) return -1;
    broker->shared->forwarders[broker->shared->forwarder_count++] = forwarder;
    return 0;
}

void route_remove_forwarder(struct broker *broker, const struct route_forwarder *forwarder)
{
    for (size_t i = 0; i < broker->shared->forwarder_count; i++) {
        if (broker->shared->forwarders[i] != forwarder) continue;
        memmove(&broker->shared->forwarders[i], &broker->shared->forwarders[i + 1],
                (broker->shared->forwarder_count - i - 1) * sizeof broker->shared->forwarders[0]);
        broker->shared->forwarder_count--;
        return;
    }
}

/* May msg (retained) replace what the store holds for its topic? Every forwarder must agree. */
static bool retained_wins(struct broker *broker, struct message *msg)
{
    for (size_t i = 0; i < broker->shared->forwarder_count; i++) {
        const struct route_forwarder *f = broker->shared->forwarders[i];
        if (f->retained_wins && !f->retained_wins(f->ctx, msg)) return false;
    }
    return true;
}

/* A match that is a session: delivered here when this loop owns it, else posted to its inbox
 * for its owner (session_inbox.h). */
static void deliver_to_session(struct broker *broker, const struct match_entry *e,
                               struct message *msg, struct acl_read_cache *acl_cache)
{
    struct session *session = container_of(e->subscriber, struct session, subscriber);
    struct broker *owner = session_owner(session);
    if (owner != broker) {
        if (session_inbox_post(session, e, msg) != 0)
            broker->stats.publish_dropped++;
        else if (loop_is_behind(owner)) /* its publisher waits (publisher_pressure.h) */
            broker->routed_behind = (uint8_t)(owner->loop_index + 1);
        return;
    }
    session_deliver_match(broker, session, msg, e->qos, e->retain_as_published, e->sub_ids,
                          e->sub_id_count, acl_cache);
}

size_t route_message(struct broker *broker, struct message *msg)
{
    for (size_t i = 0; i < broker->shared->forwarder_count; i++) {
        const struct route_forwarder *f = broker->shared->forwarders[i];
        if (f->stamp) f->stamp(f->ctx, msg);
    }
    if (msg->retain && broker->config->retain_available && retained_wins(broker, msg)) {
        if (retain_set(broker->shared->retained, msg) != 0)
            log_error("Out of memory storing retained message.");
        else
            persist_hook_retained_changed(broker, msg);
    }
    if (subs_match(broker->shared->subscriptions, msg->topic, msg->topic_len, msg->origin_session,
                   broker->match) != 0)
        log_error("Out of memory matching subscriptions for %s.", msg->topic);
    size_t count = broker->match->count;
    struct acl_read_cache acl_cache = {0}; /* acl_file: one verdict per user section */
    for (size_t i = 0; i < count; i++) {
        const struct match_entry *e = &broker->match->entries[i];
        switch ((enum subscriber_kind)e->subscriber->kind) {
        case SUBSCRIBER_SESSION:
            deliver_to_session(broker, e, msg, &acl_cache);
            break;
        }
    }
    for (size_t i = 0; i < broker->shared->forwarder_count; i++) {
        const struct route_forwarder *f = broker->shared->forwarders[i];
        if (f->forward && f->forward(f->ctx, msg)) count++;
    }
    return count;
}

void route_will(struct broker *broker, struct message *will)
{
    message_restart_expiry(will, broker->now_ms);
    route_message(broker, will);
    message_unref(will);
}

