/*
 * outq.c: segments, blocks and writev for outq.h. Blocks are reference-counted by the
 * segments that point into them; a drained block is kept for reuse as the tail, so a busy
 * connection stops allocating once warmed up. A queue's first buffers come from, and go back
 * to, its event loop's pool (outq.h).
 */
#include "outq.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "message.h"

/* Small bytes go into blocks that start small (most connections only ever see a CONNACK
 * and a few acknowledgements) and double up to OUTQ_BLOCK_MAX for busy ones. */
#define OUTQ_BLOCK_MIN 256
#define OUTQ_BLOCK_MAX 8192
#define OUTQ_SEGMENTS_MIN 8 /* segments of a first segment array */
#define OUTQ_MAX_IOV 256

struct outq_block {
    size_t used;
    size_t cap;
    size_t refs;
    uint8_t data[];
};

/* ---- the pool of first buffers (outq.h) ---- */

void outq_pool_free(struct outq_pool *pool)
{
    while (pool->segment_array_count > 0)
        free(pool->segment_arrays[--pool->segment_array_count]);
    while (pool->block_count > 0)
        free(pool->blocks[--pool->block_count]);
}

static struct outq_block *block_new(struct outq_pool *pool, size_t cap)
{
    if (pool && cap == OUTQ_BLOCK_MIN && pool->block_count > 0)
        return pool->blocks[--pool->block_count];
    return malloc(sizeof(struct outq_block) + cap);
}

static void block_free(struct outq_pool *pool, struct outq_block *block)
{
    if (pool && block->cap == OUTQ_BLOCK_MIN && pool->block_count < OUTQ_POOL_MAX)
        pool->blocks[pool->block_count++] = block;
    else
        free(block);
}

/* The queue's segment array goes (it holds nothing). */
static void segments_free(struct outq *q, struct outq_pool *pool)
{
    if (pool && q->cap == OUTQ_SEGMENTS_MIN && pool->segment_array_count < OUTQ_POOL_MAX)
        pool->segment_arrays[pool->segment_array_count++] = q->segments;
    else
        free(q->segments);
    q->segments = NULL;
    q->cap = 0;
    q->head = 0;
}

/* ---- the queue ---- */

void outq_init(struct outq *q)
{
    memset(q, 0, sizeof *q);
}

static void release_segment(struct outq *q, struct outq_pool *pool, struct outq_segment *seg)
{
    q->messages -= seg->messages;
    if (seg->msg) message_unref(seg->msg);
    if (seg->block && --seg->block->refs == 0) {
        if (seg->block == q->tail)
            seg->block->used = 0; /* keep it for reuse */
        else
            block_free(pool, seg->block);
    }
}

void outq_free(struct outq *q, struct outq_pool *pool)
{
    for (uint32_t i = 0; i < q->count; i++)
        release_segment(q, pool, &q->segments[q->head + i]);
    if (q->tail && q->tail->refs == 0) block_free(pool, q->tail);
    segments_free(q, pool);
    memset(q, 0, sizeof *q);
}

int outq_reserve_segments(struct outq *q, struct outq_pool *pool, size_t n)
{
    if (q->head + q->count + n <= q->cap) return 0;
    if (q->head > 0) {
        memmove(q->segments, q->segments + q->head, q->count * sizeof *q->segments);
        q->head = 0;
    }
    if (q->count + n <= q->cap) return 0;
    if (!q->segments && n <= OUTQ_SEGMENTS_MIN && pool && pool->segment_array_count > 0) {
        q->segments = pool->segment_arrays[--pool->segment_array_count];
        q->cap = OUTQ_SEGMENTS_MIN;
        return 0;
    }
    size_t cap = q->cap ? q->cap : OUTQ_SEGMENTS_MIN;
    while (cap < q->count + n)
        cap *= 2;
    if (cap > UINT32_MAX) return -1;
    struct outq_segment *segs = realloc(q->segments, cap * sizeof *segs);
    if (!segs) return -1;
    q->segments = segs;
    q->cap = (uint32_t)cap;
    return 0;
}

static struct outq_segment *new_segment(struct outq *q, struct outq_pool *pool)
{
    if (outq_reserve_segments(q, pool, 1)) return NULL;
    struct outq_segment *seg = &q->segments[q->head + q->count];
    q->count++;
    memset(seg, 0, sizeof *seg);
    return seg;
}

static int append_large_copy(struct outq *q, struct outq_pool *pool, const void *data,
                             size_t len)
{
    /* Bigger than a block: a private block sized to fit. */
    struct outq_block *block = malloc(sizeof *block + len);
    if (!block) return -1;
    struct outq_segment *seg = new_segment(q, pool);
    if (!seg) {
        free(block);
        return -1;
    }
    memcpy(block->data, data, len);
    block->used = len;
    block->cap = len;
    block->refs = 1;
    seg->data = block->data;
    seg->len = (uint32_t)len;
    seg->block = block;
    q->bytes += len;
    return 0;
}

