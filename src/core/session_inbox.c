/*
 * session_inbox.c: messages posted to a session by loops that do not own it, delivered by its
 * owner (session_inbox.h). Two Treiber stacks: the session's inbox of items, and the owner's
 * stack of sessions whose inbox went from empty to not empty. The owner takes each whole with
 * one exchange and reverses it, which gives back the order of the posts. A session is pushed
 * on the ready stack only by the post that found its inbox empty, and its inbox is emptied only
 * after the owner took the ready stack holding it, so a session is on the stack at most once
 * and its link is free whenever it is pushed.
 */
#include "session_inbox.h"

#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "mailbox.h"
#include "message.h"
#include "publisher_pressure.h"
#include "session_flow.h"

struct session_inbox_item {
    struct session_inbox_item *next;
    struct message *msg;   /* a reference */
    struct broker *counted; /* the loop whose inbox_items counts it (publisher_pressure.h) */
    uint8_t sub_qos;
    bool retain_as_published;
    bool chargeable; /* counted in the session's inbox_chargeable */
    bool charged; /* to the message's publisher until delivered (publisher_pressure.h) */
    uint8_t sub_id_count;
    uint32_t sub_ids[DELIVERY_MAX_SUB_IDS];
};

static void schedule(struct session *session)
{
    struct broker *owner = session_owner(session);
    struct session *head = atomic_load_explicit(&owner->ready_sessions, memory_order_relaxed);
    do {
        session->next_ready = head;
    } while (!atomic_compare_exchange_weak_explicit(&owner->ready_sessions, &head, session,
                                                    memory_order_release, memory_order_relaxed));
    if (!head) mailbox_post(&owner->mailbox, &owner->ready_item); /* it was idle */
}

int session_inbox_post(struct session *session, const struct match_entry *e, struct message *msg)
{
    struct session_inbox_item *item = malloc(sizeof *item);
    if (!item) return -1;
    struct broker *owner = session_owner(session);
    item->msg = message_ref(msg);
    item->counted = owner;
    loop_backlog_posted(owner);
    item->chargeable = msg->publisher && msg->qos > 0 && e->qos > 0;
    item->charged = false;
    if (item->chargeable) {
        uint32_t ahead =
            atomic_fetch_add_explicit(&session->inbox_chargeable, 1, memory_order_relaxed);
        item->charged = publisher_post_charges(owner, &session->flow, ahead);
    }
    if (item->charged) publisher_charge_post(msg->publisher);
    item->sub_qos = e->qos;
    item->retain_as_published = e->retain_as_published;
    item->sub_id_count = e->sub_id_count;
    memcpy(item->sub_ids, e->sub_ids, sizeof item->sub_ids);
    /* acq_rel: finding it empty, this post comes after the owner's take (take_items), and so
     * after the owner let go of the session's ready link, which schedule writes. */
    struct session_inbox_item *head = atomic_load_explicit(&session->inbox, memory_order_acquire);
    do {
        item->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&session->inbox, &head, item,
                                                    memory_order_acq_rel, memory_order_acquire));
    if (!head) schedule(session);
    return 0;
}

/* Take a stack whole, oldest first. */
static struct session_inbox_item *take_items(struct session *session)
{
    struct session_inbox_item *item =
        atomic_exchange_explicit(&session->inbox, NULL, memory_order_acq_rel);
    struct session_inbox_item *oldest_first = NULL;
    while (item) {
        struct session_inbox_item *next = item->next;
        item->next = oldest_first;
        oldest_first = item;
        item = next;
    }
    return oldest_first;
}

size_t session_inbox_drain(struct broker *owner)
{
    struct session *session =
        atomic_exchange_explicit(&owner->ready_sessions, NULL, memory_order_acquire);
    /* Reverse the whole stack before emptying any inbox: once a session's inbox is taken, a
     * post may push it on the ready stack again, which rewrites its link. */
    struct session *oldest_first = NULL;
    while (session) {
        struct session *next = session->next_ready;
        session->next_ready = oldest_first;
        oldest_first = session;
        session = next;
    }
    size_t count = 0;
    uint32_t counted_here = 0;
    while (oldest_first) {
        session = oldest_first;
        oldest_first = session->next_ready;
        session->next_ready = NULL;
        if (session_owner(session) != owner) {
            /* Moved away (session_move) after a post had read the old owner: its items are
             * the new owner's to deliver, after what this loop delivered before the move. */
            schedule(session);
            continue;
        }
        struct session_inbox_item *item = take_items(session);
        while (item) {
            struct session_inbox_item *next = item->next;
            struct acl_read_cache acl_cache = {0}; /* a verdict is per message */
            if (!session->gone) /* a post that raced its destroy: dropped */
                session_deliver_match(owner, session, item->msg, item->sub_qos,
                                      item->retain_as_published, item->sub_ids,
                                      item->sub_id_count, &acl_cache);
            if (item->chargeable)
                atomic_fetch_sub_explicit(&session->inbox_chargeable, 1, memory_order_relaxed);
            if (item->charged) publisher_discharge_post(owner, item->msg->publisher);
            message_unref(item->msg);
            if (item->counted == owner)
                counted_here++;
            else /* posted before the session moved here */
                loop_backlog_drained(item->counted, 1);
            free(item);
            item = next;
            count++;
        }
    }
    loop_backlog_drained(owner, counted_here);
    return count;
}

void session_inbox_settle(struct broker *owner, struct session *session)
{
    /* Outside a drain, a session is on the ready stack exactly while its inbox holds items. */
    if (atomic_load_explicit(&session->inbox, memory_order_acquire)) session_inbox_drain(owner);
}

static void run_ready(struct mailbox_item *item, void *ctx)
{
    (void)item;
    session_inbox_drain(ctx);
}

void session_inbox_init_loop(struct broker *broker)
{
    atomic_init(&broker->ready_sessions, NULL);
    mailbox_item_init(&broker->ready_item, run_ready);
}
