# SPDX-License-Identifier: MIT
"""One connection to the daemon: a FIFO of requests, writes and reads at once.

PROTOCOL.md's deadlock warning is why this module exists: a slot of the daemon
is freed only once its reply has been written, so a client that writes a window
of frames before reading any reply blocks for ever once the socket buffers are
full.  Here every wait is one loop over a non-blocking socket that writes what
is queued *and* reads what has arrived, whatever the caller waits for.

Requests are only queued by :meth:`Connection.submit`; bytes move in
:meth:`Connection.wait`.  Replies are matched to requests with a FIFO (the
daemon answers in order) and checked against it: type, frame_id, pipeline_id.
A reply's payload is read straight into the memory of its result (a NumPy array
or bytearray that the request's ``make_output`` allocates) once the header has
been seen; only bytes that arrived in the same read as a header are copied
once, out of a small receive buffer, which saves a system call per small frame.

Each request carries its own protocol version and flags (version 2 only for
the shared-memory messages; PROTOCOL.md, "Versioning"), and its reply must
come in the same version.  A request may carry one file descriptor
(REGION_ADD's memfd): its header then goes out alone, in one sendmsg() whose
data is exactly those bytes and whose control data is the descriptor as
SCM_RIGHTS, so that the daemon takes it to belong to that request.

Not thread-safe: one connection is used by one thread at a time.
"""

from __future__ import annotations

import array
import itertools
import selectors
import socket
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from . import protocol
from .errors import (
    ClientTimeoutError,
    ConnectionClosedError,
    GpuframeError,
    ProtocolError,
    make_status_error,
)
from .pipelines import Finish, MakeOutput
from .protocol import HEADER_BYTES, Header, MsgType, Status

__all__ = ["Connection", "Request"]

# Receive buffer for headers and the small payloads that come with them: the
# daemon's own read buffer is 16 KiB; a few of its replies fit in one read.
RECV_BUFFER_BYTES = 64 * 1024
# A payload with at least this much still to come is read straight into its
# result; a smaller rest goes through the buffer, so that the next headers
# come in the same system call.
DIRECT_READ_MIN_BYTES = 16 * 1024
# Buffers handed to one sendmsg(): below Linux's IOV_MAX (1024).
SEND_IOV_MAX = 512
# Reads in a row before the loop looks at the write side again.
READS_PER_WAKEUP = 16

_U64_MASK = (1 << 64) - 1

# Which reply types answer which request (besides ERROR, which answers any).
_ANSWERS: Dict[int, int] = {
    MsgType.FRAME: MsgType.RESULT,
    MsgType.LIST: MsgType.LIST,
    MsgType.STATS: MsgType.STATS,
    MsgType.TRACE: MsgType.TRACE,
    MsgType.REGION_ADD: MsgType.REGION_ADD,
    MsgType.REGION_REMOVE: MsgType.REGION_REMOVE,
    MsgType.DEVICE_REGION_ADD: MsgType.DEVICE_REGION_ADD,
}


class Request:
    """One request queued or sent, until its reply.

    ``done`` turns True exactly once, with either ``result`` (the object
    ``make_output`` made, filled with the reply's payload, then passed
    through ``finish`` when the request has one) or ``error`` (a StatusError
    for an ERROR reply, else why the request failed) set.  ``abandoned`` is
    set by a caller that will never look at the reply (a stream left early):
    such a request does not keep the connection busy (:meth:`Connection.live`).
    """

    __slots__ = ("msg_type", "frame_id", "pipeline_id", "version", "flags", "expect_bytes",
                 "make_output", "finish", "abandoned", "done", "result", "error")

    def __init__(self, msg_type: int, frame_id: int, pipeline_id: int, version: int, flags: int,
                 expect_bytes: Optional[int], make_output: Optional[MakeOutput],
                 finish: Optional[Finish]) -> None:
        self.msg_type = msg_type
        self.frame_id = frame_id
        self.pipeline_id = pipeline_id
        self.version = version  # of the request, and so of its reply
        self.flags = flags  # of the request; a RESULT carries the same FLAG_SHM
        self.expect_bytes = expect_bytes  # None: any length; -1: no RESULT is right
        self.make_output = make_output  # n -> (result object, writable n-byte memoryview)
        self.finish = finish  # (result, Header) -> the result delivered, or raises
        self.abandoned = False
        self.done = False
        self.result: Any = None
        self.error: Optional[BaseException] = None

    def _finish(self, result: Any = None, error: Optional[BaseException] = None) -> None:
        self.result = result
        self.error = error
        self.done = True
        self.make_output = None
        self.finish = None


