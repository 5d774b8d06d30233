/*
 * event_loop.h: a small epoll event loop. Each registered file descriptor has a handler
 * object whose callback is called with the ready events. The loop knows nothing of MQTT;
 * timers are left to the caller (see timers.h), which passes the longest time it may block.
 * One loop per thread; nothing here is global, so a later change can run one loop per core.
 */
#ifndef ARBOR_EVENT_LOOP_H
#define ARBOR_EVENT_LOOP_H

#include <stdbool.h>
#include <stdint.h>

enum {
    EVENT_READ = 1,
    EVENT_WRITE = 2,
    EVENT_ERROR = 4,
};

struct event_handler {
    int fd;
    unsigned interest; /* EVENT_READ | EVENT_WRITE currently registered */
    void (*on_event)(struct event_handler *handler, unsigned events);
};

struct qsbr_thread;

struct event_loop {
    int epoll_fd;
    /* Set: this loop's thread frees through it (qsbr.h) and is offline while it blocks in
     * epoll_wait, so that a sleeping loop holds no other loop's frees back. */
    struct qsbr_thread *qsbr;
};

int event_loop_init(struct event_loop *loop);
void event_loop_free(struct event_loop *loop);
/* Register, change interest, and remove. Return 0 or -1 (errno set). */
int event_loop_add(struct event_loop *loop, struct event_handler *handler, unsigned interest);
int event_loop_modify(struct event_loop *loop, struct event_handler *handler, unsigned interest);
void event_loop_remove(struct event_loop *loop, struct event_handler *handler);
/* Wait up to timeout_ms (-1 forever; offline for loop->qsbr meanwhile), store the monotonic
 * time of the wake-up in *now_ms, then dispatch ready handlers: handlers see the time their events arrived, not the time
 * the wait began. Returns the number of events dispatched, or -1 on error other than EINTR. */
int event_loop_run_once(struct event_loop *loop, int timeout_ms, int64_t *now_ms);

/* Monotonic clock in milliseconds and in microseconds (for RTTs), and wall clock seconds. */
int64_t clock_monotonic_ms(void);
int64_t clock_monotonic_us(void);
int64_t clock_wall_seconds(void);

#endif
