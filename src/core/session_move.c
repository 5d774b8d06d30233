/*
 * session_move.c: an offline session handed from its owner loop to another (session_move.h).
 * The old owner lets go of everything of its own the session uses (its timer slot and place
 * in the heap, the posts waiting for it), switches the owner with a release store, and posts
 * the move to the new owner, whose mailbox drain adopts the session (acquire: it sees the
 * session as the old owner left it).
 */
#include "session_move.h"

#include "session.h"
#include "session_inbox.h"
#include "timers.h"

static void adopt(struct mailbox_item *item, void *ctx)
{
    (void)ctx;
    struct session_move *move = (struct session_move *)item; /* item is its first member */
    struct broker *to = move->to;
    struct session *session = move->session;
    session_update_timer(to, session); /* in the slot the mover reserved on to's heap */
    move->done(to, session, move->ctx);
}

void session_move(struct broker *from, struct session *session, struct broker *to,
                  struct session_move *move)
{
    move->session = session;
    move->to = to;
    mailbox_item_init(&move->item, adopt);
    if (to == from) {
        timers_unreserve(&to->timers); /* it has its slot on this heap already */
        move->done(to, session, move->ctx);
        return;
    }
    timer_cancel(&from->timers, &session->timer);
    timers_unreserve(&from->timers);
    session_inbox_settle(from, session); /* posted before the move: delivered by `from` */
    atomic_store_explicit(&session->owner, to, memory_order_release);
    mailbox_post(&to->mailbox, &move->item);
}
