/*
 * message_log.h: the message log (docs/mqtt-st-protocol.md 7.3): the QoS 1/2 messages this
 * broker accepted, oldest first, by reference, bounded by count, bytes and age. MQTT-ST fills
 * it and walks it to send a neighbour what it lacks after a partition (peer_resync.c);
 * persistence keeps it across restarts (persist.c), following each entry that comes and goes
 * through the observer. It lives in the core, beside the retained store, so that those two
 * need not know each other. Entries are numbered by a serial that keeps counting as old
 * entries leave, so a walk can hold its place (and notice when the entries ahead of it have
 * left). Pure bookkeeping: no sockets, no clock of its own.
 */
#ifndef ARBOR_MESSAGE_LOG_H
#define ARBOR_MESSAGE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct message;

struct message_log_entry {
    struct message *msg;
    int64_t at_ms; /* when it was logged */
};

/* Told of each entry that comes (after it is in) and goes (before its reference is let go;
 * not when the whole log is freed). */
struct message_log_observer {
    void (*added)(void *ctx, uint64_t serial, const struct message_log_entry *entry);
    void (*left)(void *ctx, uint64_t serial, const struct message_log_entry *entry);
    void *ctx;
};

struct message_log {
    bool enabled; /* MQTT-ST runs (peer.c): only then is anything logged or restored */
    struct message_log_entry *ring;
    size_t head, len, cap;
    uint64_t head_serial; /* serial of the oldest entry */
    uint64_t bytes;       /* topic and payload bytes held */
    uint64_t max_messages, max_bytes;
    int64_t max_age_ms;   /* 0: no age limit */
    uint64_t evicted;     /* entries that left because of a limit */
    struct message_log_observer observer; /* no functions: nobody watches */
};

/* The size a message counts for in max_bytes. */
uint64_t message_log_size(const struct message *msg);
/* Log msg (a reference is taken), then let the oldest leave while a limit is exceeded.
 * 0, or -1 when out of memory (not logged). */
int message_log_add(struct message_log *log, struct message *msg, int64_t now_ms);
/* Put back an entry saved before a restart, with the serial it had (entries come back in
 * order; a serial below the log's end is taken as the end). Limits apply; the observer is not
 * told. 0, or -1 when out of memory. */
int message_log_restore(struct message_log *log, struct message *msg, int64_t at_ms,
                        uint64_t serial);
/* Let entries older than max_age leave. */
void message_log_expire(struct message_log *log, int64_t now_ms);
/* The entry with this serial, or NULL when it has left or is not there yet. */
const struct message_log_entry *message_log_at(const struct message_log *log, uint64_t serial);
/* The serial the next entry will get. */
static inline uint64_t message_log_end(const struct message_log *log)
{
    return log->head_serial + log->len;
}
void message_log_free(struct message_log *log);

#endif
