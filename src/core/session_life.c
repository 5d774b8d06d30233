/*
 * session_life.c: the end of a session's life: destroying it (which publishes a will it still
 * holds) and its timer while offline, which publishes a delayed will, expires the session and
 * drops expired queued messages. Above session.c (records) and session_flow.c (sending): it
 * routes wills (route.c).
 */
#include "session_life.h"

#include <assert.h>

#include <stdlib.h>

#include "acl.h"
#include "delivery.h"
#include "log.h"
#include "message.h"
#include "persist_hooks.h"
#include "route.h"
#include "session.h"
#include "session_flow.h"
#include "session_inbox.h"
#include "spin_lock.h"
#include "subs.h"

/* The deferred free (qsbr.h), on the owner's thread once every loop has finished the turn
 * in which it might have found the session: a post that raced the destroy has pushed it on
 * the ready stack by now; the drain takes it off (dropping what it holds: gone). */
static void free_session(void *ptr)
{
    struct session *session = ptr;
    session_inbox_settle(session_owner(session), session);
    free(session);
}

/* Freed at once with no other loop (or no loops: unit tests); else after a grace period. */
static void session_free_later(struct broker *broker, struct session *session)
{
    if (!broker->qsbr.domain || atomic_load(&broker->shared->qsbr.thread_count) <= 1) {
        free_session(session);
        return;
    }
    if (qsbr_defer(&broker->qsbr, free_session, session) != 0)
        log_error("Out of memory: the record of a removed session (%zu bytes) is not freed.",
                  sizeof *session);
}

void session_destroy(struct broker *broker, struct session *session)
{
    assert(session_owner(session) == broker); /* its timer is on its owner's heap */
    /* From now on what other loops posted to it is dropped, not delivered (the settle below
     * drains this loop's ready sessions: a delivery here could arm the timer again). */
    session->gone = true;
    persist_hook_session_removed(broker, session);
    timer_cancel(&broker->timers, &session->timer);
    timers_unreserve(&broker->timers);
    struct session_subscription *sub, *tmp;
    HASH_ITER(hh, session->subscriptions, sub, tmp)
    {
        subs_remove(broker->shared->subscriptions, sub->filter, &session->subscriber);
        broker->stats.subscriptions--;
        if (is_shared_filter(sub->filter)) broker->stats.shared_subscriptions--;
        HASH_DEL(session->subscriptions, sub);
        free(sub);
    }
    session_inbox_settle(broker, session); /* out of the tree: nothing more is posted */
    outflow_release(broker, &session->flow);
    while (session->retained_head) {
        struct retained_snapshot *snap = session->retained_head;
        session->retained_head = snap->next;
        retained_snapshot_free(snap);
    }
    spin_lock(&broker->shared->sessions_lock);
    HASH_DEL(broker->shared->sessions, session);
    spin_unlock(&broker->shared->sessions_lock);
    struct message *will = session->pending_will;
    session->pending_will = NULL;
    acl_client_free(session->acl);
    free(session->incoming_qos2);
    session_free_later(broker, session);
    if (will) route_will(broker, will);
}

/* Publish the will and expire the session if their time has come. Returns true if the
 * session was destroyed. */
static bool run_due(struct broker *broker, struct session *session)
{
    if (session->connection) return false;
    if (session->pending_will && broker_past(broker, session->pending_will_at_ms)) {
        struct message *will = session->pending_will;
        session->pending_will = NULL;
        route_will(broker, will);
        persist_hook_session_changed(broker, session);
    }
    int64_t expiry = session_expiry_deadline(broker, session);
    if (expiry != TIMER_NONE && broker_past(broker, expiry)) {
        log_info("Expiring client %s.", session->client_id);
        broker->stats.clients_expired++;
        session_destroy(broker, session);
        return true;
    }
    return false;
}

void session_timer_fired(struct broker *broker, struct session *session)
{
    if (run_due(broker, session)) return;
    if (!session->connection && session->flow.queued.count) session_drop_expired(broker, session);
    session_update_timer(broker, session);
}

struct session *session_find_live(struct broker *broker, const char *client_id)
{
    struct session *session = session_find(broker, client_id);
    /* another loop's session is that loop's to expire (the caller moves there) */
    if (session && session_owner(session) == broker && run_due(broker, session)) return NULL;
    return session;
}

