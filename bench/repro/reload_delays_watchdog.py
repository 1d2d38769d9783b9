#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Each SIGHUP postpones every deadline check by a full watchdog period.

gf_shard_reload_apply (daemon/shard.c) then restarted the watchdog timer with its
full period (uv_timer_start), whatever was left of the running one; today it
restarts it only when the period changes.  The
watchdog enforces request_timeout_ms, write_timeout_ms, idle_timeout_ms and
frame_timeout_ms (the hung-engine check).  Reloads more often than the
period (request_timeout_ms / 2 + 1, at most 1 s) stop them all; reloads
every few seconds add up to a period to each (the soak sees stalled clients
cut after 4.0 s with request_timeout_ms 2000, where 1.5 deadlines, 3.0 s,
is the documented bound).

Here: a client stalls after 5 bytes of a header, request_timeout_ms 2000,
SIGHUP every 0.5 s for 10 s.  Expected: cut within about 3 s.  Bug: cut only
after the reloads stop (about 10.5 s).
    bench/repro/reload_delays_watchdog.py BUILD_DIR
"""
import signal, socket, sys, threading, time
from common import Daemon, build_dir

d = Daemon(build_dir(), {'request_timeout_ms': 2000,
                         'pipelines': [{'name': 'echo', 'kind': 'echo'}]})
try:
    s = d.connect()
    s.sendall(b'GFRM\x01')
    t0 = time.time()
    stop = threading.Event()

    def hup():
        while not stop.is_set() and time.time() - t0 < 10:
            time.sleep(0.5)
            d.proc.send_signal(signal.SIGHUP)
    threading.Thread(target=hup, daemon=True).start()
    s.settimeout(30)
    try:
        s.recv(64)
        took = time.time() - t0
    except socket.timeout:
        took = float('inf')
    stop.set()
    print('stalled client cut after %.1f s (request_timeout_ms 2000, SIGHUP every 0.5 s)' % took)
finally:
    d.stop()
sys.exit(0 if took <= 3.5 else 1)
