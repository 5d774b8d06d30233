/*
 * transport_tcp.c: the plain TCP transport (transport.h): the stream is the socket itself.
 * Nothing is buffered here and nothing ever waits for the other direction, so only recv and
 * send are set.
 */
#include "transport.h"

#include <unistd.h>

#include "broker.h"

static ssize_t tcp_recv(struct connection *conn, void *buf, size_t len)
{
    return read(conn->handler.fd, buf, len);
}

static ssize_t tcp_send(struct connection *conn, const struct iovec *iov, int count)
{
    return writev(conn->handler.fd, iov, count);
}

const struct transport transport_tcp = {
    .name = "tcp",
    .recv = tcp_recv,
    .send = tcp_send,
};
