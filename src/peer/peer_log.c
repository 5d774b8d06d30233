/*
 * peer_log.c: the bounded message log (peer_log.h).
 */
#include "peer_log.h"

#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "message.h"

uint64_t peer_log_size(const struct message *msg)
{
    return (uint64_t)msg->topic_len + msg->payload_len;
}

static void drop_oldest(struct peer_log *log)
{
    struct peer_log_entry *e = &log->ring[log->head];
    log->bytes -= peer_log_size(e->msg);
    message_unref(e->msg);
    e->msg = NULL;
    log->head = (log->head + 1) % log->cap;
    log->len--;
    log->head_serial++;
}

int peer_log_add(struct peer_log *log, struct message *msg, int64_t now_ms)
{
    if (log->len == log->cap) {
        size_t cap = log->cap ? log->cap * 2 : 1024;
        if (log->max_messages && cap > log->max_messages) cap = (size_t)log->max_messages;
        if (cap <= log->cap) { /* at max_messages: the oldest makes room */
            drop_oldest(log);
            log->evicted++;
        } else if (ring_grow((void **)&log->ring, sizeof *log->ring, &log->cap, &log->head,
                             log->len, cap) != 0) {
            return -1;
        }
    }
    size_t slot = (log->head + log->len) % log->cap;
    log->ring[slot] = (struct peer_log_entry){message_ref(msg), now_ms};
    log->len++;
    log->bytes += peer_log_size(msg);
    while (log->len > 1 && log->max_bytes && log->bytes > log->max_bytes) {
        drop_oldest(log);
        log->evicted++;
    }
    return 0;
}

void peer_log_expire(struct peer_log *log, int64_t now_ms)
{
    if (!log->max_age_ms) return;
    while (log->len && now_ms - log->ring[log->head].at_ms > log->max_age_ms) {
        drop_oldest(log);
        log->evicted++;
    }
}

const struct peer_log_entry *peer_log_at(const struct peer_log *log, uint64_t serial)
{
    if (serial < log->head_serial || serial >= peer_log_end(log)) return NULL;
    return &log->ring[(log->head + (size_t)(serial - log->head_serial)) % log->cap];
}

void peer_log_free(struct peer_log *log)
{
    while (log->len) drop_oldest(log);
    free(log->ring);
    log->ring = NULL;
    log->cap = log->head = 0;
}
