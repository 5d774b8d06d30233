/*
 * persist.c: persistence policy (see persist.h): the full save and the restore, autosave, and
 * in durable mode the rows that follow each change and the commit before output.
 *
 * What is kept: retained messages (not $SYS), and sessions that outlive their connection
 * (expiry > 0) with subscriptions, incoming QoS 2 packet ids awaiting PUBREL, queued and
 * in-flight deliveries (packet id and state) and the will. Messages queued for sessions are
 * stored once however many deliveries share them: the row's id and the count of stored
 * deliveries that use it are kept here, in a table beside the messages (struct
 * stored_message), never in the messages, which are immutable once published. Retained
 * messages still to be handed to a new subscription (a session's retained snapshot) are not
 * kept.
 *
 * MQTT-ST: a message keeps its origin stamp, so that after a restart the spanning tree still
 * tells which of two retained values is newer, and a bridge standing by for the tree still
 * knows which of its queued messages the holder has delivered (docs/mqtt-st-protocol.md 7.5);
 * the link it arrived on is not kept (it is local after a restart). The message log
 * (message_log.h) is kept too: a row per entry with its message in it (most logged messages
 * are queued for no kept session, so they share no row; durable mode follows each entry
 * through the log's observer, a row in and a row out). MQTT-ST's own
 * state (its stream, what it has seen) is a section (persist_hooks.h) whose bytes are kept
 * as they are.
 *
 * Must not: call SQLite (persist_store.c does), or know packet encodings.
 */
#include "persist.h"
#include "client_state.h"
#include "persist_hooks.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acl.h"
#include "log.h"
#include "mailbox.h"
#include "message.h"
#include "outflow.h"
#include "persist_record.h"
#include "persist_store.h"
#include "retain.h"
#include "retain_source.h"
#include "session.h"
#include "subs.h"
#include "delivery.h"

#define DEFAULT_FILE "arbor.db"
#define RETRY_MS 1000

/* A message with a row of its own (PERSIST_MESSAGE) that stored deliveries point at. The
 * entry holds a reference to its message, so the key (the message's address) cannot be
 * reused while it exists. Durable mode keeps an entry while stored deliveries use the row:
 * refs counts the deliveries with a persist_id whose msg is this one. Snapshot mode has
 * entries only during a save or a restore. */
struct stored_message {
    UT_hash_handle hh; /* persist.stored, by message address */
    struct message *msg;
    uint64_t id;   /* the row's key */
    uint32_t refs; /* stored deliveries that use the row */
};

struct persist {
    struct persist_store *store;
    struct stored_message *stored; /* by message address */
    char *path;
    bool durable;
    /* Durable mode. Every loop writes rows, one at a time (lock, recursive: a hook may call
     * another); every loop reads these flags to hold its output. */
    pthread_mutex_t lock;
    atomic_bool pending; /* rows written in the open transaction */
    atomic_bool failed;  /* a write failed: everything is written again */
    /* Several loops: work that writes rows was handed to another loop since the last commit
     * (persist_hook_handed_over); cleared by loop 0's commit once every inbox is drained. */
    atomic_bool handed_over;
    atomic_bool workers_stopped; /* shutdown: loop 0 alone runs, and commits as one loop */
    int64_t retry_at_ms; /* after a failure, when to try again (loop 0's) */
    int64_t next_autosave_ms;
    /* since the last save, for autosave_on_changes: counted by every loop (snapshot mode
     * runs with several), reset by a save, which runs with the others parked */
    _Atomic uint64_t changes;
    uint64_t next_id; /* ids of stored messages and deliveries */
    struct abuf key, value, section;
};

static int64_t wall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The monotonic clock restarts with each run: stored times are wall clock. */
static int64_t to_wall(const struct broker *broker, int64_t wall_now, int64_t mono_ms)
{
    return wall_now + (mono_ms - broker->now_ms);
}

static int64_t to_mono(const struct broker *broker, int64_t wall_now, int64_t wall_ms)
{
    return broker->now_ms + (wall_ms - wall_now);
}

/* ---------------------------------------------------------------------------------------------
 * Stored messages: which message has which row
 */

static struct stored_message *stored_find(const struct persist *p, const struct message *msg)
{
    struct stored_message *s = NULL;
    HASH_FIND_PTR(p->stored, &msg, s);
    return s;
}

/* A new entry for msg (which has none) with the row id given, no delivery yet; NULL on OOM. */
static struct stored_message *stored_add(struct persist *p, struct message *msg, uint64_t id)
{
    struct stored_message *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->msg = message_ref(msg);
    s->id = id;
    HASH_ADD_PTR(p->stored, msg, s);
    return s;
}

static void stored_remove(struct persist *p, struct stored_message *s)
{
    HASH_DEL(p->stored, s);
    message_unref(s->msg);
    free(s);
}

static void stored_clear(struct persist *p)
{
    struct stored_message *s, *tmp;
    HASH_ITER(hh, p->stored, s, tmp) stored_remove(p, s);
}

/* ---------------------------------------------------------------------------------------------
 * Records from broker state
 */

static bool retained_kept(const struct message *msg)
{
    return !msg->origin.local_only && !(msg->topic_len >= 4 && !memcmp(msg->topic, "$SYS", 4));
}

static void describe_message(const struct broker *broker, int64_t wall_now,
                             const struct message *msg, struct persist_message *m)
{
    memset(m, 0, sizeof *m);
    m->qos = msg->qos;
    m->retain = msg->retain;
    m->expiry_interval_s = msg->expiry_interval_s;
    m->expiry_at_wall_ms = msg->expiry_at_ms ? to_wall(broker, wall_now, msg->expiry_at_ms) : 0;
    m->topic = msg->topic;
    m->topic_len = msg->topic_len;
    m->payload = msg->payload;
    m->payload_len = msg->payload_len;
    m->props = msg->props;
    m->props_len = msg->props_len;
    if (msg->source) {
        m->source_client_id = msg->source->client_id;
        m->source_client_id_len = strlen(msg->source->client_id);
        m->source_username = msg->source->username;
        m->source_username_len = msg->source->username ? strlen(msg->source->username) : 0;
        m->source_listener_port = msg->source->listener_port;
    }
    if (msg->origin.stamped) {
        m->stamped = true;
        m->origin = msg->origin;
    }
    m->local_only = msg->origin.local_only;
}

/* Where the session's client last connected, as an index into the config's listeners. */
static int32_t listener_index(const struct broker *broker, const struct session *session)
{
    const struct listener *l = session->acl_listener;
    if (!l || !l->config) return -1;
    for (size_t i = 0; i < broker->config->listener_count; i++)
        if (&broker->config->listeners[i] == l->config) return (int32_t)i;
    return -1;
}

