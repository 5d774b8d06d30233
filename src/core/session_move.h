/*
 * session_move.h: handing an offline session from the loop that owns it to another
 * (docs/multiloop-design.md step 8): a client connects on loop B to a session loop A owns.
 * A (after closing the old connection, if any, and publishing its will as a takeover does)
 * gives the session up: its timer leaves A's heap, what other loops posted to it is
 * delivered into its queue, and the owner becomes B; then B adopts it (its timer slot on B's
 * heap) and the move's continuation runs on B (the CONNECT goes on there).
 *
 * Order: every message routed to the session before the move is in its queue before any
 * routed after it, per publisher: posts that raced the switch are forwarded by A's drain to B
 * (session_inbox.c). Deliveries, snapshots and the QoS 2 state move with the session; their
 * pool entries are freed into whichever loop frees them.
 */
#ifndef ARBOR_SESSION_MOVE_H
#define ARBOR_SESSION_MOVE_H

#include "broker_shared.h"
#include "mailbox.h"

/* What session_move posts to the new owner; the caller keeps it alive until done runs. */
struct session_move {
    struct mailbox_item item;
    struct session *session;
    struct broker *to;
    /* On the new owner's thread, once the session is its own. */
    void (*done)(struct broker *to, struct session *session, void *ctx);
    void *ctx;
};

/* On the owner's thread (from), with session offline: give it to `to`. The one who asked for
 * the move reserved a timer slot on to's heap for it (timers_reserve, on to's thread, where
 * running out of memory can still refuse the CONNECT); from's slot is given back here.
 * move->done runs on to's thread (at its next mailbox drain; at once, on this thread, when
 * to == from, and then to's reserved slot is given back). */
void session_move(struct broker *from, struct session *session, struct broker *to,
                  struct session_move *move);

#endif
