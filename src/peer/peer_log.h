/*
 * peer_log.h: the message log of MQTT-ST (docs/mqtt-st-protocol.md 7.3): the QoS 1/2 messages
 * this broker accepted, oldest first, by reference, bounded by count, bytes and age. A resync
 * walks it to send a neighbour what it lacks. Entries are numbered by a serial that keeps
 * counting as old entries leave, so a walk can hold its place (and notice when the entries
 * ahead of it have left). Pure bookkeeping: no sockets, no clock of its own.
 */
#ifndef ARBOR_PEER_LOG_H
#define ARBOR_PEER_LOG_H

#include <stddef.h>
#include <stdint.h>

struct message;

struct peer_log_entry {
    struct message *msg;
    int64_t at_ms; /* when it was logged */
};

struct peer_log {
    struct peer_log_entry *ring;
    size_t head, len, cap;
    uint64_t head_serial; /* serial of the oldest entry */
    uint64_t bytes;       /* topic and payload bytes held */
    uint64_t max_messages, max_bytes;
    int64_t max_age_ms;   /* 0: no age limit */
    uint64_t evicted;     /* entries that left because of a limit */
};

/* The size a message counts for in max_bytes. */
uint64_t peer_log_size(const struct message *msg);
/* Log msg (a reference is taken), then let the oldest leave while a limit is exceeded.
 * 0, or -1 when out of memory (not logged). */
int peer_log_add(struct peer_log *log, struct message *msg, int64_t now_ms);
/* Let entries older than max_age leave. */
void peer_log_expire(struct peer_log *log, int64_t now_ms);
/* The entry with this serial, or NULL when it has left or is not there yet. */
const struct peer_log_entry *peer_log_at(const struct peer_log *log, uint64_t serial);
/* The serial the next entry will get. */
static inline uint64_t peer_log_end(const struct peer_log *log)
{
    return log->head_serial + log->len;
}
void peer_log_free(struct peer_log *log);

#endif