static int put_session(struct persist *p, struct broker *broker, int64_t wall_now,
                       const struct session *session)
{
    struct persist_session s = {0};
    const struct connection *conn = session->connection;
    s.version = session->version;
    s.no_echo = atomic_load_explicit(&session->subscriber.no_echo, memory_order_relaxed);
    s.was_connected = conn != NULL;
    s.expiry_interval = session->expiry_interval;
    s.disconnected_at_wall_ms = conn ? 0 : to_wall(broker, wall_now, session->disconnected_at_ms);
    s.last_packet_id = session->flow.last_packet_id;
    s.listener_index = listener_index(broker, session);
    const struct client *client = conn ? client_of(conn) : NULL;
    s.username = client ? client->username
                 : session->acl ? acl_client_username(session->acl)
                                : NULL;
    s.username_len = s.username ? strlen(s.username) : 0;
    const struct message *will = client ? client->will : session->pending_will;
    if (will) {
        s.has_will = true;
        s.will_delay_s = conn ? client_of(conn)->will_delay : 0;
        s.will_at_wall_ms = conn ? 0 : to_wall(broker, wall_now, session->pending_will_at_ms);
        describe_message(broker, wall_now, will, &s.will);
    }
    abuf_reset(&p->value);
    size_t id_len = strlen(session->client_id);
    if (persist_encode_session(&p->value, session->client_id, id_len, &s)) return -1;
    return persist_store_put(p->store, PERSIST_SESSION, session->client_id, id_len, p->value.data,
                             p->value.len);
}

static int put_subscription(struct persist *p, const struct session *session,
                            const struct session_subscription *sub)
{
    if (persist_key_pair(&p->key, session->client_id, sub->filter, strlen(sub->filter))) return -1;
    struct persist_subscription s = {sub->options, sub->identifier};
    abuf_reset(&p->value);
    if (persist_encode_subscription(&p->value, p->key.data, p->key.len, &s)) return -1;
    return persist_store_put(p->store, PERSIST_SUBSCRIPTION, p->key.data, p->key.len, p->value.data,
                             p->value.len);
}

static int qos2_key(struct persist *p, const struct session *session, uint16_t packet_id)
{
    uint8_t id[2] = {(uint8_t)(packet_id >> 8), (uint8_t)packet_id};
    return persist_key_pair(&p->key, session->client_id, id, 2);
}

static int put_qos2(struct persist *p, const struct session *session, uint16_t packet_id)
{
    if (qos2_key(p, session, packet_id)) return -1;
    abuf_reset(&p->value);
    if (persist_encode_empty(&p->value, PERSIST_QOS2_IN, p->key.data, p->key.len)) return -1;
    return persist_store_put(p->store, PERSIST_QOS2_IN, p->key.data, p->key.len, p->value.data,
                             p->value.len);
}

static int put_message(struct persist *p, struct broker *broker, int64_t wall_now,
                       const struct stored_message *stored)
{
    const struct message *msg = stored->msg;
    uint8_t key[8];
    persist_key_id(key, stored->id);
    struct persist_message m;
    describe_message(broker, wall_now, msg, &m);
    abuf_reset(&p->value);
    if (persist_encode_message(&p->value, PERSIST_MESSAGE, key, sizeof key, &m)) return -1;
    return persist_store_put(p->store, PERSIST_MESSAGE, key, sizeof key, p->value.data,
                             p->value.len);
}

/* The delivery's row; stored: its message's entry (NULL once the message is released). */
static int put_delivery(struct persist *p, const struct session *session, struct delivery *d,
                        const struct stored_message *stored)
{
    if (!d->persist_id) d->persist_id = p->next_id++;
    uint8_t key[8];
    persist_key_id(key, d->persist_id);
    struct persist_delivery r = {
        .client_id = session->client_id,
        .client_id_len = strlen(session->client_id),
        .message_id = stored ? stored->id : 0,
        .state = (uint8_t)d->state,
        .packet_id = d->packet_id,
        .qos = d->qos,
        .retain = d->retain,
        .sub_id_count = d->sub_id_count,
    };
    memcpy(r.sub_ids, d->sub_ids, sizeof r.sub_ids);
    abuf_reset(&p->value);
    if (persist_encode_delivery(&p->value, key, sizeof key, &r)) return -1;
    return persist_store_put(p->store, PERSIST_DELIVERY, key, sizeof key, p->value.data,
                             p->value.len);
}

static int put_retained(struct persist *p, struct broker *broker, int64_t wall_now,
                        const struct message *msg)
{
    struct persist_message m;
    describe_message(broker, wall_now, msg, &m);
    abuf_reset(&p->value);
    if (persist_encode_message(&p->value, PERSIST_RETAINED, msg->topic, msg->topic_len, &m))
        return -1;
    return persist_store_put(p->store, PERSIST_RETAINED, msg->topic, msg->topic_len, p->value.data,
                             p->value.len);
}

/* The row of the log entry with this serial. */
static int put_log_entry(struct persist *p, struct broker *broker, int64_t wall_now,
                         uint64_t serial, const struct message_log_entry *e)
{
    uint8_t key[8];
    persist_key_id(key, serial);
    struct persist_log_entry row = {.at_wall_ms = to_wall(broker, wall_now, e->at_ms)};
    describe_message(broker, wall_now, e->msg, &row.msg);
    abuf_reset(&p->value);
    if (persist_encode_log_entry(&p->value, key, sizeof key, &row)) return -1;
    return persist_store_put(p->store, PERSIST_LOG, key, sizeof key, p->value.data, p->value.len);
}

static int put_section(struct persist *p, const struct persist_section *section, bool final)
{
    struct persist_section_save how = {.final = final, .durable = p->durable};
    abuf_reset(&p->section);
    if (section->save(section->ctx, &p->section, &how)) return -1;
    abuf_reset(&p->value);
    size_t name_len = strlen(section->name);
    if (persist_encode_section(&p->value, section->name, name_len, p->section.data,
                               p->section.len))
        return -1;
    return persist_store_put(p->store, PERSIST_SECTION, section->name, name_len, p->value.data,
                             p->value.len);
}

