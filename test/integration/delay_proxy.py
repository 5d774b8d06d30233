"""delay_proxy.py: a TCP proxy on 127.0.0.1 that delays each direction and can cut the path
(reset every connection, or black-hole it, or reset those of one dialer's source address) and
heal it again.

Used by the MQTT-ST tests through peer_net.py (which puts one on each connection of every
link) and by test_bridge*.py, and by test/bench/partition_bench.py (`make bench-partition`),
which runs under the system python3: so it needs nothing but the standard library.
"""

import collections
import errno
import selectors
import socket
import struct
import threading
import time

HOST = "127.0.0.1"

_EOF = "eof"      # queue markers: the side that sent it closed (FIN) / was reset
_RESET = "reset"
_QUEUE_LIMIT = 4 << 20   # bytes held per direction before the proxy stops reading
# How long a method waits for the proxy thread to apply it. The thread shares the
# interpreter with whatever the test runs beside it (paho clients, a drain of a big backlog):
# a pause of the whole process must not read as a dead proxy.
CALL_TIMEOUT = 30.0


class _Relay:
    """One accepted connection and its upstream. Side 0 is the dialer (accepted socket),
    side 1 the target. queue[s] holds what was read from side s as (release time, bytes or a
    marker), in order; when released it moves to out[1 - s], the bytes still to be written
    to the other side."""

    def __init__(self, client):
        self.socks = [client, None]
        self.queue = (collections.deque(), collections.deque())
        self.out = [bytearray(), bytearray()]
        self.held_bytes = [0, 0]          # read from side s and not yet written onwards
        self.read_done = [False, False]
        self.shut_after_flush = [False, False]
        self.write_done = [False, False]
        self.last_release = [0.0, 0.0]
        self.connecting = False
        self.held = False                 # accepted during a black hole: no upstream yet
        self.tails = [b"", b""]           # the last bytes read from side s (watch_bytes)
        self.closed = False
        self.source = None                # the dialer's address


