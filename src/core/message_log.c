/*
 * message_log.c: the bounded message log (message_log.h).
 */
#include "message_log.h"

#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "message.h"

uint64_t message_log_size(const struct message *msg)
{
    return (uint64_t)msg->topic_len + msg->payload_len;
}

static void drop_oldest(struct message_log *log, bool tell)
{
    struct message_log_entry *e = &log->ring[log->head];
    if (tell && log->observer.left) log->observer.left(log->observer.ctx, log->head_serial, e);
    log->bytes -= message_log_size(e->msg);
    message_unref(e->msg);
    e->msg = NULL;
    log->head = (log->head + 1) % log->cap;
    log->len--;
    log->head_serial++;
}

static int append(struct message_log *log, struct message *msg, int64_t now_ms, bool tell)
{
    if (log->len == log->cap) {
        size_t cap = log->cap ? log->cap * 2 : 1024;
        if (log->max_messages && cap > log->max_messages) cap = (size_t)log->max_messages;
        if (cap <= log->cap) { /* at max_messages: the oldest makes room */
            drop_oldest(log, tell);
            log->evicted++;
        } else if (ring_grow((void **)&log->ring, sizeof *log->ring, &log->cap, &log->head,
                             log->len, cap) != 0) {
            return -1;
        }
    }
    size_t slot = (log->head + log->len) % log->cap;
    log->ring[slot] = (struct message_log_entry){message_ref(msg), now_ms};
    log->len++;
    log->bytes += message_log_size(msg);
    if (tell && log->observer.added)
        log->observer.added(log->observer.ctx, log->head_serial + log->len - 1, &log->ring[slot]);
    while (log->len > 1 && log->max_bytes && log->bytes > log->max_bytes) {
        drop_oldest(log, tell);
        log->evicted++;
    }
    return 0;
}

int message_log_add(struct message_log *log, struct message *msg, int64_t now_ms)
{
    return append(log, msg, now_ms, true);
}

int message_log_restore(struct message_log *log, struct message *msg, int64_t at_ms,
                        uint64_t serial)
{
    if (log->len == 0 && serial > log->head_serial) log->head_serial = serial;
    return append(log, msg, at_ms, false);
}

void message_log_expire(struct message_log *log, int64_t now_ms)
{
    if (!log->max_age_ms) return;
    while (log->len && now_ms - log->ring[log->head].at_ms > log->max_age_ms) {
        drop_oldest(log, true);
        log->evicted++;
    }
}

const struct message_log_entry *message_log_at(const struct message_log *log, uint64_t serial)
{
    if (serial < log->head_serial || serial >= message_log_end(log)) return NULL;
    return &log->ring[(log->head + (size_t)(serial - log->head_serial)) % log->cap];
}

void message_log_free(struct message_log *log)
{
    while (log->len) drop_oldest(log, false);
    free(log->ring);
    log->ring = NULL;
    log->cap = log->head = 0;
}
