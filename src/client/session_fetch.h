/*
 * session_fetch.h: bringing a client's session to its connection, for a connection that
 * cannot go to the session (docs/multiloop-design.md, "Websockets listeners").
 *
 * With several loops a client's session belongs to one loop, and a CONNECT that lands on
 * another is normally handed to the session's loop (connection_move). A websockets
 * connection cannot move: its state is in its loop's lws context (transport.h,
 * bound_to_loop). So its CONNECT is kept (connection_keep_packet) and the session comes to
 * it instead:
 *
 * 1. The connection's loop (home) reserves a timer slot for the session and posts a request
 *    to the owner's mailbox; the CONNECT waits, unread, meanwhile (the client role's
 *    packet_must_wait).
 * 2. The owner takes over the session from a connection it still has (closing it as a
 *    takeover does, will included), then hands the session to home (session_move): what
 *    other loops posted to it is in its queue first, in order.
 * 3. Home handles the CONNECT again from the start: the session is its own now, and the
 *    CONNECT goes on as with one loop. If the owner no longer had the session (it ended, or
 *    it was made nowhere yet), the CONNECT is handled again too and finds what there is.
 *
 * Sessions move only towards a loop with websockets listeners (loop 0: they are opened
 * there alone), so a session is fetched at most once per connection and never bounces.
 * A connection that closes while it waits forgets its request; the session still arrives
 * and stays, offline, on home.
 */
#ifndef ARBOR_SESSION_FETCH_H
#define ARBOR_SESSION_FETCH_H

#include "broker_shared.h"

struct session_fetch;

/* From the CONNECT handler on conn's loop: ask owner for client_id's session and keep the
 * CONNECT until it comes (the client state must be as before the CONNECT). Returns 0, or -1
 * when out of memory. */
int session_fetch_start(struct connection *conn, const char *client_id, struct broker *owner);
/* conn closes while its request is under way: the answer finds nobody. */
void session_fetch_forget(struct session_fetch *fetch);

#endif
