/*
 * outq.h: a connection's output queue. Small bytes (packet headers, small payloads) are
 * copied into blocks the queue owns; larger payloads of stored messages are referenced, not
 * copied, so one message sent to many clients exists once in memory. Flushed in large batches
 * (up to 256 buffers at a time) through a writer: writev on a plain socket, the connection's
 * transport in general. Knows nothing of MQTT or sockets.
 */
#ifndef ARBOR_OUTQ_H
#define ARBOR_OUTQ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct message;
struct outq_block;

/* Payloads up to this size are copied rather than referenced: a copy of a few hundred bytes
 * costs less than taking and dropping a reference (atomic: messages may cross event loops),
 * and lands next to its header, so the packet is one buffer of the writev. */
#define OUTQ_COPY_PAYLOAD_MAX 256

struct outq_segment {
    const uint8_t *data;
    uint32_t len;
    uint32_t messages;        /* messages (outq_append_message) that end in this segment */
    struct message *msg;      /* reference held while queued, or NULL */
    struct outq_block *block; /* block holding data, or NULL */
};

struct outq {
    struct outq_segment *segments;
    size_t head;  /* first unsent segment */
    size_t count; /* segments in use from head */
    size_t cap;
    struct outq_block *tail; /* block small bytes are appended to */
    size_t bytes;            /* total bytes queued */
    size_t messages;         /* messages queued by outq_append_message, not yet all written */
};

void outq_init(struct outq *q);
void outq_free(struct outq *q);
/* Make room for n more segments, so that the next n appends cannot fail for lack of them
 * (lets a caller queue a header and its payload all-or-nothing). Returns 0 or -1. */
int outq_reserve_segments(struct outq *q, size_t n);
/* Copy len bytes into the queue. Returns 0 or -1 on OOM. */
int outq_append_copy(struct outq *q, const void *data, size_t len);
/* Queue len bytes inside msg, the end of one message's packet (its payload; the header was
 * appended before), counted in q->messages until written: copied when small
 * (OUTQ_COPY_PAYLOAD_MAX), otherwise referenced (taking a reference to msg). Returns 0 or -1;
 * with outq_reserve_segments(q, 2) before the header, it cannot fail. */
int outq_append_message(struct outq *q, struct message *msg, const void *data, size_t len);
/* Release memory kept for reuse when nothing is queued (for idle connections). */
void outq_trim(struct outq *q);
/* Takes bytes from count buffers of iov, in order, like writev: returns the bytes taken, or
 * -1 with errno (EAGAIN: none now; EINTR: try again). Bytes not taken are offered again. */
typedef ssize_t (*outq_writer)(void *ctx, const struct iovec *iov, int count);

/* Write as much as the writer takes. Returns bytes written (>= 0), or -1 on an error (errno
 * set; EAGAIN is not an error and returns what was written). */
ssize_t outq_flush(struct outq *q, outq_writer writer, void *ctx);

#endif