/* Make the tail block able to take len more bytes. Returns 0 or -1. */
static int ensure_tail_room(struct outq *q, struct outq_pool *pool, size_t len)
{
    struct outq_block *tail = q->tail;
    if (tail && tail->cap - tail->used >= len) return 0;
    if (tail && tail->refs == 0 && tail->cap >= len) {
        tail->used = 0; /* drained: reuse it */
        return 0;
    }
    size_t cap = tail ? tail->cap * 2 : OUTQ_BLOCK_MIN;
    if (cap > OUTQ_BLOCK_MAX) cap = OUTQ_BLOCK_MAX;
    while (cap < len)
        cap *= 2;
    struct outq_block *block = block_new(pool, cap);
    if (!block) return -1;
    block->used = 0;
    block->cap = cap;
    block->refs = 0;
    /* A tail still referenced is freed when its last segment drains. */
    if (tail && tail->refs == 0) block_free(pool, tail);
    q->tail = block;
    return 0;
}

int outq_append_copy(struct outq *q, struct outq_pool *pool, const void *data, size_t len)
{
    if (len == 0) return 0;
    if (len > OUTQ_BLOCK_MAX / 2) return append_large_copy(q, pool, data, len);
    if (ensure_tail_room(q, pool, len)) return -1;
    struct outq_block *block = q->tail;
    uint8_t *dst = block->data + block->used;
    memcpy(dst, data, len);
    block->used += len;
    q->bytes += len;
    /* Extend the previous segment when the bytes are contiguous with it. */
    if (q->count > 0) {
        struct outq_segment *last = &q->segments[q->head + q->count - 1];
        if (last->block == block && last->data + last->len == dst) {
            last->len += len;
            return 0;
        }
    }
    struct outq_segment *seg = new_segment(q, pool);
    if (!seg) {
        block->used -= len;
        q->bytes -= len;
        return -1;
    }
    seg->data = dst;
    seg->len = (uint32_t)len;
    seg->block = block;
    block->refs++;
    return 0;
}

int outq_append_message(struct outq *q, struct outq_pool *pool, struct message *msg,
                        const void *data, size_t len)
{
    if (len <= OUTQ_COPY_PAYLOAD_MAX) {
        if (outq_append_copy(q, pool, data, len)) return -1;
        if (q->count == 0) return 0; /* nothing queued at all (no header, no payload) */
    } else {
        struct outq_segment *seg = new_segment(q, pool);
        if (!seg) return -1;
        seg->data = data;
        seg->len = (uint32_t)len;
        seg->msg = message_ref(msg);
        q->bytes += len;
    }
    q->segments[q->head + q->count - 1].messages++;
    q->messages++;
    return 0;
}

void outq_trim(struct outq *q, struct outq_pool *pool)
{
    if (q->count > 0) return;
    if (q->tail && q->tail->refs == 0) {
        block_free(pool, q->tail);
        q->tail = NULL;
    }
    segments_free(q, pool);
}

/* Drop n written bytes from the front. */
static void advance(struct outq *q, struct outq_pool *pool, size_t n)
{
    q->bytes -= n;
    while (n > 0 && q->count > 0) {
        struct outq_segment *seg = &q->segments[q->head];
        if (n < seg->len) {
            seg->data += n;
            seg->len -= n;
            return;
        }
        n -= seg->len;
        release_segment(q, pool, seg);
        q->head++;
        q->count--;
    }
    if (q->count == 0) q->head = 0;
}

ssize_t outq_flush(struct outq *q, struct outq_pool *pool, outq_writer writer, void *ctx)
{
    ssize_t total = 0;
    while (q->count > 0) {
        struct iovec iov[OUTQ_MAX_IOV];
        uint32_t n = q->count < OUTQ_MAX_IOV ? q->count : OUTQ_MAX_IOV;
        for (uint32_t i = 0; i < n; i++) {
            iov[i].iov_base = (void *)q->segments[q->head + i].data;
            iov[i].iov_len = q->segments[q->head + i].len;
        }
        ssize_t written = writer(ctx, iov, (int)n);
        if (written < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return total;
            return -1;
        }
        advance(q, pool, (size_t)written);
        total += written;
    }
    /* Drained: a connection that only ever sends a few small packets (most are idle after
     * their CONNACK) gives its buffers back now (to the pool) rather than at the next tick, so
     * that a storm of new connections reuses them instead of holding one set each. Busy
     * connections, whose buffers have grown, keep theirs for the next burst (outq_trim at the
     * tick). */
    if (q->cap <= OUTQ_SEGMENTS_MIN && (!q->tail || q->tail->cap <= OUTQ_BLOCK_MIN))
        outq_trim(q, pool);
    return total;
}