class _Reply:
    """The reply being read: its header, request, result and how much of the
    payload is in."""

    __slots__ = ("header", "request", "result", "dest", "filled", "error")

    def __init__(self, header: Header, request: Optional[Request], result: Any, dest: memoryview,
                 error: Optional[BaseException]) -> None:
        self.header = header
        self.request = request
        self.result = result
        self.dest = dest  # memoryview of exactly header.payload_bytes bytes
        self.filled = 0
        self.error = error  # set when the payload is read only to be dropped


def _json_output(nbytes: int) -> Tuple[bytearray, memoryview]:
    out = bytearray(nbytes)
    return out, memoryview(out)


class Connection:
    """A connected stream socket to the daemon and everything in flight on it.

    ``sock`` must be connected; the connection owns it from now on and makes it
    non-blocking.  ``timeout`` (seconds, None for ever) bounds how long a wait
    may go without any byte moving; ``version`` is the protocol version
    written in request headers unless :meth:`submit` says another;
    ``max_reply_bytes`` caps the payload of a reply whose length no pipeline
    rule fixes.
    """

    def __init__(self, sock: socket.socket, *, timeout: Optional[float],
                 version: int = protocol.VERSION, max_reply_bytes: int = 1 << 30) -> None:
        sock.setblocking(False)
        self._sock = sock
        self.timeout = timeout
        self.version = version
        self.max_reply_bytes = max_reply_bytes
        # poll(): one system call per wait, and changing the events of the one
        # fd costs none (epoll would need epoll_ctl each time).
        self._sel: selectors.BaseSelector = (
            selectors.PollSelector() if hasattr(selectors, "PollSelector")
            else selectors.DefaultSelector())
        self._events = selectors.EVENT_READ
        self._sel.register(sock, self._events)
        self._next_frame_id = 0
        self._fifo: Deque[Request] = deque()  # Requests without a reply, oldest first
        # (memoryview, ends a message, fd or None) still to write
        self._out: Deque[Tuple[memoryview, bool, Optional[int]]] = deque()
        self._out_fds = 0  # entries of _out that carry a file descriptor
        self._out_mid = False  # part, not all, of the head message is written
        # the OSError that ended writing (EPIPE), if any
        self._write_error: Optional[OSError] = None
        self._rbuf = bytearray(RECV_BUFFER_BYTES)
        self._rview = memoryview(self._rbuf)
        self._rpos = 0  # first unparsed byte of _rbuf
        self._rend = 0  # end of the bytes received into _rbuf
        self._reply: Optional[_Reply] = None  # the _Reply whose payload is being read
        # why the connection closed; None while open
        self.closed_error: Optional[BaseException] = None

    # ---- state -----------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the connection is closed (by either side)."""
        return self.closed_error is not None

    @property
    def in_flight(self) -> int:
        """Requests queued or sent whose replies have not arrived."""
        return len(self._fifo)

    def live(self) -> int:
        """Requests without a reply that someone still waits for (those not
        ``abandoned``)."""
        return sum(1 for req in self._fifo if not req.abandoned)

    @property
    def next_frame_id(self) -> int:
        """The frame_id the next request gets: a per-connection counter from 0."""
        return self._next_frame_id

    # ---- requests -----------------------------------------------------------------

    def submit(self, msg_type: int, pipeline_id: int, payload: Optional[memoryview] = None,
               expect_bytes: Optional[int] = None, make_output: MakeOutput = _json_output, *,
               version: Optional[int] = None, flags: int = 0, finish: Optional[Finish] = None,
               fd: Optional[int] = None, status: int = 0) -> Request:
        """Queues one request and returns its :class:`Request`; writes nothing.

        ``payload`` (a byte memoryview, or None for none) is referenced until
        it has been written, not copied.  ``version`` (default: the
        connection's), ``flags`` and ``status`` (0, or a version-3 FRAME's
        deadline) go into its header; ``finish`` turns the
        filled result into what the request delivers (see :class:`Request`;
        a GpuframeError it raises fails that request alone).  ``fd``, for a
        request without payload or with a small one (DEVICE_REGION_ADD's),
        is sent as SCM_RIGHTS with exactly the request's bytes; the caller keeps owning it and may close it once the
        request is done.  Raises ConnectionClosedError when the connection is
        closed.
        """
        if self.closed_error is not None:
            raise ConnectionClosedError(
                "the connection to the daemon is closed", self.closed_error
            ) from self.closed_error
        nbytes = 0 if payload is None else payload.nbytes
        if fd is not None and nbytes > protocol.DEVICE_REGION_BYTES:
            raise ValueError("a file descriptor goes with a request of at most %d payload bytes"
                             % protocol.DEVICE_REGION_BYTES)
        if version is None:
            version = self.version
        frame_id = self._next_frame_id
        self._next_frame_id = (frame_id + 1) & _U64_MASK
        req = Request(msg_type, frame_id, pipeline_id, version, flags, expect_bytes,
                      make_output, finish)
        header = protocol.encode_header(msg_type, frame_id, pipeline_id, nbytes,
                                        status=status, flags=flags, version=version)
        # Once the daemon has stopped reading (EPIPE) nothing more is written;
        # the request fails when the close is seen, after the replies before it.
        if self._write_error is None:
            if fd is not None and payload is not None and nbytes:
                header += bytes(payload)  # one sendmsg carries the request and its fd
                nbytes = 0
            self._out.append((memoryview(header), nbytes == 0, fd))
            if fd is not None:
                self._out_fds += 1
            if payload is not None and nbytes:
                self._out.append((payload, True, None))
        self._fifo.append(req)
        return req

    def wait(self, req: Request) -> None:
        """Moves bytes both ways until ``req`` is done and no request is left
        half written (the daemon times out a request begun but not finished,
        and the caller may not come back soon).  On return ``req.done`` is
        True; a timeout or a close shows as ``req.error``."""
        self._pump(lambda: req.done and not self._out_mid)

    def wait_all(self) -> None:
        """Moves bytes both ways until every request has its reply (or the
        connection closed)."""
        self._pump(lambda: not self._fifo and not self._out_mid)

    def close(self, error: Optional[BaseException] = None) -> None:
        """Closes the socket; every request without a reply fails with
        ``error`` (default: ConnectionClosedError "the client was closed").
        Closing twice does nothing."""
        if self.closed_error is None:
            self._close(error or ConnectionClosedError("the client was closed"))

    # ---- the loop -------------------------------------------------------------------

    def _pump(self, done: Callable[[], bool]) -> None:
        last_progress = time.monotonic()
        while not done():
            if self.closed_error is not None:
                return
            if not self._fifo and not self._out:
                return  # nothing can change any more
            want = selectors.EVENT_READ
            if self._out and self._write_error is None:
                want |= selectors.EVENT_WRITE
            if want != self._events:
                self._sel.modify(self._sock, want)
                self._events = want
            wait_s: Optional[float] = None
            if self.timeout is not None:
                wait_s = last_progress + self.timeout - time.monotonic()
                if wait_s <= 0:
                    self._close(ClientTimeoutError(
                        "the daemon sent and took nothing for %g s with %d requests in "
                        "flight; connection closed" % (self.timeout, len(self._fifo))))
                    return
            ready = self._sel.select(wait_s)
            if not ready:
                continue
            mask = ready[0][1]
            progress = False
            if mask & selectors.EVENT_WRITE and self._out and self._write_error is None:
                progress = self._write()
            if mask & selectors.EVENT_READ:
                progress = self._read() or progress
            if progress:
                last_progress = time.monotonic()

    def _write(self) -> bool:
        """One sendmsg() of as much of the queue as the socket takes; a header
        that carries a file descriptor goes alone, with it.  Returns True when
        bytes moved (or writing ended)."""
        out = self._out
        ancillary: Sequence[Tuple[int, int, Any]] = ()
        iov: List[memoryview]
        if not self._out_fds:
            iov = [view for view, _, _ in itertools.islice(out, SEND_IOV_MAX)]
        elif out[0][2] is not None:
            iov = [out[0][0]]
            ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [out[0][2]]))]
        else:
            iov = []
            for view, _, fd in itertools.islice(out, SEND_IOV_MAX):
                if fd is not None:
                    break
                iov.append(view)
        try:
            sent = self._sock.sendmsg(iov, ancillary, socket.MSG_NOSIGNAL)
        except (BlockingIOError, InterruptedError):
            return False
        except (BrokenPipeError, ConnectionResetError) as e:
            # The daemon closed (a fatal error, a stop).  Its replies may still
            # be waiting to be read: keep reading until end-of-file.
            self._write_error = e
            self._out.clear()
            self._out_fds = 0
            self._out_mid = False
            return True
        except OSError as e:
            self._close(ConnectionClosedError("writing to the daemon failed: %s" % e, e))
            return True
        if ancillary:
            # The descriptor went with the first of these bytes, which lie in
            # its request's header: the rest, if any, goes without it.
            self._out_fds -= 1
            out[0] = (out[0][0], out[0][1], None)
        while sent:
            view, last, fd = out[0]
            if sent >= view.nbytes:
                sent -= view.nbytes
                out.popleft()
                self._out_mid = not last
            else:
                out[0] = (view[sent:], last, fd)
                sent = 0
                self._out_mid = True
        return True

    def _read(self) -> bool:
        """Reads what has arrived (a few recv calls at most) and delivers every
        whole reply.  Returns True when bytes moved (or the connection closed)."""
        progress = False
        for _ in range(READS_PER_WAKEUP):
            r = self._reply
            direct = (r is not None and self._rpos == self._rend
                      and r.dest.nbytes - r.filled >= DIRECT_READ_MIN_BYTES)
            if direct:
                assert r is not None
                target = r.dest[r.filled:]
            else:
                target = self._rview[self._rend:]
            try:
                n = self._sock.recv_into(target)
            except (BlockingIOError, InterruptedError):
                break
            except ConnectionResetError:
                n = 0  # the daemon closed with bytes of ours unread: end-of-file
            except OSError as e:
                self._close(ConnectionClosedError("reading from the daemon failed: %s" % e, e))
                return True
            if n == 0:
                self._on_eof()
                return True
            progress = True
            if direct:
                assert r is not None
                r.filled += n
                if r.filled == r.dest.nbytes:
                    self._finish_reply()
            else:
                self._rend += n
                self._parse()
            if self.closed_error is not None:
                break
        return progress

    def _parse(self) -> None:
        """Consumes the receive buffer: headers, and payload bytes into the
        reply being read.  What is left is the start of a header, moved to the
        front of the buffer."""
        while self.closed_error is None:
            r = self._reply
            avail = self._rend - self._rpos
            if r is None:
                if avail < HEADER_BYTES:
                    break
                self._start_reply(self._rpos)
                self._rpos += HEADER_BYTES
                continue
            take = min(avail, r.dest.nbytes - r.filled)
            if take:
                r.dest[r.filled:r.filled + take] = self._rview[self._rpos:self._rpos + take]
                r.filled += take
                self._rpos += take
            if r.filled == r.dest.nbytes:
                self._finish_reply()
                continue
            break
        left = self._rend - self._rpos
        if left and self._rpos:
            self._rbuf[:left] = self._rview[self._rpos:self._rend]
        self._rpos, self._rend = 0, left

    def _start_reply(self, offset: int) -> None:
        """Decodes the reply header at _rbuf[offset], checks it against the
        oldest request and allocates where its payload goes."""
        try:
            h = protocol.decode_header(self._rbuf, offset)
        except ProtocolError as e:
            self._close(e)
            return
        fatal = h.type == MsgType.ERROR and h.status in protocol.FATAL_STATUSES
        req = self._fifo[0] if self._fifo else None
        # A reply comes in its request's version.  A fatal ERROR need not: a
        # daemon of another version refuses in its own header (PROTOCOL.md,
        # "Versioning"), and one refusing a header it cannot trust answers
        # in version 1.
        want = req.version if req is not None else self.version
        if h.version != want and not fatal:
            self._close(ProtocolError(
                "reply of protocol version %d to a version-%d request" % (h.version, want)))
            return
        if req is None and not fatal:
            self._close(ProtocolError(
                "%s reply (frame_id %d) with no request in flight"
                % (MsgType(h.type).name, h.frame_id)))
            return
        # A fatal ERROR echoes whatever the refused header held; it is the
        # answer to the oldest request whatever its ids say.
        if req is not None and not fatal:
            if h.type != MsgType.ERROR and h.type != _ANSWERS[req.msg_type]:
                self._close(ProtocolError(
                    "%s reply to a %s request (frame_id %d)"
                    % (MsgType(h.type).name, MsgType(req.msg_type).name, req.frame_id)))
                return
            if h.frame_id != req.frame_id or h.pipeline_id != req.pipeline_id:
                self._close(ProtocolError(
                    "reply for frame_id %d pipeline_id %d, expected frame_id %d "
                    "pipeline_id %d (replies out of order)"
                    % (h.frame_id, h.pipeline_id, req.frame_id, req.pipeline_id)))
                return
            if h.type == MsgType.RESULT and \
                    (h.flags & protocol.FLAG_SHM) != (req.flags & protocol.FLAG_SHM):
                # Output bytes where a descriptor belongs, or the reverse.
                self._close(ProtocolError(
                    "RESULT with flags 0x%04x to a FRAME sent with flags 0x%04x (frame_id %d)"
                    % (h.flags, req.flags, req.frame_id)))
                return
        nbytes = h.payload_bytes
        result: Any = None
        dest: Optional[memoryview] = None
        error: Optional[BaseException] = None
        # A RESULT has its request: without one only a fatal ERROR gets here.
        make_output = req.make_output if req is not None else None
        expect_bytes = req.expect_bytes if req is not None else None
        if h.type == MsgType.RESULT and expect_bytes is not None and nbytes != expect_bytes:
            # The stream can still be followed; only this frame is wrong
            # (say, the daemon reloaded other pipeline parameters).
            error = ProtocolError(
                "RESULT of %d bytes for frame_id %d, but the pipeline's parameters "
                "from LIST give %s; call list() again"
                % (nbytes, h.frame_id,
                   "an ERROR" if expect_bytes < 0 else "%d bytes" % expect_bytes))
        elif h.type == MsgType.RESULT and expect_bytes is not None:
            assert make_output is not None
            result, dest = make_output(nbytes)
        if dest is None:
            if nbytes > self.max_reply_bytes:
                self._close(ProtocolError(
                    "%s reply of %d bytes exceeds max_reply_bytes %d"
                    % (MsgType(h.type).name, nbytes, self.max_reply_bytes)))
                return
            if h.type == MsgType.RESULT and error is None:
                assert make_output is not None
                result, dest = make_output(nbytes)
            else:
                result, dest = _json_output(nbytes)
        self._reply = _Reply(h, req, result, dest, error)
        if nbytes == 0:
            self._finish_reply()

    def _finish_reply(self) -> None:
        """Delivers the reply whose payload is complete to its request."""
        r, self._reply = self._reply, None
        assert r is not None
        h, req = r.header, r.request
        if req is not None:
            popped = self._fifo.popleft()
            assert popped is req
        if h.type != MsgType.ERROR:
            assert req is not None
            result, error = r.result, r.error
            if error is None and req.finish is not None:
                try:
                    result = req.finish(result, h)
                except GpuframeError as e:
                    result, error = None, e
            req._finish(result=result if error is None else None, error=error)
            return
        text = bytes(r.dest).decode("utf-8", "replace")
        # bad_length closes the connection only after a LIST/STATS/TRACE with
        # a payload; this client never sends one, but the rule is the protocol's.
        fatal = h.status in protocol.FATAL_STATUSES or (
            h.status == Status.BAD_LENGTH and req is not None
            and req.msg_type != MsgType.FRAME)
        err = make_status_error(h.status, text, frame_id=h.frame_id,
                                pipeline_id=h.pipeline_id, fatal=fatal)
        if req is not None:
            req._finish(error=err)
        if fatal:
            closing = ConnectionClosedError(
                "the daemon closed the connection after %s" % err, err)
            closing.__cause__ = err
            self._close(closing)

    def _on_eof(self) -> None:
        """The daemon closed: fail what is left (a partial reply included)."""
        unanswered = len(self._fifo)
        closing = ConnectionClosedError(
            "the daemon closed the connection%s"
            % (" with %d requests unanswered" % unanswered if unanswered else ""),
            self._write_error)
        self._close(closing)

    def _close(self, error: BaseException) -> None:
        self.closed_error = error
        for req in self._fifo:
            req._finish(error=error)
        self._fifo.clear()
        self._out.clear()
        self._out_fds = 0
        self._out_mid = False
        self._reply = None
        try:
            self._sel.unregister(self._sock)
        except (KeyError, ValueError):
            pass
        self._sel.close()
        self._sock.close()