static int put_sections(struct persist *p, struct broker *broker, bool final)
{
    for (size_t i = 0; i < broker->shared->persist_section_count; i++)
        if (put_section(p, broker->shared->persist_sections[i], final)) return -1;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The full save
 */

static bool session_kept(const struct session *session)
{
    return session->expiry_interval > 0;
}

struct save_context {
    struct persist *p;
    struct broker *broker;
    int64_t wall_now;
    int rc;
    bool out_of_memory;
    size_t retained;
};

static void save_retained(struct message *msg, void *ctx)
{
    struct save_context *save = ctx;
    if (save->rc || !retained_kept(msg)) return;
    if (message_expired(msg, save->broker->now_ms)) return;
    save->rc = put_retained(save->p, save->broker, save->wall_now, msg);
    save->retained++;
}

/* The message's entry, and its row when it has none yet (a full save). */
static struct stored_message *save_stored(struct save_context *save, struct message *msg)
{
    struct persist *p = save->p;
    struct stored_message *stored = stored_find(p, msg);
    if (stored) return stored;
    if (!(stored = stored_add(p, msg, p->next_id++))) {
        save->out_of_memory = true;
        return NULL;
    }
    return put_message(p, save->broker, save->wall_now, stored) ? NULL : stored;
}

/* The delivery's row, after its message's row if this is the first delivery to use it. */
static int save_delivery(struct save_context *save, struct session *session, struct delivery *d)
{
    struct stored_message *stored = NULL;
    if (d->msg && !(stored = save_stored(save, d->msg))) return -1;
    if (stored) stored->refs++;
    return put_delivery(save->p, session, d, stored);
}

static int save_log(struct save_context *save)
{
    const struct message_log *log = &save->broker->shared->message_log;
    for (uint64_t serial = log->head_serial; serial < message_log_end(log); serial++) {
        if (put_log_entry(save->p, save->broker, save->wall_now, serial, message_log_at(log, serial)))
            return -1;
    }
    return 0;
}

/* Before a full save: no message has a row any more, and no delivery (kept or not). */
static void forget_stored(struct persist *p, struct broker *broker)
{
    stored_clear(p);
    struct session *session, *tmp;
    HASH_ITER(hh, broker->shared->sessions, session, tmp)
    {
        for (struct delivery *d = session->flow.inflight.head; d; d = d->next) d->persist_id = 0;
        for (struct delivery *d = session->flow.queued.head; d; d = d->next) d->persist_id = 0;
    }
}

static int save_session(struct save_context *save, struct session *session)
{
    struct persist *p = save->p;
    session->persisted = session_kept(session);
    if (!session->persisted) return 0;
    if (put_session(p, save->broker, save->wall_now, session)) return -1;
    struct session_subscription *sub, *tmp;
    HASH_ITER(hh, session->subscriptions, sub, tmp)
    {
        if (put_subscription(p, session, sub)) return -1;
    }
    for (uint32_t id = 1; session->incoming_qos2_count && id < 65536; id++)
        if (session_incoming_qos2_has(session, (uint16_t)id) && put_qos2(p, session, (uint16_t)id))
            return -1;
    for (struct delivery *d = session->flow.inflight.head; d; d = d->next)
        if (save_delivery(save, session, d)) return -1;
    for (struct delivery *d = session->flow.queued.head; d; d = d->next)
        if (save_delivery(save, session, d)) return -1;
    return 0;
}

/* Write the whole state as one transaction, replacing what the file held; final: the last
 * save of a clean shutdown. */
static int save_all(struct persist *p, struct broker *broker, bool final)
{
    struct save_context save = {.p = p, .broker = broker, .wall_now = wall_now_ms()};
    persist_store_rollback(p->store); /* a failed turn's rows, if any */
    if (persist_store_begin(p->store) || persist_store_clear(p->store) ||
        persist_store_set_saved_at(p->store, save.wall_now))
        goto failed;
    retain_for_each(broker->shared->retained, save_retained, &save);
    if (save.rc) goto failed;
    forget_stored(p, broker);
    size_t sessions = 0;
    struct session *session, *tmp;
    HASH_ITER(hh, broker->shared->sessions, session, tmp)
    {
        if (save_session(&save, session)) goto failed;
        sessions += session->persisted;
    }
    if (save_log(&save) || put_sections(p, broker, final)) goto failed;
    if (persist_store_commit(p->store)) goto failed;
    if (!p->durable) stored_clear(p); /* only durable mode follows the rows afterwards */
    atomic_store(&p->pending, false);
    atomic_store(&p->failed, false);
    atomic_store_explicit(&p->changes, 0, memory_order_relaxed);
    log_debug("Saved %zu retained messages, %zu sessions and %zu logged messages to %s.",
              save.retained, sessions, (size_t)broker->shared->message_log.len, p->path);
    return 0;
failed:
    log_error("Error saving persistence file %s: %s.", p->path,
              save.out_of_memory ? "out of memory" : persist_store_error(p->store));
    persist_store_rollback(p->store);
    if (!p->durable) stored_clear(p);
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Restore
 */

/* What names an MQTT-ST stamped message (message.h, struct message_origin) as a hash key. */
struct stamp_key {
    uint8_t addr[16];
    uint16_t port;
    uint8_t zero[6]; /* padding, kept zero for the hash */
    uint64_t incarnation;
    uint64_t sequence;
};

/* A message row read back, by its id, until the deliveries that use it are restored; a stamped
 * one also by its stamp, so that the MQTT-ST log entry of the same message (stored again in its
 * own row) shares it instead of loading a second copy. */
struct loaded_message {
    UT_hash_handle hh;
    UT_hash_handle stamp_hh;
    uint64_t id;
    struct stamp_key stamp;
    struct stored_message *stored;
};

struct restore {
    struct persist *p;
    struct broker *broker;
    int64_t wall_now;
    struct session *last_session; /* rows of a session follow it: looked up once */
    struct loaded_message *messages;
    struct loaded_message *by_stamp; /* the stamped ones among messages */
    size_t restored[PERSIST_KIND_COUNT];
    size_t dropped[PERSIST_KIND_COUNT];
    size_t expired;
    const char *why[PERSIST_KIND_COUNT]; /* the last reason a record of each kind was dropped */
    bool rewrite;                        /* what the file holds differs from what was restored */
    size_t log_skipped; /* log entries for a log that is not enabled (no MQTT-ST now) */
    /* The sections' bytes as read (copies), by index in broker->shared->persist_sections. */
    uint8_t *section_data[PERSIST_SECTIONS_MAX];
    size_t section_len[PERSIST_SECTIONS_MAX];
    bool section_found[PERSIST_SECTIONS_MAX];
};

static void drop(struct restore *r, int kind, const char *why)
{
    if (kind <= 0 || kind >= PERSIST_KIND_COUNT) kind = 0;
    r->dropped[kind]++;
    r->why[kind] = why;
    r->rewrite = true;
}

static struct message *build_message(struct restore *r, const struct persist_message *m)
{
    struct broker *broker = r->broker;
    struct message *msg =
        message_create(&broker->shared->messages, m->topic, m->topic_len, m->payload,
                       m->payload_len, m->props, m->props_len, m->qos, m->retain, 0,
                       m->expiry_interval_s, broker->now_ms);
    if (!msg) return NULL;
    if (m->expiry_at_wall_ms)
        msg->expiry_at_ms = to_mono(broker, r->wall_now, m->expiry_at_wall_ms);
    if (m->stamped) {
        msg->origin = m->origin;
        msg->origin.link = 0;
        msg->origin.retained_sync = false;
    }
    msg->origin.local_only = m->local_only;
    if (m->source_client_id) {
        char *id = strndup(m->source_client_id, m->source_client_id_len);
        char *user =
            m->source_username ? strndup(m->source_username, m->source_username_len) : NULL;
        if (id && (user || !m->source_username))
            msg->source = message_source_new(id, user, m->source_listener_port);
        free(id);
        free(user);
        if (!msg->source) {
            message_unref(msg);
            return NULL;
        }
    }
    return msg;
}

static void restore_retained(struct restore *r, const void *value, size_t len)
{
    struct persist_message m;
    const char *why;
    if (persist_decode_message(value, len, &m, &why)) return drop(r, PERSIST_RETAINED, why);
    struct message *msg = build_message(r, &m);
    if (!msg) return drop(r, PERSIST_RETAINED, "out of memory");
    if (message_expired(msg, r->broker->now_ms)) {
        r->expired++;
        r->rewrite = true;
    } else if (retain_set(r->broker->shared->retained, msg) == 0) {
        r->restored[PERSIST_RETAINED]++;
    } else {
        drop(r, PERSIST_RETAINED, "out of memory");
    }
    message_unref(msg);
}

/* The client id at the front of a key (up to its NUL, or the whole key). */
static struct session *key_session(struct restore *r, const void *key, size_t key_len)
{
    const char *k = key;
    const char *nul = memchr(k, '\0', key_len);
    size_t id_len = nul ? (size_t)(nul - k) : key_len;
    if (r->last_session && strlen(r->last_session->client_id) == id_len &&
        !memcmp(r->last_session->client_id, k, id_len))
        return r->last_session;
    char *id = strndup(k, id_len);
    struct session *s = id ? session_find(r->broker, id) : NULL;
    free(id);
    if (s) r->last_session = s;
    return s;
}

static void restore_acl(struct restore *r, struct session *session, const struct persist_session *s)
{
    struct broker *broker = r->broker;
    const struct arbor_listener *config = NULL;
    if (s->listener_index >= 0 && (size_t)s->listener_index < broker->config->listener_count)
        config = &broker->config->listeners[s->listener_index];
    for (struct listener *l = broker->listeners; config && l; l = l->next)
        if (l->config == config) session->acl_listener = l;
    const struct arbor_security_settings *sec =
        config ? config_security_for(broker->config, config) : &broker->config->security;
    if (!sec->acl) return;
    char *user = s->username ? strndup(s->username, s->username_len) : NULL;
    /* Out of memory, or rules that no longer name the client: an empty list denies all. */
    session->acl = acl_client_compile(sec->acl, session->client_id, user);
    free(user);
}

static void restore_session(struct restore *r, const void *key, size_t key_len, const void *value,
                            size_t len)
{
    struct broker *broker = r->broker;
    struct persist_session s;
    const char *why;
    if (persist_decode_session(value, len, &s, &why)) return drop(r, PERSIST_SESSION, why);
    char *id = strndup(key, key_len);
    if (!id || strlen(id) != key_len || session_find(broker, id)) {
        free(id);
        return drop(r, PERSIST_SESSION, "bad client id");
    }
    struct session *session = session_create(broker, id, s.version);
    free(id);
    if (!session) return drop(r, PERSIST_SESSION, "out of memory");
    session->expiry_interval = s.expiry_interval;
    atomic_store_explicit(&session->subscriber.no_echo, s.no_echo, memory_order_relaxed);
    session->flow.last_packet_id = s.last_packet_id;
    /* A client connected when the file was written (durable mode, then a crash) went away
     * with the broker: its session counts as disconnected from now. */
    session->disconnected_at_ms =
        s.was_connected ? broker->now_ms : to_mono(broker, r->wall_now, s.disconnected_at_wall_ms);
    if (s.was_connected) r->rewrite = true;
    if (s.has_will) {
        struct message *will = build_message(r, &s.will);
        if (will) {
            uint32_t delay = s.will_delay_s;
            if (s.expiry_interval < delay) delay = s.expiry_interval;
            session->pending_will = will;
            session->pending_will_at_ms = s.was_connected
                                              ? broker->now_ms + (int64_t)delay * 1000
                                              : to_mono(broker, r->wall_now, s.will_at_wall_ms);
        }
    }
    restore_acl(r, session, &s);
    session->persisted = true;
    r->last_session = session;
    r->restored[PERSIST_SESSION]++;
}

static void restore_subscription(struct restore *r, const void *key, size_t key_len,
                                 const void *value, size_t len)
{
    struct broker *broker = r->broker;
    struct persist_subscription s;
    const char *why;
    if (persist_decode_subscription(value, len, &s, &why))
        return drop(r, PERSIST_SUBSCRIPTION, why);
    struct session *session = key_session(r, key, key_len);
    const char *nul = memchr(key, '\0', key_len);
    if (!session || !nul) return drop(r, PERSIST_SUBSCRIPTION, "no session");
    size_t filter_len = key_len - (size_t)(nul + 1 - (const char *)key);
    char *filter = strndup(nul + 1, filter_len);
    if (!filter || strlen(filter) != filter_len || filter_len == 0) {
        free(filter);
        return drop(r, PERSIST_SUBSCRIPTION, "bad filter");
    }
    bool replaced = false;
    if (subs_add(broker->shared->subscriptions, filter, &session->subscriber, s.options,
                 s.identifier, &replaced) ||
        session_remember_subscription(session, filter, s.options, s.identifier)) {
        if (!replaced) subs_remove(broker->shared->subscriptions, filter, &session->subscriber);
        free(filter);
        return drop(r, PERSIST_SUBSCRIPTION, "out of memory");
    }
    if (!replaced) {
        broker->stats.subscriptions++;
        if (is_shared_filter(filter)) broker->stats.shared_subscriptions++;
    }
    free(filter);
    r->restored[PERSIST_SUBSCRIPTION]++;
}

static void restore_qos2(struct restore *r, const void *key, size_t key_len)
{
    struct session *session = key_session(r, key, key_len);
    const uint8_t *k = key;
    const uint8_t *nul = memchr(k, '\0', key_len);
    if (!session || !nul || (size_t)(k + key_len - (nul + 1)) != 2)
        return drop(r, PERSIST_QOS2_IN, "no session");
    uint16_t id = (uint16_t)(nul[1] << 8 | nul[2]);
    if (id == 0 || session_incoming_qos2_add(session, id))
        return drop(r, PERSIST_QOS2_IN, "bad packet id");
    r->restored[PERSIST_QOS2_IN]++;
}

static void stamp_key_of(const struct message_origin *origin, struct stamp_key *key)
{
    memset(key, 0, sizeof *key);
    memcpy(key->addr, origin->broker.addr, sizeof key->addr);
    key->port = origin->broker.port;
    key->incarnation = origin->incarnation;
    key->sequence = origin->sequence;
}

/* The message of a message row restored before with the same stamp and contents as m, with a
 * reference for the caller; NULL: none. */
static struct message *loaded_twin(struct restore *r, const struct persist_message *m)
{
    if (!m->stamped) return NULL;
    struct stamp_key key;
    struct loaded_message *loaded = NULL;
    stamp_key_of(&m->origin, &key);
    HASH_FIND(stamp_hh, r->by_stamp, &key, sizeof key, loaded);
    if (!loaded) return NULL;
    struct message *msg = loaded->stored->msg;
    if (msg->topic_len != m->topic_len || msg->payload_len != m->payload_len ||
        msg->props_len != m->props_len || msg->qos != m->qos || msg->retain != m->retain ||
        memcmp(msg->topic, m->topic, m->topic_len) != 0 ||
        (m->payload_len && memcmp(msg->payload, m->payload, m->payload_len) != 0) ||
        (m->props_len && memcmp(msg->props, m->props, m->props_len) != 0))
        return NULL;
    return message_ref(msg);
}

static void restore_message(struct restore *r, const void *key, size_t key_len, const void *value,
                            size_t len)
{
    struct persist_message m;
    const char *why;
    uint64_t id = persist_key_id_value(key, key_len);
    if (!id) return drop(r, PERSIST_MESSAGE, "bad id");
    struct loaded_message *seen = NULL;
    HASH_FIND(hh, r->messages, &id, sizeof id, seen);
    if (seen) return drop(r, PERSIST_MESSAGE, "duplicate id");
    if (persist_decode_message(value, len, &m, &why)) return drop(r, PERSIST_MESSAGE, why);
    struct loaded_message *loaded = calloc(1, sizeof *loaded);
    struct message *msg = loaded ? build_message(r, &m) : NULL;
    if (msg) loaded->stored = stored_add(r->p, msg, id);
    message_unref(msg); /* the entry holds it */
    if (!msg || !loaded->stored) {
        free(loaded);
        return drop(r, PERSIST_MESSAGE, "out of memory");
    }
    loaded->id = id;
    HASH_ADD(hh, r->messages, id, sizeof loaded->id, loaded);
    if (id >= r->p->next_id) r->p->next_id = id + 1;
    if (msg->origin.stamped) {
        struct loaded_message *same = NULL;
        stamp_key_of(&msg->origin, &loaded->stamp);
        HASH_FIND(stamp_hh, r->by_stamp, &loaded->stamp, sizeof loaded->stamp, same);
        if (!same) HASH_ADD(stamp_hh, r->by_stamp, stamp, sizeof loaded->stamp, loaded);
    }
}

static void restore_delivery(struct restore *r, const void *key, size_t key_len, const void *value,
                             size_t len)
{
    struct broker *broker = r->broker;
    struct persist_delivery pd;
    const char *why;
    uint64_t id = persist_key_id_value(key, key_len);
    if (!id) return drop(r, PERSIST_DELIVERY, "bad id");
    if (persist_decode_delivery(value, len, &pd, &why)) return drop(r, PERSIST_DELIVERY, why);
    struct session *session = key_session(r, pd.client_id, pd.client_id_len);
    if (!session) return drop(r, PERSIST_DELIVERY, "no session");
    struct loaded_message *loaded = NULL;
    if (pd.message_id) HASH_FIND(hh, r->messages, &pd.message_id, sizeof pd.message_id, loaded);
    bool needs_message = pd.state != DELIVERY_AWAIT_PUBCOMP;
    if (needs_message && !loaded) return drop(r, PERSIST_DELIVERY, "its message is missing");
    struct delivery *d = delivery_alloc(broker);
    if (!d) return drop(r, PERSIST_DELIVERY, "out of memory");
    d->msg = needs_message ? message_ref(loaded->stored->msg) : NULL;
    if (d->msg) loaded->stored->refs++;
    d->state = (enum delivery_state)pd.state;
    d->packet_id = d->state == DELIVERY_QUEUED ? 0 : pd.packet_id;
    d->qos = pd.qos;
    d->retain = pd.retain;
    d->sub_id_count = pd.sub_id_count;
    memcpy(d->sub_ids, pd.sub_ids, sizeof d->sub_ids);
    d->persist_id = id;
    if (id >= r->p->next_id) r->p->next_id = id + 1;
    outflow_restore(&session->flow, d); /* rows come in id order: send order */
    r->restored[PERSIST_DELIVERY]++;
}

static void restore_log_entry(struct restore *r, const void *key, size_t key_len,
                              const void *value, size_t len)
{
    struct message_log *log = &r->broker->shared->message_log;
    struct persist_log_entry e;
    const char *why;
    if (key_len != 8) return drop(r, PERSIST_LOG, "bad serial");
    uint64_t serial = persist_key_id_value(key, key_len); /* the first is 0 */
    if (persist_decode_log_entry(value, len, &e, &why)) return drop(r, PERSIST_LOG, why);
    if (!log->enabled) { /* MQTT-ST is not configured now: nothing would use it */
        r->log_skipped++;
        r->rewrite = true;
        return;
    }
    /* Rows are read by kind: message rows (the deliveries') come before log entries. */
    struct message *msg = loaded_twin(r, &e.msg);
    if (!msg) msg = build_message(r, &e.msg);
    if (!msg) return drop(r, PERSIST_LOG, "out of memory");
    if (log->len && serial != message_log_end(log)) r->rewrite = true; /* numbered again */
    uint64_t evicted = log->evicted;
    int rc = message_log_restore(log, msg, to_mono(r->broker, r->wall_now, e.at_wall_ms), serial);
    message_unref(msg); /* the log holds it */
    if (rc) return drop(r, PERSIST_LOG, "out of memory");
    if (log->evicted != evicted) r->rewrite = true; /* the limits are lower now */
    r->restored[PERSIST_LOG]++;
}

static void restore_section(struct restore *r, const void *key, size_t key_len, const void *value,
                            size_t len)
{
    const uint8_t *data;
    size_t data_len;
    const char *why;
    if (persist_decode_section(value, len, &data, &data_len, &why))
        return drop(r, PERSIST_SECTION, why);
    const struct broker_shared *shared = r->broker->shared;
    for (size_t i = 0; i < shared->persist_section_count; i++) {
        const char *name = shared->persist_sections[i]->name;
        if (strlen(name) != key_len || memcmp(name, key, key_len)) continue;
        free(r->section_data[i]);
        r->section_data[i] = malloc(data_len ? data_len : 1);
        if (!r->section_data[i]) return drop(r, PERSIST_SECTION, "out of memory");
        memcpy(r->section_data[i], data, data_len);
        r->section_len[i] = data_len;
        r->section_found[i] = true;
        return;
    }
    r->rewrite = true; /* a section nobody registered (MQTT-ST is not configured now) */
}

/* Hand each section what was read for it (or nothing), once everything else is back. */
static void restore_sections(struct restore *r)
{
    const struct broker_shared *shared = r->broker->shared;
    for (size_t i = 0; i < shared->persist_section_count; i++) {
        const struct persist_section *section = shared->persist_sections[i];
        section->restore(section->ctx, r->section_found[i] ? r->section_data[i] : NULL,
                         r->section_len[i]);
        free(r->section_data[i]);
        r->section_data[i] = NULL;
    }
}

static int restore_row(void *ctx, int kind, const void *key, size_t key_len, const void *value,
                       size_t value_len)
{
    struct restore *r = ctx;
    const char *why;
    if (persist_check(kind, key, key_len, value, value_len, &why)) {
        drop(r, kind, why);
        return 0;
    }
    switch (kind) {
    case PERSIST_RETAINED:
        restore_retained(r, value, value_len);
        break;
    case PERSIST_SESSION:
        restore_session(r, key, key_len, value, value_len);
        break;
    case PERSIST_SUBSCRIPTION:
        restore_subscription(r, key, key_len, value, value_len);
        break;
    case PERSIST_QOS2_IN:
        restore_qos2(r, key, key_len);
        break;
    case PERSIST_MESSAGE:
        restore_message(r, key, key_len, value, value_len);
        break;
    case PERSIST_DELIVERY:
        restore_delivery(r, key, key_len, value, value_len);
        break;
    case PERSIST_LOG:
        restore_log_entry(r, key, key_len, value, value_len);
        break;
    case PERSIST_SECTION:
        restore_section(r, key, key_len, value, value_len);
        break;
    default:
        drop(r, 0, "unknown kind");
    }
    return 0;
}

/* Messages no delivery took are dropped (the file is written again without them); durable
 * mode goes on following the rest. */
static size_t release_loaded_messages(struct restore *r)
{
    size_t queued = 0;
    struct loaded_message *loaded, *tmp;
    HASH_CLEAR(stamp_hh, r->by_stamp);
    HASH_ITER(hh, r->messages, loaded, tmp)
    {
        struct stored_message *stored = loaded->stored;
        if (stored->refs == 0) r->rewrite = true;
        queued += stored->refs > 0;
        if (stored->refs == 0 || !r->p->durable) stored_remove(r->p, stored);
        HASH_DEL(r->messages, loaded);
        free(loaded);
    }
    return queued;
}

static void log_dropped(const struct restore *r)
{
    for (int kind = 0; kind < PERSIST_KIND_COUNT; kind++)
        if (r->dropped[kind])
            log_warning("Warning: persistence file %s: dropped %zu %s record(s) (%s).", r->p->path,
                        r->dropped[kind], persist_kind_name(kind), r->why[kind]);
}

static int restore_all(struct persist *p, struct broker *broker)
{
    struct restore r = {.p = p, .broker = broker, .wall_now = wall_now_ms()};
    char err[512];
    int64_t saved_at = persist_store_saved_at(p->store);
    int scanned = persist_store_scan(p->store, restore_row, &r, err, sizeof err);
    size_t messages = release_loaded_messages(&r);
    restore_sections(&r);
    log_dropped(&r);
    struct session *session, *tmp;
    HASH_ITER(hh, broker->shared->sessions, session, tmp) session_update_timer(broker, session);
    if (scanned != 0) {
        char note[4096];
        log_error("Error: persistence file %s is damaged (%s): restored what could be read "
                  "before the damage.",
                  p->path, err);
        if (persist_store_replace(p->store, note, sizeof note) != 0) {
            log_error("Error: persistence file %s: %s.", p->path, note);
            return -1;
        }
        log_warning("Warning: persistence file %s: %s; a new one is written.", p->path, note);
        r.rewrite = true;
    }
    if (r.restored[PERSIST_RETAINED] || r.restored[PERSIST_SESSION] || saved_at)
        log_notice("Restored %zu retained messages and %zu sessions (%zu subscriptions, %zu "
                   "queued or in-flight messages) from %s.",
                   r.restored[PERSIST_RETAINED], r.restored[PERSIST_SESSION],
                   r.restored[PERSIST_SUBSCRIPTION], r.restored[PERSIST_DELIVERY], p->path);
    (void)messages;
    if (r.restored[PERSIST_LOG])
        log_notice("Restored %zu messages of the MQTT-ST message log from %s.",
                   r.restored[PERSIST_LOG], p->path);
    if (r.log_skipped)
        log_notice("%zu messages of the MQTT-ST message log in %s are dropped: no peer is "
                   "configured.",
                   r.log_skipped, p->path);
    if (r.expired) log_info("%zu retained messages expired while the broker was down.", r.expired);
    if (r.rewrite && save_all(p, broker, false) != 0) return p->durable ? -1 : 0;
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Start, stop, turns
 */

static char *store_path(const struct arbor_config *cfg)
{
    const char *file = cfg->persistence_file ? cfg->persistence_file : DEFAULT_FILE;
    const char *dir = cfg->persistence_location;
    if (!dir || !*dir) return strdup(file);
    size_t len = strlen(dir);
    bool slash = dir[len - 1] == '/';
    char *path = malloc(len + strlen(file) + 2);
    if (path) sprintf(path, "%s%s%s", dir, slash ? "" : "/", file);
    return path;
}

static void schedule_autosave(struct persist *p, const struct broker *broker)
{
    int64_t interval = broker->config->autosave_interval;
    p->next_autosave_ms = interval > 0 && !broker->config->autosave_on_changes
                              ? broker->now_ms + interval * 1000
                              : TIMER_NONE;
}

static void log_entry_added(void *ctx, uint64_t serial, const struct message_log_entry *e);
static void handed_over(struct broker *broker);
static void log_entry_left(void *ctx, uint64_t serial, const struct message_log_entry *e);

/* What the core reports (persist_hooks.h): each of these checks broker->shared->persist itself. */
static const struct persist_hooks core_hooks = {
    .retained_changed = persist_retained_changed,
    .session_changed = persist_session_changed,
    .session_removed = persist_session_removed,
    .delivery_changed = persist_delivery_changed,
    .delivery_released = persist_delivery_released,
    .delivery_drops_message = persist_delivery_drops_message,
    .section_changed = persist_section_changed,
    .handed_over = handed_over,
};

/* Close the file and let go of everything persistence holds, the messages' entries too. */
static void persist_free(struct broker *broker)
{
    struct persist *p = broker->shared->persist;
    broker->shared->message_log.observer = (struct message_log_observer){0};
    stored_clear(p);
    persist_store_close(p->store);
    abuf_free(&p->key);
    abuf_free(&p->value);
    abuf_free(&p->section);
    pthread_mutex_destroy(&p->lock);
    free(p->path);
    free(p);
    broker->shared->persist = NULL;
}

int persist_start(struct broker *broker)
{
    const struct arbor_config *cfg = broker->config;
    if (!cfg->persistence) return 0;
    struct persist *p = calloc(1, sizeof *p);
    if (!p || !(p->path = store_path(cfg))) {
        free(p);
        log_error("Error: out of memory.");
        return -1;
    }
    p->durable = cfg->persistence_mode == ARBOR_PERSIST_DURABLE;
    p->next_id = 1;
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&p->lock, &recursive);
    pthread_mutexattr_destroy(&recursive);
    char note[4096];
    int64_t started = clock_monotonic_ms();
    enum persist_open_result opened = persist_store_open(p->path, &p->store, note, sizeof note);
    if (opened == PERSIST_OPEN_FAILED) {
        log_error("Error: persistence: %s.", note);
        free(p->path);
        free(p);
        return -1;
    }
    if (opened == PERSIST_OPENED_FRESH)
        log_error("Error: persistence file %s is damaged (%s); starting with what could be read.",
                  p->path, note);
    broker->shared->persist = p;
    broker->now_ms = clock_monotonic_ms(); /* times are restored against now */
    if (restore_all(p, broker) != 0) {
        persist_free(broker);
        return -1;
    }
    /* The sections say at once that a run has started since the file was written (a crash
     * from now on must not be taken for the clean shutdown the file may record). */
    if (broker->shared->persist_section_count &&
        (persist_store_begin(p->store) || put_sections(p, broker, false) ||
         persist_store_commit(p->store))) {
        log_error("Error writing persistence file %s: %s.", p->path,
                  persist_store_error(p->store));
        persist_store_rollback(p->store);
        persist_free(broker);
        return -1;
    }
    if (p->durable) broker->shared->message_log.observer = (struct message_log_observer){
                        .added = log_entry_added, .left = log_entry_left, .ctx = broker};
    log_info("Persistence: %s mode, file %s (start-up took %lld ms).",
             p->durable ? "durable" : "snapshot", p->path,
             (long long)(clock_monotonic_ms() - started));
    schedule_autosave(p, broker);
    broker->shared->persist_hooks = &core_hooks;
    return 0;
}

void persist_stop(struct broker *broker)
{
    struct persist *p = broker->shared->persist;
    if (!p) return;
    broker->shared->persist_hooks = NULL;
    save_all(p, broker, true);
    persist_free(broker);
}

void persist_save_now(struct broker *broker)
{
    struct persist *p = broker->shared->persist;
    if (!p) return;
    if (save_all(p, broker, false) == 0) log_notice("Saved the persistence file %s.", p->path);
    if (!p->durable) schedule_autosave(p, broker);
}

bool persist_holds_output(const struct broker *broker)
{
    const struct persist *p = broker->shared->persist;
    return p && p->durable &&
           (atomic_load(&p->pending) || atomic_load(&p->failed) || atomic_load(&p->handed_over));
}

/* Commit the open transaction; after a failure, write everything again (which reads every
 * loop's sessions: with several loops they are parked). */
static void commit_now(struct persist *p, struct broker *broker)
{
    if (atomic_load(&p->failed)) {
        if (broker->now_ms < p->retry_at_ms) return;
        if (save_all(p, broker, false) != 0) p->retry_at_ms = broker->now_ms + RETRY_MS;
        return;
    }
    if (!atomic_load(&p->pending)) return;
    if (persist_store_commit(p->store) == 0) {
        atomic_store(&p->pending, false);
        return;
    }
    log_error("Error writing persistence file %s: %s; acknowledgements wait until it can be "
              "written.",
              p->path, persist_store_error(p->store));
    persist_store_rollback(p->store);
    atomic_store(&p->failed, true);
    if (save_all(p, broker, false) != 0) p->retry_at_ms = broker->now_ms + RETRY_MS;
}

void persist_commit(struct broker *broker)
{
    struct persist *p = broker->shared->persist;
    if (!p || !p->durable) return;
    /* Several loops: only loop 0 commits, at its turn end with the others parked
     * (persist_commit_parked): a commit here could cut another loop's packet in half. Once
     * they are stopped (shutdown: persist_workers_stopped), it commits as one loop does. */
    if (broker->shared->loop_count > 1 && !atomic_load(&p->workers_stopped)) return;
    commit_now(p, broker);
}

void persist_workers_stopped(struct broker *loop0)
{
    struct persist *p = loop0->shared->persist;
    if (!p || !p->durable) return;
    atomic_store(&p->workers_stopped, true);
    atomic_store(&p->handed_over, false); /* every inbox was drained: their rows are written */
}

bool persist_commit_wanted(const struct broker *broker)
{
    const struct persist *p = broker->shared->persist;
    if (!p || !p->durable) return false;
    /* after a failure, only when the retry is due (parking the loops for nothing else) */
    if (atomic_load(&p->failed)) return broker->now_ms >= p->retry_at_ms;
    return atomic_load(&p->pending) || atomic_load(&p->handed_over);
}

void persist_commit_parked(struct broker *loop0)
{
    struct persist *p = loop0->shared->persist;
    if (!p || !p->durable) return;
    atomic_store(&p->handed_over, false); /* what was handed over is done: its rows follow */
    pthread_mutex_lock(&p->lock);
    commit_now(p, loop0);
    pthread_mutex_unlock(&p->lock);
}

void persist_autosave(struct broker *broker)
{
    struct persist *p = broker->shared->persist;
    if (!p || p->durable) return;
    save_all(p, broker, false);
    schedule_autosave(p, broker);
}

bool persist_autosave_due(const struct broker *broker)
{
    const struct persist *p = broker->shared->persist;
    if (!p || p->durable) return false;
    const struct arbor_config *cfg = broker->config;
    if (cfg->autosave_on_changes)
        return cfg->autosave_interval > 0 &&
               atomic_load_explicit(&p->changes, memory_order_relaxed) >=
                   (uint64_t)cfg->autosave_interval;
    return p->next_autosave_ms != TIMER_NONE && broker->now_ms >= p->next_autosave_ms;
}

int64_t persist_next_deadline(const struct broker *broker)
{
    const struct persist *p = broker->shared->persist;
    if (!p) return TIMER_NONE;
    if (p->durable) return atomic_load(&p->failed) ? p->retry_at_ms : TIMER_NONE;
    return p->next_autosave_ms;
}

bool persist_keeps_will_at_shutdown(const struct broker *broker, const struct connection *conn)
{
    struct client *client = client_of(conn);
    return broker->shared->persist && client->will && client->will_delay > 0 && client->session &&
           session_kept(client->session);
}

/* ---------------------------------------------------------------------------------------------
 * Hooks
 */

/* Several loops: loop 0 commits and saves; a row written elsewhere, or the change that makes
 * an autosave due, wakes it (a turn of its own ends with the commit or the save). */
static void wake_committer(struct broker *broker)
{
    struct broker *loop0 = broker->shared->loops[0];
    if (broker != loop0) mailbox_post(&loop0->mailbox, &loop0->commit_wake);
}

/* Durable mode: the rows go into the turn's transaction. Returns p, or NULL when nothing is to
 * be written (snapshot mode, or everything is written again anyway after a failure). */
static struct persist *writing(struct broker *broker)
{
    struct persist *p = broker->shared->persist;
    if (!p || !p->durable || atomic_load(&p->failed)) return NULL;
    if (!persist_store_in_transaction(p->store) && persist_store_begin(p->store) != 0) {
        atomic_store(&p->failed, true);
        wake_committer(broker);
        return NULL;
    }
    if (!atomic_exchange(&p->pending, true)) wake_committer(broker);
    return p;
}

static void wrote(struct persist *p, int rc)
{
    if (rc) atomic_store(&p->failed, true); /* pending is set: loop 0 knows */
}

/* Durable mode: the hooks run on any loop; one writes at a time. */
static struct persist *enter(struct broker *broker)
{
    struct persist *p = broker->shared->persist;
    if (p && p->durable) pthread_mutex_lock(&p->lock);
    return p;
}

static void leave(struct persist *p)
{
    if (p && p->durable) pthread_mutex_unlock(&p->lock);
}

static void handed_over(struct broker *broker)
{
    struct persist *p = broker->shared->persist;
    if (p && p->durable && !atomic_exchange(&p->handed_over, true)) wake_committer(broker);
}

/* autosave_on_changes: loop 0 decides when to save, at its turn end; the change that reaches
 * the threshold on another loop wakes it (an idle loop 0 would sleep until its next tick). */
static void count_change(struct broker *broker)
{
    struct persist *p = broker->shared->persist;
    if (!p) return;
    uint64_t before = atomic_fetch_add_explicit(&p->changes, 1, memory_order_relaxed);
    const struct arbor_config *cfg = broker->config;
    if (cfg->autosave_on_changes && cfg->autosave_interval > 0 &&
        before + 1 == (uint64_t)cfg->autosave_interval)
        wake_committer(broker);
}

static void retained_changed_rows(struct broker *broker, const struct message *msg)
{
    if (!retained_kept(msg)) return;
    count_change(broker);
    struct persist *p = writing(broker);
    if (!p) return;
    if (msg->payload_len == 0)
        wrote(p, persist_store_delete(p->store, PERSIST_RETAINED, msg->topic, msg->topic_len));
    else
        wrote(p, put_retained(p, broker, wall_now_ms(), msg));
}

static void session_removed_rows(struct broker *broker, struct session *session);

static void session_changed_rows(struct broker *broker, struct session *session)
{
    if (!broker->shared->persist || (!session_kept(session) && !session->persisted)) return;
    struct persist *p = writing(broker);
    if (!p) return;
    if (!session_kept(session)) {
        session_removed_rows(broker, session);
        return;
    }
    session->persisted = true;
    wrote(p, put_session(p, broker, wall_now_ms(), session));
}

static void session_removed_rows(struct broker *broker, struct session *session)
{
    if (!session->persisted) return;
    session->persisted = false;
    struct persist *p = writing(broker);
    if (!p) return;
    const char *id = session->client_id;
    size_t len = strlen(id);
    wrote(p, persist_store_delete(p->store, PERSIST_SESSION, id, len));
    wrote(p, persist_store_delete_prefix(p->store, PERSIST_SUBSCRIPTION, id, len + 1));
    wrote(p, persist_store_delete_prefix(p->store, PERSIST_QOS2_IN, id, len + 1));
}

static void subscription_changed_rows(struct broker *broker, struct session *session,
                                  const char *filter, const struct session_subscription *sub)
{
    if (!session_kept(session)) return;
    count_change(broker);
    if (!session->persisted) return;
    struct persist *p = writing(broker);
    if (!p) return;
    if (sub) {
        wrote(p, put_subscription(p, session, sub));
    } else if (persist_key_pair(&p->key, session->client_id, filter, strlen(filter)) == 0) {
        wrote(p, persist_store_delete(p->store, PERSIST_SUBSCRIPTION, p->key.data, p->key.len));
    } else {
        atomic_store(&p->failed, true);
    }
}

static void qos2_in_changed_rows(struct broker *broker, struct session *session, uint16_t packet_id,
                             bool present)
{
    if (!session->persisted) return;
    struct persist *p = writing(broker);
    if (!p) return;
    if (present)
        wrote(p, put_qos2(p, session, packet_id));
    else if (qos2_key(p, session, packet_id) == 0)
        wrote(p, persist_store_delete(p->store, PERSIST_QOS2_IN, p->key.data, p->key.len));
    else
        atomic_store(&p->failed, true);
}

static void delivery_changed_rows(struct broker *broker, struct session *session,
                              struct delivery *delivery)
{
    if (!session_kept(session) || delivery->qos == 0) return;
    if (delivery->state == DELIVERY_QUEUED && !delivery->persist_id) count_change(broker);
    if (!session->persisted) return;
    struct persist *p = writing(broker);
    if (!p) return;
    struct message *msg = delivery->msg;
    struct stored_message *stored = msg ? stored_find(p, msg) : NULL;
    if (!delivery->persist_id && msg) {
        if (!stored) {
            stored = stored_add(p, msg, p->next_id++);
            if (!stored) {
                atomic_store(&p->failed, true); /* everything is written again, this delivery too */
                return;
            }
            wrote(p, put_message(p, broker, wall_now_ms(), stored));
        }
        stored->refs++;
    }
    wrote(p, put_delivery(p, session, delivery, stored));
}

/* A stored delivery no longer uses its message: the last one takes the message's entry with
 * it, and its row when rows are being written (else the next full save rewrites them all). */
static void release_message(struct persist *p, bool write_rows, struct message *msg)
{
    struct stored_message *stored = msg ? stored_find(p, msg) : NULL;
    if (!stored || --stored->refs) return;
    uint8_t key[8];
    persist_key_id(key, stored->id);
    stored_remove(p, stored);
    if (write_rows) wrote(p, persist_store_delete(p->store, PERSIST_MESSAGE, key, sizeof key));
}

static void delivery_drops_message_rows(struct broker *broker, struct delivery *delivery)
{
    struct persist *p = broker->shared->persist;
    if (!p || !delivery->persist_id) return;
    release_message(p, writing(broker) != NULL, delivery->msg);
}

static void delivery_released_rows(struct broker *broker, struct delivery *delivery)
{
    struct persist *p = broker->shared->persist;
    if (!p || !delivery->persist_id) return;
    bool write_rows = writing(broker) != NULL;
    uint64_t id = delivery->persist_id;
    delivery->persist_id = 0;
    release_message(p, write_rows, delivery->msg);
    if (!write_rows) return;
    uint8_t key[8];
    persist_key_id(key, id);
    wrote(p, persist_store_delete(p->store, PERSIST_DELIVERY, key, sizeof key));
}

/* Durable mode: the message log's observer (message_log.h). */
static void log_entry_added(void *ctx, uint64_t serial, const struct message_log_entry *e)
{
    struct broker *broker = ctx;
    struct persist *held = enter(broker);
    struct persist *p = writing(broker);
    if (p) wrote(p, put_log_entry(p, broker, wall_now_ms(), serial, e));
    leave(held);
}

static void log_entry_left(void *ctx, uint64_t serial, const struct message_log_entry *e)
{
    (void)e;
    struct broker *broker = ctx;
    struct persist *held = enter(broker);
    struct persist *p = writing(broker);
    if (p) {
        uint8_t key[8];
        persist_key_id(key, serial);
        wrote(p, persist_store_delete(p->store, PERSIST_LOG, key, sizeof key));
    }
    leave(held);
}

static void section_changed_rows(struct broker *broker, const struct persist_section *section)
{
    struct persist *p = writing(broker);
    if (p) wrote(p, put_section(p, section, false));
}

/* The hooks: each writes its rows holding the lock (durable mode). */
void persist_retained_changed(struct broker *broker, const struct message *msg)
{
    struct persist *p = enter(broker);
    retained_changed_rows(broker, msg);
    leave(p);
}

void persist_session_changed(struct broker *broker, struct session *session)
{
    struct persist *p = enter(broker);
    session_changed_rows(broker, session);
    leave(p);
}

void persist_session_removed(struct broker *broker, struct session *session)
{
    struct persist *p = enter(broker);
    session_removed_rows(broker, session);
    leave(p);
}

void persist_subscription_changed(struct broker *broker, struct session *session,
                                  const char *filter, const struct session_subscription *sub)
{
    struct persist *p = enter(broker);
    subscription_changed_rows(broker, session, filter, sub);
    leave(p);
}

void persist_qos2_in_changed(struct broker *broker, struct session *session, uint16_t packet_id,
                             bool present)
{
    struct persist *p = enter(broker);
    qos2_in_changed_rows(broker, session, packet_id, present);
    leave(p);
}

void persist_delivery_changed(struct broker *broker, struct session *session,
                              struct delivery *delivery)
{
    struct persist *p = enter(broker);
    delivery_changed_rows(broker, session, delivery);
    leave(p);
}

void persist_delivery_drops_message(struct broker *broker, struct delivery *delivery)
{
    struct persist *p = enter(broker);
    delivery_drops_message_rows(broker, delivery);
    leave(p);
}

void persist_delivery_released(struct broker *broker, struct delivery *delivery)
{
    struct persist *p = enter(broker);
    delivery_released_rows(broker, delivery);
    leave(p);
}

void persist_section_changed(struct broker *broker, const struct persist_section *section)
{
    struct persist *p = enter(broker);
    section_changed_rows(broker, section);
    leave(p);
}
