/*
 * session_fetch.c: a session brought from the loop that owns it to a connection that cannot
 * move (session_fetch.h). One request per fetch, with three mailbox items: the ask run on the
 * owner, and either the session's move (session_move) or the answer "not here" run on the
 * connection's loop. The request is freed on the connection's loop, which is also the only
 * one that reads or clears its connection.
 */
#include "session_fetch.h"

#include <stdlib.h>
#include <string.h>

#include "client_state.h"
#include "connection.h"
#include "log.h"
#include "mailbox.h"
#include "session.h"
#include "session_life.h"
#include "session_move.h"
#include "timers.h"

struct session_fetch {
    struct session_move move;     /* to home, once the owner gives the session up */
    struct mailbox_item ask;      /* run on the owner */
    struct mailbox_item not_here; /* run on home: the owner had no such session any more */
    struct broker *home;          /* the connection's loop */
    struct connection *conn;      /* NULL once it closed (home's to read and write) */
    const char *transport;        /* its name, for the owner's debug line */
    char client_id[];
};

/* On home: the CONNECT is handled again (the client role lets it through now). */
static void finish(struct session_fetch *fetch)
{
    struct connection *conn = fetch->conn;
    free(fetch);
    if (!conn) return;
    client_of(conn)->fetch = NULL;
    connection_resume_held(conn);
}

static void moved(struct broker *home, struct session *session, void *ctx)
{
    (void)home;
    (void)session;
    finish(ctx);
}

static void answer_not_here(struct mailbox_item *item, void *ctx)
{
    struct broker *home = ctx;
    struct session_fetch *fetch = container_of(item, struct session_fetch, not_here);
    timers_unreserve(&home->timers); /* the slot the session would have taken */
    finish(fetch);
}

/* On the owner: take the session over from its connection, if it has one, and give it to
 * home; or say it is not here (ended, or moved: the CONNECT looks again). */
static void ask(struct mailbox_item *item, void *ctx)
{
    struct broker *owner = ctx;
    struct session_fetch *fetch = container_of(item, struct session_fetch, ask);
    /* Stopping: the sessions stay where they are (shutdown destroys each on its owner; a
     * move now could be adopted after that). The CONNECT looks again, and the connection
     * is closed with the others. */
    if (atomic_load_explicit(&owner->shared->loops_stop, memory_order_acquire)) {
        mailbox_post(&fetch->home->mailbox, &fetch->not_here);
        return;
    }
    struct session *session = session_find_live(owner, fetch->client_id);
    if (session && session_owner(session) == owner && session->connection) {
        log_notice("Client %s already connected, closing old connection.", session->client_id);
        connection_close(session->connection, MQTT_RC_SESSION_TAKEN_OVER, "session taken over");
        /* a session with expiry 0 ended with it */
        session = session_find(owner, fetch->client_id);
    }
    if (!session || session_owner(session) != owner || session->connection) {
        mailbox_post(&fetch->home->mailbox, &fetch->not_here);
        return;
    }
    log_debug("The session of %s moves from event loop %u to %u for its %s connection.",
              session->client_id, owner->loop_index, fetch->home->loop_index, fetch->transport);
    session_move(owner, session, fetch->home, &fetch->move);
}

int session_fetch_start(struct connection *conn, const char *client_id, struct broker *owner)
{
    struct broker *home = conn->broker;
    size_t id_len = strlen(client_id);
    struct session_fetch *fetch = calloc(1, sizeof *fetch + id_len + 1);
    if (!fetch) return -1;
    if (timers_reserve(&home->timers) != 0) { /* the session's slot on home's heap */
        free(fetch);
        return -1;
    }
    memcpy(fetch->client_id, client_id, id_len + 1);
    fetch->home = home;
    fetch->conn = conn;
    fetch->transport = conn->transport->name;
    fetch->move.done = moved;
    fetch->move.ctx = fetch;
    mailbox_item_init(&fetch->ask, ask);
    mailbox_item_init(&fetch->not_here, answer_not_here);
    client_of(conn)->fetch = fetch;
    connection_keep_packet(conn);
    mailbox_post(&owner->mailbox, &fetch->ask);
    return 0;
}

void session_fetch_forget(struct session_fetch *fetch)
{
    fetch->conn = NULL;
}
