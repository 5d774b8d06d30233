/*
 * event_loop.c: epoll backend for event_loop.h. Level-triggered: a handler that does not
 * drain its socket is called again on the next turn, which keeps fairness between clients.
 * Egress before ingress: in each turn every handler that may write is called first, then those
 * with input (and errors), so that what the broker already owes its clients leaves before it
 * takes on more.
 */
#include "event_loop.h"

#include <errno.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "qsbr.h"

#define EVENT_BATCH 256

int event_loop_init(struct event_loop *loop)
{
    loop->qsbr = NULL;
    loop->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    return loop->epoll_fd < 0 ? -1 : 0;
}

void event_loop_free(struct event_loop *loop)
{
    if (loop->epoll_fd >= 0) close(loop->epoll_fd);
    loop->epoll_fd = -1;
}

static uint32_t to_epoll(unsigned interest)
{
    uint32_t ev = 0;
    if (interest & EVENT_READ) ev |= EPOLLIN | EPOLLRDHUP;
    if (interest & EVENT_WRITE) ev |= EPOLLOUT;
    return ev;
}

int event_loop_add(struct event_loop *loop, struct event_handler *handler, unsigned interest)
{
    struct epoll_event ev = {.events = to_epoll(interest), .data.ptr = handler};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, handler->fd, &ev) != 0) return -1;
    handler->interest = interest;
    return 0;
}

int event_loop_modify(struct event_loop *loop, struct event_handler *handler, unsigned interest)
{
    if (handler->interest == interest) return 0;
    struct epoll_event ev = {.events = to_epoll(interest), .data.ptr = handler};
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_MOD, handler->fd, &ev) != 0) return -1;
    handler->interest = interest;
    return 0;
}

void event_loop_remove(struct event_loop *loop, struct event_handler *handler)
{
    epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, handler->fd, NULL);
    handler->interest = 0;
}

int event_loop_run_once(struct event_loop *loop, int timeout_ms, int64_t *now_ms)
{
    struct epoll_event events[EVENT_BATCH];
    bool offline = loop->qsbr && timeout_ms != 0;
    if (offline) qsbr_offline(loop->qsbr);
    int n = epoll_wait(loop->epoll_fd, events, EVENT_BATCH, timeout_ms);
    if (offline) qsbr_online(loop->qsbr);
    *now_ms = clock_monotonic_ms();
    if (n < 0) return errno == EINTR ? 0 : -1;
    /* Handlers stay valid for the whole turn (connections are freed at its end). */
    for (int i = 0; i < n; i++) {
        struct event_handler *handler = events[i].data.ptr;
        if (events[i].events & EPOLLOUT) handler->on_event(handler, EVENT_WRITE);
    }
    for (int i = 0; i < n; i++) {
        struct event_handler *handler = events[i].data.ptr;
        unsigned ready = 0;
        if (events[i].events & (EPOLLIN | EPOLLRDHUP)) ready |= EVENT_READ;
        if (events[i].events & (EPOLLERR | EPOLLHUP)) ready |= EVENT_ERROR | EVENT_READ;
        if (ready) handler->on_event(handler, ready);
    }
    return n;
}

int64_t clock_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t clock_wall_seconds(void)
{
    return (int64_t)time(NULL);
}
