#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A client that stops reading is cut as request_timeout, and counted twice.

A client sends more than 64 TRACE requests and never reads.  The daemon
answers 64 (GF_CONN_MAX_LOOSE_REPLIES, daemon/conn.h) and stops reading; the
whole request headers left in its buffer count as a request begun
(conn_request_begun in daemon/conn_io.c: buf_end > buf_start).  Before the
fix (2893074) the request clock then ran although the client had sent every
byte, and request_timeout_ms fired first: ERROR request_timeout (which the
client never sees, queued behind 64 unwritten replies), connections.rejected
and closed_request_timeout +1; then write_timeout_ms closed it and
closed_write_timeout +1 as well.  Today conn_track_request (conn_io.c) runs
no request clock for a connection with no room for replies.  Documented
(docs/design.md, "What a client gets whatever others do"): a client that stops reading is closed by
write_timeout_ms, each close counted once, whatever the number of requests.
    bench/repro/flood_request_timeout.py BUILD_DIR
"""
import select, sys, time
from common import Daemon, FRAME, TRACE, build_dir, header, recv_exact

d = Daemon(build_dir(), {'slots': 1, 'request_timeout_ms': 2000, 'write_timeout_ms': 2000,
                         'trace_frames': 1024, 'pipelines': [{'name': 'echo', 'kind': 'echo'}]})
bad = False
try:
    f = d.connect()          # fill the trace ring: each TRACE reply is then large
    for i in range(1100):
        f.sendall(header(FRAME, i, 16) + b'x' * 16)
        recv_exact(f, 48)
    f.close()
    for n in (64, 100):
        before = d.stats()['connections']
        c = d.connect()
        c.sendall(b''.join(header(TRACE, i) for i in range(n)))
        p = select.poll()
        p.register(c, select.POLLRDHUP)
        t0 = time.time()
        p.poll(30000)
        took = time.time() - t0
        c.close()
        time.sleep(0.3)
        after = d.stats()['connections']
        delta = {k: after[k] - before[k] for k in
                 ('closed_request_timeout', 'closed_write_timeout', 'rejected')}
        print('%d TRACE requests, never read: closed after %.1f s; %s' % (n, took, delta))
        bad |= delta != {'closed_request_timeout': 0, 'closed_write_timeout': 1, 'rejected': 0}
finally:
    d.stop()
sys.exit(1 if bad else 0)