class DelayProxy:
    """TCP proxy from 127.0.0.1:listen_port to target_port (listen_port 0: any free port, see
    .port). One upstream connection per accepted connection. Each chunk read is held until
    `delay` ms after it arrived (per direction, in order), so a request/response pair through
    the proxy takes at least twice the delay.

      set_delay(ms, direction=None)  direction "up" (dialer to target), "down", or both
      cut("reset")      reset (RST) every connection; new ones are reset at once
      cut("blackhole")  keep every socket open but move nothing; new connections are accepted
                        and held; heal() lets everything (held data included) flow again
      heal()            back to normal (connections reset by a cut stay gone)
      cut_from(host)    as cut("reset"), but only for the connections dialled from source
                        address `host` (e.g. 127.1.2.1, a broker's bridge_bind_address), so
                        that one of several dialers sharing the proxy loses its path alone;
                        heal_from(host) ends that
      close()           stop the thread and close every socket
      watch_bytes(pattern)  count from now on how often `pattern` crosses (either direction,
                        also across reads); seen_bytes(pattern) says how often so far

    All methods are synchronous: when they return, the proxy thread has applied them.
    Counters: accepted (connections), forwarded[0] / [1] (bytes up / down)."""

    def __init__(self, listen_port=0, target_port=None, delay_ms=0.0, name="proxy"):
        self.name = name
        self.target_port = target_port
        self.accepted = 0
        self.forwarded = [0, 0]
        self._delay = [delay_ms / 1000.0, delay_ms / 1000.0]
        self._mode = "open"
        self._cut_sources = set()         # cut_from(): dialers whose connections are reset
        self._patterns = {}               # watch_bytes(): pattern -> times seen
        self._relays = []
        self._registered = {}
        self._commands = collections.deque()
        self._stopping = False
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((HOST, listen_port))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ, "listen")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._run, name="DelayProxy-%s" % name,
                                        daemon=True)
        self._thread.start()

    def __repr__(self):
        return "DelayProxy(%s :%d -> :%s, %s)" % (self.name, self.port, self.target_port,
                                                   self._mode)

    # ------------------------------------------------------------ public API (any thread)

    def set_delay(self, ms, direction=None):
        sides = {None: (0, 1), "up": (0,), "down": (1,)}[direction]

        def apply():
            for s in sides:
                self._delay[s] = ms / 1000.0
        self._call(apply)

    @property
    def delay_ms(self):
        return (self._delay[0] * 1000.0, self._delay[1] * 1000.0)

    @property
    def mode(self):
        return self._mode

    def cut(self, mode="reset"):
        if mode not in ("reset", "blackhole"):
            raise ValueError("cut mode is 'reset' or 'blackhole', not %r" % (mode,))
        self._call(lambda: self._cut(mode))

    def heal(self):
        self._call(self._heal)

    def cut_from(self, host):
        self._call(lambda: self._cut_from(host))

    def heal_from(self, host):
        self._call(lambda: self._cut_sources.discard(host))

    def watch_bytes(self, pattern):
        self._call(lambda: self._patterns.setdefault(bytes(pattern), 0))

    def seen_bytes(self, pattern):
        return self._call(lambda: self._patterns[bytes(pattern)])

    def _count(self, relay, side, data):
        longest = max(len(p) for p in self._patterns)
        tail = relay.tails[side]
        both = tail + data
        for p in self._patterns:
            self._patterns[p] += both.count(p) - tail.count(p)
        relay.tails[side] = both[-(longest - 1):] if longest > 1 else b""

    def connection_count(self):
        return self._call(lambda: len(self._relays))

    def close(self):
        if not self._thread.is_alive():
            return
        self._call(lambda: setattr(self, "_stopping", True))
        self._thread.join(5.0)

    def _call(self, fn, timeout=CALL_TIMEOUT):
        if threading.current_thread() is self._thread:
            return fn()
        if not self._thread.is_alive():
            raise RuntimeError("%r: proxy thread is not running" % self)
        done = threading.Event()
        result = []
        self._commands.append((fn, done, result))
        self._wake()
        if not done.wait(timeout):
            raise RuntimeError("%r: proxy thread did not answer within %.1fs" % (self, timeout))
        if result and isinstance(result[0], BaseException):
            raise result[0]
        return result[0] if result else None

    def _wake(self):
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    # ------------------------------------------------------------ the proxy thread

    def _run(self):
        try:
            while not self._stopping:
                for key, mask in self._selector.select(self._next_timeout()):
                    self._dispatch(key, mask)
                self._run_commands()
                self._release_due()
        finally:
            self._run_commands()
            for relay in list(self._relays):
                self._abort(relay)
            for sock in (self._listener, self._wake_r, self._wake_w):
                sock.close()
            self._selector.close()

    def _run_commands(self):
        while self._commands:
            fn, done, result = self._commands.popleft()
            try:
                result.append(fn())
            except BaseException as e:   # handed to the caller
                result.append(e)
            done.set()

    def _next_timeout(self):
        if self._mode == "blackhole":
            return 1.0
        heads = [q[0][0] for r in self._relays for q in r.queue if q]
        if not heads:
            return 1.0
        return min(1.0, max(0.0, min(heads) - time.monotonic()))

    def _dispatch(self, key, mask):
        if key.data == "listen":
            self._accept()
        elif key.data == "wake":
            try:
                while self._wake_r.recv(4096):
                    pass
            except OSError:
                pass
        else:
            relay, side = key.data
            if relay.closed:
                return
            if side == 1 and relay.connecting and mask & selectors.EVENT_WRITE:
                if relay.socks[1].getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    self._abort(relay)
                    return
                relay.connecting = False
            if mask & selectors.EVENT_READ:
                self._read(relay, side)
            if not relay.closed and mask & selectors.EVENT_WRITE:
                self._flush(relay, side)
            self._settle(relay)

    def _accept(self):
        while True:
            try:
                client, source = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.accepted += 1
            if self._mode == "reset" or source[0] in self._cut_sources:
                _reset_socket(client)
                continue
            relay = _Relay(client)
            relay.source = source[0]
            self._relays.append(relay)
            if self._mode == "blackhole":
                relay.held = True
            else:
                self._connect_upstream(relay)
            self._settle(relay)

    def _connect_upstream(self, relay):
        upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        upstream.setblocking(False)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        relay.socks[1] = upstream
        err = upstream.connect_ex((HOST, self.target_port))
        if err in (errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK):
            relay.connecting = True
        elif err != 0:
            self._abort(relay)         # target not listening: the dialer sees a reset

    def _read(self, relay, side):
        try:
            data = relay.socks[side].recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = _RESET
        if not data:
            data = _EOF
        if data in (_EOF, _RESET):
            relay.read_done[side] = True
        else:
            relay.held_bytes[side] += len(data)
            if self._patterns:
                self._count(relay, side, data)
        release = max(time.monotonic() + self._delay[side], relay.last_release[side])
        relay.last_release[side] = release
        relay.queue[side].append((release, data))

    def _release_due(self):
        if self._mode == "blackhole":
            return
        now = time.monotonic()
        for relay in list(self._relays):
            for side in (0, 1):
                queue = relay.queue[side]
                while queue and queue[0][0] <= now and not relay.closed:
                    _, data = queue.popleft()
                    if data == _RESET:
                        self._abort(relay)
                    elif data == _EOF:
                        relay.shut_after_flush[1 - side] = True
                    else:
                        relay.out[1 - side] += data
            if not relay.closed:
                self._flush(relay, 0)
                self._flush(relay, 1)
                self._settle(relay)

    def _flush(self, relay, side):
        sock = relay.socks[side]
        if relay.closed or sock is None or relay.held or self._mode == "blackhole":
            return
        if side == 1 and relay.connecting:
            return
        out = relay.out[side]
        while out:
            try:
                n = sock.send(out)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._abort(relay)
                return
            del out[:n]
            relay.held_bytes[1 - side] -= n
            self.forwarded[1 - side] += n
        if relay.shut_after_flush[side] and not relay.write_done[side]:
            relay.write_done[side] = True
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _settle(self, relay):
        """Close a relay whose both directions are finished; else register what it waits for."""
        if relay.closed:
            return
        if all(relay.write_done) and all(relay.read_done):
            self._close_relay(relay, reset=False)
            return
        for side in (0, 1):
            sock = relay.socks[side]
            if sock is None:
                continue
            events = 0
            if self._mode != "blackhole" and not relay.held:
                if side == 1 and relay.connecting:
                    events = selectors.EVENT_WRITE
                else:
                    if not relay.read_done[side] and relay.held_bytes[side] < _QUEUE_LIMIT:
                        events |= selectors.EVENT_READ
                    if relay.out[side]:
                        events |= selectors.EVENT_WRITE
            self._register(sock, events, (relay, side))

    def _register(self, sock, events, data):
        current = self._registered.get(sock, 0)
        if events == current:
            return
        if current and not events:
            self._selector.unregister(sock)
            del self._registered[sock]
            return
        if current:
            self._selector.modify(sock, events, data)
        else:
            self._selector.register(sock, events, data)
        self._registered[sock] = events

    def _close_relay(self, relay, reset):
        relay.closed = True
        for sock in relay.socks:
            if sock is None:
                continue
            if self._registered.pop(sock, 0):
                self._selector.unregister(sock)
            if reset:
                _reset_socket(sock)
            else:
                sock.close()
        if relay in self._relays:
            self._relays.remove(relay)

    def _abort(self, relay):
        self._close_relay(relay, reset=True)

    def _cut(self, mode):
        self._mode = mode
        for relay in list(self._relays):
            if mode == "reset":
                self._abort(relay)
            else:
                self._settle(relay)

    def _cut_from(self, host):
        self._cut_sources.add(host)
        for relay in list(self._relays):
            if relay.source == host:
                self._abort(relay)

    def _heal(self):
        self._mode = "open"
        for relay in list(self._relays):
            if relay.held:
                relay.held = False
                self._connect_upstream(relay)
            self._settle(relay)


def _reset_socket(sock):
    """Close with RST rather than FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()
