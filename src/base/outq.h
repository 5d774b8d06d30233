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
    struct outq_block *tail; /* block small bytes are appended to */
    size_t bytes;            /* total bytes queued */
    uint32_t messages;       /* messages queued by outq_append_message, not yet all written */
    uint32_t head;           /* first unsent segment */
    uint32_t count;          /* segments in use from head */
    uint32_t cap;
};

/* The smallest buffers a queue has: its first segment array and its first block. A queue
 * that drains gives them up (outq_flush), so that an idle connection holds no output memory;
 * they go to the event loop's pool, and the next queue that needs one takes it from there
 * rather than from malloc. A storm of connections that each get a CONNACK and go idle then
 * passes a few buffers around, instead of leaving freed holes in the heap between their
 * long-lived records (about 45 bytes per idle connection, measured with 5000). The pool
 * holds at most what one loop turn drains, OUTQ_POOL_MAX of each. Every function below
 * takes pool NULL as "no pool": plain malloc and free. */
#define OUTQ_POOL_MAX 256
struct outq_pool {
    struct outq_segment *segment_arrays[OUTQ_POOL_MAX];
    struct outq_block *blocks[OUTQ_POOL_MAX];
    uint32_t segment_array_count;
    uint32_t block_count;
};

void outq_pool_free(struct outq_pool *pool);

void outq_init(struct outq *q);
void outq_free(struct outq *q, struct outq_pool *pool);
/* Make room for n more segments, so that the next n appends cannot fail for lack of them
 * (lets a caller queue a header and its payload all-or-nothing). Returns 0 or -1. */
int outq_reserve_segments(struct outq *q, struct outq_pool *pool, size_t n);
/* Copy len bytes into the queue. Returns 0 or -1 on OOM. */
int outq_append_copy(struct outq *q, struct outq_pool *pool, const void *data, size_t len);
/* Queue len bytes inside msg, the end of one message's packet (its payload; the header was
 * appended before), counted in q->messages until written: copied when small
 * (OUTQ_COPY_PAYLOAD_MAX), otherwise referenced (taking a reference to msg). Returns 0 or -1;
 * with outq_reserve_segments(q, pool, 2) before the header, it cannot fail. */
int outq_append_message(struct outq *q, struct outq_pool *pool, struct message *msg,
                        const void *data, size_t len);
/* Release memory kept for reuse when nothing is queued (for idle connections). */
void outq_trim(struct outq *q, struct outq_pool *pool);
/* Takes bytes from count buffers of iov, in order, like writev: returns the bytes taken, or
 * -1 with errno (EAGAIN: none now; EINTR: try again). Bytes not taken are offered again. */
typedef ssize_t (*outq_writer)(void *ctx, const struct iovec *iov, int count);

/* Write as much as the writer takes. Returns bytes written (>= 0), or -1 on an error (errno
 * set; EAGAIN is not an error and returns what was written). */
ssize_t outq_flush(struct outq *q, struct outq_pool *pool, outq_writer writer, void *ctx);

#endif
