/*
 * route.c: the one routing point (docs/architecture.md, "How a PUBLISH flows"). Every message
 * that enters this broker, whatever its source (a client's PUBLISH, a will, a peer broker's
 * link, a bridge), goes through route_message: the registered forwarders stamp it
 * and may keep an older retained value from replacing a newer one, the retained store is
 * updated, every matching session gets a reference at its own QoS (session_flow.c), and then
 * each forwarder sends it on: MQTT-ST flooding (peer_flood.c), bridges (bridge.c); this
 * file knows none of them by name.
 *
 * With several loops the forwarders' state (links, the resync log, bridge queues) is loop
 * 0's, where their connections live: a message routed on any loop is stamped and its
 * retained store decision made under the forwarders' lock, which also posts it, in the same
 * order, to loop 0's mailbox; loop 0 then hands it to every forwarder's forward. So loop 0
 * sees the messages in the order their sequence numbers were given and the retained store
 * changed, as one loop would (docs/multiloop-design.md, step 10).
 */
#include "route.h"

#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "log.h"
#include "mailbox.h"
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
        if (session_inbox_post(session, e, msg) != 0) {
            broker->stats.publish_dropped++;
            return;
        }
        if (msg->qos > 0 && e->qos > 0) /* durable: its delivery's rows are written there */
            persist_hook_handed_over(broker);
        if (loop_is_behind(owner)) /* its publisher waits (publisher_pressure.h) */
            broker->routed_behind = (uint8_t)(owner->loop_index + 1);
        return;
    }
    session_deliver_match(broker, session, msg, e->qos, e->retain_as_published, e->sub_ids,
                          e->sub_id_count, acl_cache);
}

/* Only several loops contend: with one, every PUBLISH would pay for an idle mutex. The loop
 * count changes only while one thread runs (start-up, shutdown), never between a lock and its
 * unlock. */
void route_forwarders_lock(struct broker *broker)
{
    if (broker->shared->loop_count > 1) pthread_mutex_lock(&broker->shared->forward_lock);
}

void route_forwarders_unlock(struct broker *broker)
{
    if (broker->shared->loop_count > 1) pthread_mutex_unlock(&broker->shared->forward_lock);
}

/* After local delivery: every forwarder sends it on. The count of those that took it. */
static size_t forward_here(struct broker *broker, struct message *msg)
{
    size_t took = 0;
    for (size_t i = 0; i < broker->shared->forwarder_count; i++) {
        const struct route_forwarder *f = broker->shared->forwarders[i];
        if (f->forward && f->forward(f->ctx, msg)) took++;
    }
    return took;
}

/* A message on its way to loop 0's forwarders (several loops). */
struct forward_post {
    struct mailbox_item item; /* first member */
    struct message *msg;
};

static void run_forward_post(struct mailbox_item *item, void *ctx)
{
    struct forward_post *post = (struct forward_post *)item;
    forward_here(ctx, post->msg); /* ctx: loop 0, the mailbox's owner */
    message_unref(post->msg);
    free(post);
}

/* Under the forwarders' lock: the posts reach loop 0 in the order they were stamped. */
static void post_to_forwarders(struct broker *broker, struct message *msg)
{
    struct forward_post *post = malloc(sizeof *post);
    if (!post) {
        log_error("Error: out of memory handing a message on %s to the peers and bridges.",
                  msg->topic);
        return;
    }
    mailbox_item_init(&post->item, run_forward_post);
    post->msg = message_ref(msg);
    mailbox_post(&broker->shared->loops[0]->mailbox, &post->item);
    if (msg->qos > 0) /* durable: its log rows are written on loop 0 before its PUBACK */
        persist_hook_handed_over(broker);
}

/* Several loops: how many forwarders would take it, from what they say without their state. */
static size_t forwarders_would_take(struct broker *broker, const struct message *msg)
{
    size_t took = 0;
    for (size_t i = 0; i < broker->shared->forwarder_count; i++) {
        const struct route_forwarder *f = broker->shared->forwarders[i];
        if (f->takes && f->takes(f->ctx, msg)) took++;
    }
    return took;
}

/* After the stamps: does a forwarder decide the message's shared groups? */
static bool shares_owned(struct broker *broker, const struct message *msg)
{
    for (size_t i = 0; i < broker->shared->forwarder_count; i++) {
        const struct route_forwarder *f = broker->shared->forwarders[i];
        if (f->owns_shares && f->owns_shares(f->ctx, msg)) return true;
    }
    return false;
}

size_t route_deliver_shares(struct broker *broker, struct message *msg,
                            struct match_result *scratch,
                            bool (*wanted)(void *ctx, const char *key, size_t len), void *ctx)
{
    if (subs_match_shares(broker->shared->subscriptions, msg->topic, msg->topic_len,
                          msg->origin_session, scratch, wanted, ctx) != 0)
        log_error("Out of memory matching shared subscriptions for %s.", msg->topic);
    struct acl_read_cache acl_cache = {0};
    for (size_t i = 0; i < scratch->count; i++)
        deliver_to_session(broker, &scratch->entries[i], msg, &acl_cache);
    return scratch->count;
}

size_t route_message(struct broker *broker, struct message *msg)
{
    struct broker_shared *shared = broker->shared;
    bool forwarders = shared->forwarder_count > 0;
    bool hand_to_loop0 = forwarders && shared->loop_count > 1; /* posted there, in order */
    if (forwarders) route_forwarders_lock(broker);
    for (size_t i = 0; i < shared->forwarder_count; i++) {
        const struct route_forwarder *f = shared->forwarders[i];
        if (f->stamp) f->stamp(f->ctx, msg);
    }
    bool forwarder_shares = forwarders && shares_owned(broker, msg);
    if (msg->retain && broker->config->retain_available && retained_wins(broker, msg)) {
        if (retain_set(shared->retained, msg) != 0)
            log_error("Out of memory storing retained message.");
        else
            persist_hook_retained_changed(broker, msg);
    }
    if (hand_to_loop0) post_to_forwarders(broker, msg);
    if (forwarders) route_forwarders_unlock(broker);
    struct subscription_tree *tree = shared->subscriptions;
    int matched = forwarder_shares ? subs_match_leaving_shares(tree, msg->topic, msg->topic_len,
                                                               msg->origin_session, broker->match)
                                   : subs_match(tree, msg->topic, msg->topic_len,
                                                msg->origin_session, broker->match);
    if (matched != 0)
        log_error("Out of memory matching subscriptions for %s.", msg->topic);
    size_t count = broker->match->count;
    struct acl_read_cache acl_cache = {0}; /* acl_file: one verdict per user section */
    for (size_t i = 0; i < count; i++) {
        const struct match_entry *e = &broker->match->entries[i];
        if (!e->subscriber) continue; /* a shared group: its forwarder delivers (owns_shares) */
        switch ((enum subscriber_kind)e->subscriber->kind) {
        case SUBSCRIBER_SESSION:
            deliver_to_session(broker, e, msg, &acl_cache);
            break;
        }
    }
    if (hand_to_loop0) return count + forwarders_would_take(broker, msg);
    return count + forward_here(broker, msg);
}

void route_will(struct broker *broker, struct message *will)
{
    message_restart_expiry(will, broker->now_ms);
    route_message(broker, will);
    message_unref(will);
}

