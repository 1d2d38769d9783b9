#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A well-behaved client is cut with request_timeout the moment it gets a slot.

Found by the soak and fixed in 2893074; the names below are today's.
on_watchdog (daemon/shard.c) reads the clock once, then checks every
connection against that `now` (gf_conn_io_check_deadlines, daemon/conn_io.c).
Then, when it cut a stalled client, the freed slot went at once to a
connection waiting for one, which stamped request_begun_ns = gf_now_ns(),
later than `now`; if that connection came later in the list (it connected
earlier: the list is newest first), now_ns - request_begun_ns wrapped around
as uint64, and the client was cut with request_timeout although its whole
frame was in the socket.  The same subtraction guarded write_timeout
(write_progress_ns) and the drain's stall check (last_input_ns).  Today
passed() in daemon/deadline.c counts a reading later than `now` as not
passed, and a freed slot reaches a waiter only in the deferred pass after
the watchdog (run_grant, daemon/shard.c).

Here: one slot.  V connects, then S; S claims the slot and stalls; V sends a
57600-byte frame (more than the 16 KiB staged: it needs the slot) and waits.
Expected: S is cut, V gets its RESULT.  Bug: V is cut too, at the same time.
    bench/repro/watchdog_now_wraps.py BUILD_DIR
"""
import sys, time
from common import Daemon, FRAME, RESULT, build_dir, header, reply

d = Daemon(build_dir(), {'slots': 1, 'request_timeout_ms': 2000,
                         'pipelines': [{'name': 'echo', 'kind': 'echo'}]})
try:
    v = d.connect()
    time.sleep(0.1)
    s = d.connect()
    s.sendall(header(FRAME, 1, 1 << 20) + b'x' * 1000)
    time.sleep(0.2)
    frame = bytes(range(200)) * 288
    v.sendall(header(FRAME, 7, len(frame)) + frame)
    rs, rv = reply(s), reply(v)
    print('stalled client S: type %d status %d' % (rs[0], rs[2]))
    ok = rv[0] == RESULT and rv[3] == frame
    print('well-behaved client V: %s' % ('RESULT, correct' if ok else
          'type %d status %d: %s' % (rv[0], rv[2], rv[3].decode(errors='replace'))))
finally:
    d.stop()
sys.exit(0 if ok else 1)
