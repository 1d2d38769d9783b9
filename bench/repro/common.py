# SPDX-License-Identifier: MIT
"""Shared by the reproducers: a gpuframed on a temporary socket, raw requests.

Each reproducer exits 0 when the daemon behaves as documented and 1 when the
bug it describes shows; soak.c found them (bench/README.md, "Soak")."""
import json, os, shutil, signal, socket, struct, subprocess, sys, tempfile, time

MAGIC = 0x4D524647
FRAME, RESULT, ERROR, LIST, STATS, TRACE = 1, 2, 3, 4, 5, 6


def header(msg_type, frame_id=0, payload_bytes=0, pipeline_id=0):
    return struct.pack('<IBBHQIIQ', MAGIC, 1, msg_type, 0, frame_id, pipeline_id, 0,
                       payload_bytes)


def recv_exact(s, n):
    b = b''
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            return None
        b += d
    return b


def reply(s):
    """(type, frame_id, status, payload) of the next reply, or None at EOF."""
    h = recv_exact(s, 32)
    if h is None:
        return None
    _, _, typ, _, fid, _, st, n = struct.unpack('<IBBHQIIQ', h)
    return typ, fid, st, recv_exact(s, n) or b''


class Daemon:
    """gpuframed from BUILD_DIR with `config` (a dict), CPU engine."""

    def __init__(self, build_dir, config):
        self.dir = tempfile.mkdtemp(prefix='gfrepro.')
        self.sock = os.path.join(self.dir, 's.sock')
        conf = os.path.join(self.dir, 'gpuframed.json')
        with open(conf, 'w') as f:
            json.dump(config, f)
        self.log = open(os.path.join(self.dir, 'daemon.log'), 'w')
        self.proc = subprocess.Popen(
            [os.path.join(build_dir, 'gpuframed'), '--config', conf, '--socket', self.sock,
             '--engine', 'cpu'], stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.exists(self.sock):
                break
            time.sleep(0.05)

    def connect(self):
        s = socket.socket(socket.AF_UNIX)
        s.connect(self.sock)
        return s

    def stats(self):
        s = self.connect()
        s.sendall(header(STATS))
        doc = json.loads(reply(s)[3])
        s.close()
        return doc

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        self.log.close()
        shutil.rmtree(self.dir)


def build_dir():
    if len(sys.argv) < 2:
        sys.exit('usage: %s BUILD_DIR' % sys.argv[0])
    return sys.argv[1]
