#!/usr/bin/env python3
"""A well-behaved client is cut with request_timeout the moment it gets a slot.

on_watchdog (daemon/server.c) reads the clock once, then checks every
connection against that `now`.  When it cuts a stalled client, the freed slot
goes at once to a connection waiting for one (gf__server_slot_freed ->
gf__conn_resume), which stamps request_begun_ns = gf_now_ns(), later than
`now`.  If that connection comes later in the list (it connected earlier:
the list is newest first), gf__conn_check_deadlines computes
now_ns - request_begun_ns, which wraps around as uint64: the client is cut
with request_timeout although its whole frame is in the socket.  The same
subtraction guards write_timeout (write_progress_ns) and the drain's stall
check (last_input_ns).  Under the soak, well-behaved frames fail and their
connections close whenever a hostile client is cut while others wait.

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
