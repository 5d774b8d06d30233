/*
 * session.c: session records: lookup and creation, the session's own record of its
 * subscriptions, the QoS 2 receive bitmap, and arming the session's timer: while offline it
 * is due for the delayed will, the session's expiry and (at most once a second) for expired
 * queued messages. What the timer does, and destroying a session, is session_life.c's;
 * sending is session_flow.c's.
 */
#include "session.h"

#include <stddef.h>
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "spin_lock.h"
#include "log.h"
#include "message.h"
#include "publisher_pressure.h"
#include "subs.h"

/* Expired messages are dropped from an offline queue at most this often (delivery checks
 * expiry anyway, to the millisecond; this only frees the memory). */
#define QUEUE_SWEEP_MS 1000

struct session *session_find(struct broker *broker, const char *client_id)
{
    struct session *session = NULL;
    spin_lock(&broker->shared->sessions_lock);
    HASH_FIND_STR(broker->shared->sessions, client_id, session);
    spin_unlock(&broker->shared->sessions_lock);
    return session;
}

struct session *session_create(struct broker *broker, const char *client_id, uint8_t version)
{
    size_t id_len = strlen(client_id);
    struct session *session = calloc(1, offsetof(struct session, client_id) + id_len + 1);
    if (!session) return NULL;
    memcpy(session->client_id, client_id, id_len + 1);
    if (timers_reserve(&broker->timers) != 0) {
        free(session);
        return NULL;
    }
    session->subscriber.kind = SUBSCRIBER_SESSION;
    session->subscriber.serial =
        atomic_fetch_add_explicit(&broker->shared->next_session_serial, 1,
                                  memory_order_relaxed) + 1;
    session->timer.kind = TIMER_SESSION;
    atomic_init(&session->owner, broker); /* the loop that made it (a restore, a CONNECT on it) */
    session->version = version;
    /* One session per client id (a second with the same key would sit unseen in the table):
     * looked up under the lock the add takes, so two loops making a session for the same
     * client id at once cannot both add one. */
    struct session *existing = NULL;
    spin_lock(&broker->shared->sessions_lock);
    HASH_FIND(hh, broker->shared->sessions, client_id, id_len, existing);
    if (!existing)
        HASH_ADD_KEYPTR(hh, broker->shared->sessions, session->client_id, id_len, session);
    spin_unlock(&broker->shared->sessions_lock);
    if (existing) {
        timers_unreserve(&broker->timers);
        free(session);
        return NULL;
    }
    return session;
}

bool is_shared_filter(const char *filter)
{
    return strncmp(filter, "$share/", 7) == 0;
}

int session_remember_subscription(struct session *session, const char *filter, uint8_t options,
                                  uint32_t identifier)
{
    struct session_subscription *sub;
    HASH_FIND_STR(session->subscriptions, filter, sub);
    if (!sub) {
        size_t len = strlen(filter);
        sub = calloc(1, offsetof(struct session_subscription, filter) + len + 1);
        if (!sub) return -1;
        memcpy(sub->filter, filter, len + 1);
        HASH_ADD_KEYPTR(hh, session->subscriptions, sub->filter, len, sub);
    }
    sub->options = options;
    sub->identifier = identifier;
    return 0;
}

bool session_forget_subscription(struct session *session, const char *filter)
{
    struct session_subscription *sub;
    HASH_FIND_STR(session->subscriptions, filter, sub);
    if (!sub) return false;
    HASH_DEL(session->subscriptions, sub);
    free(sub);
    return true;
}

bool session_incoming_qos2_has(const struct session *session, uint16_t packet_id)
{
    return session->incoming_qos2 &&
           (session->incoming_qos2[packet_id >> 3] & (1u << (packet_id & 7)));
}

int session_incoming_qos2_add(struct session *session, uint16_t packet_id)
{
    if (!session->incoming_qos2) {
        session->incoming_qos2 = calloc(65536 / 8, 1);
        if (!session->incoming_qos2) return -1;
    }
    if (!session_incoming_qos2_has(session, packet_id)) {
        session->incoming_qos2[packet_id >> 3] |= (uint8_t)(1u << (packet_id & 7));
        session->incoming_qos2_count++;
    }
    return 0;
}

void session_incoming_qos2_remove(struct session *session, uint16_t packet_id)
{
    if (!session_incoming_qos2_has(session, packet_id)) return;
    session->incoming_qos2[packet_id >> 3] &= (uint8_t) ~(1u << (packet_id & 7));
    session->incoming_qos2_count--;
}

/* When an offline session expires (persistent_client_expiration may shorten the client's
 * interval), or TIMER_NONE. */
int64_t session_expiry_deadline(const struct broker *broker, const struct session *session)
{
    if (session->bridge_owned) return TIMER_NONE;
    uint32_t expiry = session->expiry_interval;
    int64_t limit = broker->config->persistent_client_expiry;
    if (limit >= 0 && (uint64_t)limit < expiry) expiry = (uint32_t)limit;
    if (expiry == UINT32_MAX) return TIMER_NONE;
    return session->disconnected_at_ms + (int64_t)expiry * 1000;
}

static int64_t earliest_queued_expiry(const struct session *session)
{
    int64_t earliest = TIMER_NONE;
    for (const struct delivery *d = session->flow.queued.head; d; d = d->next)
        if (d->msg && d->msg->expiry_at_ms && d->msg->expiry_at_ms < earliest)
            earliest = d->msg->expiry_at_ms;
    return earliest;
}

static int64_t queue_sweep_at(const struct broker *broker, int64_t expiry_at_ms)
{
    int64_t soonest = broker->now_ms + QUEUE_SWEEP_MS;
    return expiry_at_ms < soonest ? soonest : expiry_at_ms;
}

static void set_timer(struct broker *broker, struct session *session, int64_t deadline)
{
    assert(!session->gone); /* its record is freed after a grace period, not its timer */
    assert(session_owner(session) == broker); /* a timer lives on its owner's heap */
    if (timer_set(&broker->timers, &session->timer, deadline) != 0)
        log_error("Error: out of memory arming the timer of session %s.", session->client_id);
}

void session_attach(struct broker *broker, struct session *session, struct connection *conn)
{
    session->connection = conn;
    atomic_store_explicit(&session->subscriber.online, conn != NULL, memory_order_relaxed);
    publisher_pressure_flow_online(broker, &session->flow, conn != NULL);
}

void session_update_timer(struct broker *broker, struct session *session)
{
    if (session->connection) {
        timer_cancel(&broker->timers, &session->timer);
        return;
    }
    int64_t deadline = session_expiry_deadline(broker, session);
    if (session->pending_will && session->pending_will_at_ms < deadline)
        deadline = session->pending_will_at_ms;
    int64_t queued = earliest_queued_expiry(session);
    if (queued != TIMER_NONE && queue_sweep_at(broker, queued) < deadline)
        deadline = queue_sweep_at(broker, queued);
    set_timer(broker, session, deadline);
}

void session_note_queued(struct broker *broker, struct session *session,
                         const struct message *msg)
{
    if (session->connection || !msg->expiry_at_ms) return;
    int64_t sweep = queue_sweep_at(broker, msg->expiry_at_ms);
    if (!timer_armed(&session->timer) || sweep < session->timer.deadline_ms)
        set_timer(broker, session, sweep);
}

void sessions_rearm_timers(struct broker *broker)
{
    struct session *session, *tmp;
    HASH_ITER(hh, broker->shared->sessions, session, tmp)
    {
        /* on its owner's heap: the other loops are parked (a reload) */
        if (!session->connection) session_update_timer(session_owner(session), session);
    }
}
