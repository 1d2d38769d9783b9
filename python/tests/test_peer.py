# SPDX-License-Identifier: MIT
"""The client against a scripted peer: replies a real daemon never sends
(unknown status codes, replies out of order, malformed headers, silence,
a close in the middle), each checked for the exact error and whether the
connection survives it, as PROTOCOL.md prescribes.  Every request the peer
reads with recv_request() must be version 1 with flags 0; the shared-memory
requests are read with recv_message(), which shows the version, the flags and
the file descriptors that came with the header."""

import array
import fcntl
import mmap
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import unittest

import numpy as np

import gpuframe
from gpuframe import protocol
from gpuframe.protocol import MsgType

ECHO = gpuframe.Pipeline(0, "echo", "echo")


class Peer:
    """A listening socket whose one connection is served by ``script(peer)``
    in a thread.  The script uses recv_request() and send_reply()."""

    def __init__(self, script):
        self.dir = tempfile.mkdtemp(prefix="gfpypeer.", dir="/tmp")
        self.path = os.path.join(self.dir, "s.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(1)
        self.script = script
        self.conn = None
        self.error = None
        self.requests = []
        self.release = threading.Event()  # set by the test to let a script end
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self.conn, _ = self.listener.accept()
            self.conn.settimeout(10)
            self.script(self)
        except Exception as e:  # reported by join()
            self.error = e
        finally:
            if self.conn is not None:
                self.conn.close()

    def recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.conn.recv(n - len(buf))
            if not chunk:
                raise EOFError("client closed after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def recv_request(self):
        """One request: (frame_id, type, pipeline_id, payload)."""
        magic, version, t, flags, fid, pid, status, n = struct.unpack(
            "<IBBHQIIQ", self.recv_exact(32))
        assert (magic, version, flags, status) == (protocol.MAGIC, 1, 0, 0)
        payload = self.recv_exact(n)
        self.requests.append((fid, t, pid, payload))
        return fid, t, pid, payload

    def recv_message(self):
        """One request of any version: (version, flags, frame_id, type,
        pipeline_id, payload, fds, first), where ``fds`` came as SCM_RIGHTS
        with the header's first read, which held ``first`` bytes."""
        data, ancillary, msg_flags, _ = self.conn.recvmsg(32, socket.CMSG_SPACE(4 * 4))
        assert not msg_flags & socket.MSG_CTRUNC, "control data truncated"
        fds = array.array("i")
        for level, kind, cdata in ancillary:
            assert (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS), (level, kind)
            fds.frombytes(cdata[:len(cdata) - len(cdata) % fds.itemsize])
        first = len(data)
        if not data:
            raise EOFError("client closed")
        data += self.recv_exact(32 - len(data))
        magic, version, t, flags, fid, pid, status, n = struct.unpack("<IBBHQIIQ", data)
        assert (magic, status) == (protocol.MAGIC, 0)
        payload = self.recv_exact(n)
        self.requests.append((fid, t, pid, payload))
        return version, flags, fid, t, pid, payload, list(fds), first

    def send(self, data):
        self.conn.sendall(data)

    def reply(self, msg_type, fid, pid, payload=b"", status=0, **kw):
        self.send(protocol.encode_header(msg_type, fid, pid, len(payload), status=status,
                                         **kw) + payload)

    def join(self):
        self.release.set()
        self.thread.join(10)
        self.listener.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.error is not None:
            raise self.error


def echo_replies(count):
    """A script that echoes `count` frames."""
    def script(peer):
        for _ in range(count):
            fid, t, pid, payload = peer.recv_request()
            peer.reply(MsgType.RESULT, fid, pid, payload)
    return script


class PeerCase(unittest.TestCase):
    """A test that runs a client against a scripted peer."""

    def run_peer(self, script, timeout=5.0):
        peer = Peer(script)
        self.addCleanup(peer.join)
        c = gpuframe.Client(peer.path, timeout=timeout)
        self.addCleanup(c.close)
        return peer, c


class PeerTest(PeerCase):

    def test_unknown_status_fails_one_frame_and_the_stream_goes_on(self):
        def script(peer):
            for i in range(3):
                fid, t, pid, payload = peer.recv_request()
                if i == 1:
                    peer.reply(MsgType.ERROR, fid, pid, b"from the future", status=99)
                else:
                    peer.reply(MsgType.RESULT, fid, pid, payload)
            peer.release.wait(10)
        peer, c = self.run_peer(script)
        out = c.map(ECHO, [b"a", b"bb", b"ccc"], errors="yield")
        self.assertEqual(out[0], b"a")
        self.assertEqual(out[2], b"ccc")
        e = out[1]
        self.assertIs(type(e), gpuframe.UnknownStatusError)
        self.assertEqual((e.status, e.name, e.text, e.fatal, e.index, e.frame_id),
                         (99, "unknown", "from the future", False, 1, 1))
        self.assertFalse(c.closed)
        self.assertEqual(c.in_flight, 0)

    def test_raise_mode_ends_the_stream_at_the_failed_frame(self):
        def script(peer):
            for i in range(3):
                fid, t, pid, payload = peer.recv_request()
                if i == 1:
                    peer.reply(MsgType.ERROR, fid, pid, b"no", status=8)
                else:
                    peer.reply(MsgType.RESULT, fid, pid, payload)
            fid, t, pid, _ = peer.recv_request()
            peer.reply(MsgType.STATS, fid, pid, b'{"frames": {}}')
        peer, c = self.run_peer(script)
        got = []
        with self.assertRaises(gpuframe.EngineError) as cm:
            for r in c.stream(ECHO, [b"a", b"bb", b"ccc"], window=3):
                got.append(bytes(r))
        self.assertEqual(got, [b"a"])
        self.assertEqual((cm.exception.status, cm.exception.index), (8, 1))
        # The third frame's reply is read and dropped on the way to this one.
        self.assertEqual(c.stats(), {"frames": {}})
        self.assertEqual([r[0] for r in peer.requests], [0, 1, 2, 3])

    def test_reply_out_of_order_closes(self):
        def script(peer):
            peer.recv_request()
            b = peer.recv_request()
            peer.reply(MsgType.RESULT, b[0], b[2], b[3])
        peer, c = self.run_peer(script)
        with self.assertRaisesRegex(gpuframe.ProtocolError,
                                    "reply for frame_id 1 pipeline_id 0, expected frame_id 0"):
            c.map(ECHO, [b"x", b"y"])
        self.assertTrue(c.closed)
        with self.assertRaises(gpuframe.ConnectionClosedError) as cm:
            c.stats()
        self.assertIsInstance(cm.exception.cause, gpuframe.ProtocolError)

    def test_malformed_replies_close(self):
        cases = [
            (dict(version=2), "version 2"),
            (dict(flags=4), "flags 0x0004"),
        ]
        for kw, why in cases:
            with self.subTest(why):
                def script(peer):
                    fid, t, pid, payload = peer.recv_request()
                    peer.reply(MsgType.RESULT, fid, pid, payload, **kw)
                peer, c = self.run_peer(script)
                with self.assertRaisesRegex(gpuframe.ProtocolError, why):
                    c.process(ECHO, b"x")
                self.assertTrue(c.closed)

    def test_bad_magic_and_long_error_text_close(self):
        def bad_magic(peer):
            fid, t, pid, payload = peer.recv_request()
            peer.send(b"XXXX" + protocol.encode_header(MsgType.RESULT, fid, pid, 1)[4:] + b"x")

        def long_error(peer):
            fid, t, pid, payload = peer.recv_request()
            peer.reply(MsgType.ERROR, fid, pid, b"e" * 257, status=6)
        for script, why in ((bad_magic, "bad magic"), (long_error, "ERROR reply of 257 bytes")):
            with self.subTest(why):
                peer, c = self.run_peer(script)
                with self.assertRaisesRegex(gpuframe.ProtocolError, why):
                    c.process(ECHO, b"x")
                self.assertTrue(c.closed)

    def test_wrong_reply_type_closes(self):
        def script(peer):
            fid, t, pid, payload = peer.recv_request()
            peer.reply(MsgType.LIST, fid, pid, b"{}")
        peer, c = self.run_peer(script)
        with self.assertRaisesRegex(gpuframe.ProtocolError, "LIST reply to a FRAME request"):
            c.process(ECHO, b"x")
        self.assertTrue(c.closed)

    def test_result_of_the_wrong_length_fails_only_that_frame(self):
        def script(peer):
            fid, t, pid, payload = peer.recv_request()
            peer.reply(MsgType.RESULT, fid, pid, payload + b"!")
            fid, t, pid, payload = peer.recv_request()
            peer.reply(MsgType.RESULT, fid, pid, payload)
        peer, c = self.run_peer(script)
        with self.assertRaisesRegex(gpuframe.ProtocolError, "RESULT of 4 bytes for frame_id 0"):
            c.process(ECHO, b"abc")
        self.assertFalse(c.closed)
        self.assertEqual(c.process(ECHO, np.arange(3, dtype=np.int16)).tolist(), [0, 1, 2])

    def test_close_mid_stream_fails_the_rest(self):
        def script(peer):
            for _ in range(2):
                fid, t, pid, payload = peer.recv_request()
                peer.reply(MsgType.RESULT, fid, pid, payload)
            fid, t, pid, payload = peer.recv_request()
            # Half a reply, then the close.
            peer.send(protocol.encode_header(MsgType.RESULT, fid, pid, 3) + b"a")
        peer, c = self.run_peer(script)
        got = []
        with self.assertRaisesRegex(gpuframe.ConnectionClosedError,
                                    "the daemon closed the connection with 3 requests "
                                    "unanswered"):
            for r in c.stream(ECHO, [b"1", b"2", b"abc", b"4", b"5"], window=5):
                got.append(bytes(r))
        self.assertEqual(got, [b"1", b"2"])
        self.assertTrue(c.closed)

    def test_fatal_error_with_garbage_ids_answers_the_oldest_request(self):
        def script(peer):
            fid, t, pid, payload = peer.recv_request()
            peer.reply(MsgType.RESULT, fid, pid, payload)
            peer.recv_request()
            # request_timeout echoes whatever the unfinished header held.
            peer.reply(MsgType.ERROR, 0xDEAD, 0xBEEF, b"request not complete in 10000 ms",
                       status=12)
            peer.release.wait(10)
        peer, c = self.run_peer(script)
        gen = c.stream(ECHO, [b"1", b"2", b"3"], window=3)
        self.assertEqual(next(gen), b"1")
        with self.assertRaises(gpuframe.RequestTimeoutError) as cm:
            next(gen)
        e = cm.exception
        self.assertEqual((e.status, e.name, e.fatal, e.frame_id, e.index),
                         (12, "request_timeout", True, 0xDEAD, 1))
        self.assertIsInstance(e, gpuframe.FatalStatusError)
        self.assertTrue(c.closed)
        with self.assertRaises(gpuframe.ConnectionClosedError) as cm:
            c.list()
        self.assertIs(cm.exception.cause.cause, e)

    def test_bad_version_is_fatal(self):
        # What a daemon of another version answers (PROTOCOL.md, "Versioning").
        def script(peer):
            fid, t, pid, _ = peer.recv_request()
            peer.reply(MsgType.ERROR, fid, pid, b"version 1 is not 2", status=2)
            peer.release.wait(10)
        peer, c = self.run_peer(script)
        with self.assertRaises(gpuframe.BadVersionError) as cm:
            c.list()
        self.assertEqual((cm.exception.status, cm.exception.fatal), (2, True))
        self.assertTrue(c.closed)

    def test_silence_times_out_and_closes(self):
        def script(peer):
            peer.recv_request()
            peer.release.wait(10)
        peer, c = self.run_peer(script, timeout=0.2)
        with self.assertRaisesRegex(gpuframe.ClientTimeoutError,
                                    "the daemon sent and took nothing for 0.2 s with 1 requests"):
            c.stats()
        self.assertTrue(c.closed)

    def test_json_replies_and_their_errors(self):
        def script(peer):
            fid, t, pid, _ = peer.recv_request()
            assert (t, pid) == (MsgType.TRACE, 7), (t, pid)
            peer.reply(MsgType.TRACE, fid, pid, b'{"frames": []}')
            fid, t, pid, _ = peer.recv_request()
            peer.reply(MsgType.STATS, fid, pid, b"{not json")
            fid, t, pid, _ = peer.recv_request()
            peer.reply(MsgType.ERROR, fid, pid, b"stopping", status=9)
            for _ in range(2):  # list(), then the lookup of a name it lacks
                fid, t, pid, _ = peer.recv_request()
                peer.reply(MsgType.LIST, fid, pid, b'{"pipelines": []}')
            peer.release.wait(10)
        peer, c = self.run_peer(script)
        self.assertEqual(c.trace(7), {"frames": []})
        with self.assertRaisesRegex(gpuframe.ProtocolError, "STATS reply is not UTF-8 JSON"):
            c.stats()
        with self.assertRaises(gpuframe.ShuttingDownError) as cm:
            c.stats()
        self.assertEqual((cm.exception.status, cm.exception.text), (9, "stopping"))
        self.assertEqual(len(c.list()), 0)
        with self.assertRaises(gpuframe.NoSuchPipelineError):
            c.stream("echo", [])
        self.assertEqual([r[1] for r in peer.requests],
                         [MsgType.TRACE, MsgType.STATS, MsgType.STATS, MsgType.LIST, MsgType.LIST])

    def test_arguments_are_checked_before_anything_is_sent(self):
        peer, c = self.run_peer(echo_replies(0))
        for bad in (0, -1, 1.5, True):
            with self.assertRaises(ValueError):
                c.stream(ECHO, [], window=bad)
        with self.assertRaises(ValueError):
            c.stream(ECHO, [], errors="ignore")
        with self.assertRaises(ValueError):
            c.trace(1 << 32)
        with self.assertRaises(TypeError):
            c.stream(3.0, [])
        self.assertEqual(c.next_frame_id, 0)


REGION_BYTES = 1 << 16
F_GET_SEALS = 1034
SEALED = 0x0002 | 0x0004 | 0x0001  # F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL


def serve_region_add(peer, region_id=1, flags=0, reply_bytes=None):
    """Reads a REGION_ADD and checks it as PROTOCOL.md asks (version 2, 32
    bytes alone with exactly one sealed memfd); maps the memfd, answers with
    region info and returns the mapping."""
    version, fl, fid, t, pid, payload, fds, first = peer.recv_message()
    assert (version, t, fl, pid, payload) == (2, MsgType.REGION_ADD, 0, 0, b""), (version, t)
    assert (first, len(fds)) == (32, 1), (first, fds)
    fd = fds[0]
    try:
        assert fcntl.fcntl(fd, F_GET_SEALS) == SEALED
        size = os.fstat(fd).st_size
        assert os.readlink("/proc/self/fd/%d" % fd).startswith("/memfd:gpuframe-region")
        m = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    peer.reply(MsgType.REGION_ADD, fid, 0,
               struct.pack("<IIQ", region_id, flags, size if reply_bytes is None else reply_bytes),
               version=2)
    return m


def recv_shm_frame(peer):
    """Reads a frame by reference: (frame_id, pipeline_id, region_id,
    in_offset, in_bytes, out_offset, out_capacity)."""
    version, flags, fid, t, pid, payload, fds, first = peer.recv_message()
    assert (version, flags, t, len(payload), fds) == (2, 1, MsgType.FRAME, 40, []), \
        (version, flags, t, len(payload))
    region_id, reserved, in_off, in_bytes, out_off, cap = struct.unpack("<IIQQQQ", payload)
    assert reserved == 0
    return fid, pid, region_id, in_off, in_bytes, out_off, cap


def shm_result(peer, fid, pid, region_id, out_off, out_bytes, reserved=0, flags=1):
    peer.reply(MsgType.RESULT, fid, pid, struct.pack("<IIQQ", region_id, reserved, out_off,
                                                     out_bytes), version=2, flags=flags)


class ShmPeerTest(PeerCase):
    """Regions and frames by reference on the wire, and the replies to them
    that a client must refuse."""

    def test_versions_flags_and_the_fd_on_the_wire(self):
        def script(peer):
            fid, t, pid, payload = peer.recv_request()  # version 1: the socket path
            peer.reply(MsgType.RESULT, fid, pid, payload)
            m = serve_region_add(peer, region_id=5, flags=1)
            for _ in range(2):
                fid, t, pid, payload = peer.recv_request()
                peer.reply(MsgType.RESULT, fid, pid, payload)
                fid, pid, rid, in_off, n, out_off, cap = recv_shm_frame(peer)
                assert (rid, pid, cap) == (5, 0, REGION_BYTES - out_off), (rid, pid, cap)
                # "The daemon" writes the output straight into the memfd.
                m[out_off:out_off + n] = m[in_off:in_off + n][::-1]
                shm_result(peer, fid, pid, rid, out_off, n)
            version, flags, fid, t, pid, payload, fds, first = peer.recv_message()
            assert (version, flags, t, pid, payload, fds) == (2, 0, MsgType.REGION_REMOVE, 5,
                                                              b"", [])
            peer.reply(MsgType.REGION_REMOVE, fid, pid, version=2)
            fid, t, pid, payload = peer.recv_request()
            peer.reply(MsgType.STATS, fid, pid, b"{}")
            m.close()
        peer, c = self.run_peer(script)
        self.assertEqual(c.process(ECHO, b"v1"), b"v1")
        r = c.region(REGION_BYTES)
        self.assertEqual((r.id, r.pinned, r.nbytes), (5, True, REGION_BYTES))
        x = r.array(np.uint8, 7, 6)
        x[:] = np.arange(6)
        out = c.map(ECHO, [b"abc", r.frame(x, 100), np.arange(3, dtype=np.int16),
                           r.frame(x, 200)], window=4)
        self.assertEqual(out[0], b"abc")
        self.assertEqual(out[2].tolist(), [0, 1, 2])
        for y, offset in ((out[1], 100), (out[3], 200)):
            self.assertEqual(y.tolist(), [5, 4, 3, 2, 1, 0])  # what the peer wrote
            self.assertEqual(r.offset_of(y), offset)
        r.close()
        self.assertEqual(c.stats(), {})
        self.assertEqual([q[1] for q in peer.requests],
                         [MsgType.FRAME, MsgType.REGION_ADD] + [MsgType.FRAME] * 4
                         + [MsgType.REGION_REMOVE, MsgType.STATS])

    def test_a_result_descriptor_that_does_not_match_fails_that_frame(self):
        bad = [
            dict(region_id=2), dict(out_off=101), dict(out_bytes=7), dict(out_bytes=5),
            dict(reserved=1),
        ]

        def script(peer):
            serve_region_add(peer)
            for kw in bad + [{}]:
                fid, pid, rid, in_off, n, out_off, cap = recv_shm_frame(peer)
                args = dict(region_id=rid, out_off=out_off, out_bytes=n)
                args.update(kw)
                shm_result(peer, fid, pid, args.pop("region_id"), args.pop("out_off"),
                           args.pop("out_bytes"), **args)
            peer.release.wait(10)
        peer, c = self.run_peer(script)
        r = c.region(REGION_BYTES)
        x = r.array(np.uint8, 0, 6)
        out = c.map(ECHO, [r.frame(x, 100)] * (len(bad) + 1), window=3, errors="yield")
        for e, why in zip(out, ["says region 2 offset 100 bytes 6, but the frame asked for "
                                "region 1 offset 100 bytes 6",
                                "says region 1 offset 101", "bytes 7", "bytes 5",
                                "reserved bytes 0x00000001"]):
            self.assertIsInstance(e, gpuframe.ProtocolError)
            self.assertIn(why, str(e))
        self.assertEqual(r.offset_of(out[-1]), 100)
        self.assertFalse(c.closed)

    def test_a_result_on_a_closed_region_fails_that_frame(self):
        def script(peer):
            serve_region_add(peer).close()
            version, flags, fid, t, pid, payload, fds, first = peer.recv_message()
            assert (version, t, pid) == (2, MsgType.REGION_REMOVE, 1)
            peer.reply(MsgType.REGION_REMOVE, fid, pid, version=2)
            # A daemon must answer unknown_region here; this one does not.
            fid, pid, rid, in_off, n, out_off, cap = recv_shm_frame(peer)
            shm_result(peer, fid, pid, rid, out_off, n)
            fid, t, pid, payload = peer.recv_request()
            peer.reply(MsgType.RESULT, fid, pid, payload)
        peer, c = self.run_peer(script)
        r = c.region(REGION_BYTES)
        stale = gpuframe.ShmFrame(r, 0, 8, 100)
        r.close()
        with self.assertRaisesRegex(gpuframe.ProtocolError,
                                    "RESULT for frame_id 2 of region 1, which is closed here"):
            c.process(ECHO, stale)
        self.assertEqual(c.process(ECHO, b"on"), b"on")

    def test_a_result_without_the_shm_flag_or_version_closes(self):
        cases = [
            (dict(version=2), "RESULT with flags 0x0000 to a FRAME sent with flags 0x0001"),
            (dict(version=1), "reply of protocol version 1 to a version-2 request"),
        ]
        for kw, why in cases:
            with self.subTest(why):
                def script(peer):
                    serve_region_add(peer)
                    fid, pid, rid, in_off, n, out_off, cap = recv_shm_frame(peer)
                    peer.reply(MsgType.RESULT, fid, pid, b"x" * n, **kw)
                    peer.release.wait(10)
                peer, c = self.run_peer(script)
                r = c.region(REGION_BYTES)
                with self.assertRaisesRegex(gpuframe.ProtocolError, why):
                    c.process(ECHO, r.frame(r.array(np.uint8, 0, 6), 100))
                self.assertTrue(c.closed)
                # The daemon forgot the region with the connection; here it
                # stays mapped until closed, which needs no daemon.
                self.assertFalse(r.closed)
                r.close()
                self.assertTrue(r.closed)

    def test_a_region_add_reply_of_another_size_closes(self):
        def script(peer):
            serve_region_add(peer, reply_bytes=REGION_BYTES // 2)
            peer.release.wait(10)
        peer, c = self.run_peer(script)
        with self.assertRaisesRegex(gpuframe.ProtocolError,
                                    "says region 1 of 32768 bytes for a new region of 65536"):
            c.region(REGION_BYTES)
        self.assertTrue(c.closed)

    def test_a_daemon_without_regions_refuses_with_bad_version(self):
        def script(peer):
            version, flags, fid, t, pid, payload, fds, first = peer.recv_message()
            for fd in fds:
                os.close(fd)
            # A version-1 daemon answers in its own version and closes.
            peer.reply(MsgType.ERROR, fid, pid, b"version 2 is not 1", status=2)
        peer, c = self.run_peer(script)
        with self.assertRaises(gpuframe.BadVersionError) as cm:
            c.region(4096)
        self.assertEqual((cm.exception.status, cm.exception.fatal), (2, True))
        self.assertTrue(c.closed)

    def test_regions_wait_for_a_live_stream(self):
        go = threading.Event()

        def script(peer):
            serve_region_add(peer)
            frames = [recv_shm_frame(peer) for _ in range(3)]
            for i, (fid, pid, rid, in_off, n, out_off, cap) in enumerate(frames):
                if i == 1:
                    go.wait(10)  # the rest only once the client found itself busy
                shm_result(peer, fid, pid, rid, out_off, n)
            version, flags, fid, t, pid, payload, fds, first = peer.recv_message()
            assert (version, t, pid) == (2, MsgType.REGION_REMOVE, 1)
            peer.reply(MsgType.REGION_REMOVE, fid, pid, version=2)
            serve_region_add(peer, region_id=2).close()
            peer.release.wait(10)
        peer, c = self.run_peer(script)
        r = c.region(REGION_BYTES)
        x = r.array(np.uint8, 0, 6)
        gen = c.stream(ECHO, [r.frame(x, 100 * k) for k in (1, 2, 3)], window=3)
        first = next(gen)
        self.assertEqual(c.in_flight, 2)
        frame_id = c.next_frame_id
        with self.assertRaisesRegex(gpuframe.BusyError,
                                    "adding a region needs the connection to itself, but 2 "
                                    "requests of a stream are in flight"):
            c.region(4096)
        with self.assertRaisesRegex(gpuframe.BusyError, "removing region 1"):
            r.close()
        self.assertIsInstance(gpuframe.BusyError("x"), RuntimeError)
        self.assertEqual((r.closed, c.next_frame_id), (False, frame_id))  # nothing sent
        go.set()
        rest = list(gen)
        self.assertEqual([r.offset_of(y) for y in [first] + rest], [100, 200, 300])
        r.close()
        self.assertEqual(c.region(4096).id, 2)


def gpuframe_command():
    """The build's gpuframe command, beside $GF_TEST_DAEMON, or None."""
    daemon = os.environ.get("GF_TEST_DAEMON")
    path = daemon and os.path.join(os.path.dirname(daemon), "gpuframe")
    return path if path and os.access(path, os.X_OK) else None


class ConnectTest(unittest.TestCase):
    """A failed connect says what is wrong and what to do, in the words of
    libgpuframe's gf_client_connect_error (checked against the gpuframe
    command where the build's is at hand)."""

    HOW = "pass Client(path) / set GPUFRAMED_SOCKET"

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gfpyconn.", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.dir)
        self.path = os.path.join(self.dir, "s.sock")

    def connect_text(self, exc_type):
        with self.assertRaises(exc_type) as cm:
            gpuframe.Client(self.path)
        text = cm.exception.strerror
        self.assertEqual(str(cm.exception), "[Errno %d] %s" % (cm.exception.errno, text))
        command = gpuframe_command()
        if command is not None:  # the C library says the same, but for how to point elsewhere
            done = subprocess.run([command, "list", "--socket", self.path], capture_output=True,
                                  text=True, timeout=60)
            self.assertEqual(done.returncode, 1)
            self.assertEqual(done.stderr, "gpuframe: %s\n" % text.replace(
                self.HOW, "pass --socket PATH / set GPUFRAMED_SOCKET"))
        return text

    def test_missing_socket_says_start_the_daemon(self):
        self.assertEqual(
            self.connect_text(FileNotFoundError),
            "cannot connect to %s: no such socket: is gpuframed running? start it (systemctl "
            "start gpuframed), or %s" % (self.path, self.HOW))

    def test_stale_socket_says_nobody_listens(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.path)
        s.close()
        self.assertEqual(
            self.connect_text(ConnectionRefusedError),
            "cannot connect to %s: a socket file is there but no daemon listens: gpuframed "
            "stopped without removing it, or crashed; start it (systemctl start gpuframed), or %s"
            % (self.path, self.HOW))
        os.unlink(self.path)
        with open(self.path, "w") as f:
            f.write("not a socket\n")
        self.assertEqual(self.connect_text(ConnectionRefusedError),
                         "cannot connect to %s: that is not a socket: %s" % (self.path, self.HOW))

    def connect_as_nobody(self, gid):
        """What a client of user 65534, in none of the socket's groups, is told
        about a socket root:``gid`` mode 0660 (skips without root)."""
        import pwd
        try:
            nobody = pwd.getpwuid(65534)
        except KeyError:
            self.skipTest("no user 65534")
        if os.geteuid() != 0 or nobody.pw_gid == gid:
            self.skipTest("needs root, to connect as another user")
        os.chmod(self.dir, 0o755)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(listener.close)
        listener.bind(self.path)
        listener.listen(1)
        os.chown(self.path, 0, gid)
        os.chmod(self.path, 0o660)
        code = ("import gpuframe\ntry:\n    gpuframe.Client(%r)\n"
                "except PermissionError as e:\n    print(e.strerror)\n" % self.path)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, user=65534, group=nobody.pw_gid, extra_groups=[],
                              env=dict(os.environ, PYTHONPATH=os.path.dirname(
                                  os.path.dirname(gpuframe.__file__))))
        self.assertEqual(done.stderr, "")
        return done.stdout

    def test_permission_names_the_group_to_join(self):
        import grp
        try:
            other = grp.getgrgid(1)
        except KeyError:
            self.skipTest("no group 1")
        self.assertEqual(
            self.connect_as_nobody(other.gr_gid),
            "cannot connect to %s: permission denied: the socket admits user root and group %s "
            "(mode 0660): join group %s (sudo usermod -aG %s $USER, then log in again)\n"
            % (self.path, other.gr_name, other.gr_name, other.gr_name))

    def test_permission_never_sends_to_group_root(self):
        import grp
        root = grp.getgrgid(0).gr_name
        self.assertEqual(
            self.connect_as_nobody(0),
            "cannot connect to %s: permission denied: the socket admits user root and group %s "
            "(mode 0660), and group %s grants far more than this socket: do not join it; have the "
            "daemon give its socket a group of its own (socket_group or --socket-group, or the "
            "socket unit's SocketGroup=; gpuframed by default), then join that group\n"
            % (self.path, root, root))

    def test_import_without_numpy_says_what_to_do(self):
        code = "import sys\nsys.modules['numpy'] = None\nimport gpuframe\n"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, env=dict(os.environ, PYTHONPATH=os.path.dirname(
                                  os.path.dirname(gpuframe.__file__))))
        self.assertNotEqual(done.returncode, 0)
        self.assertIn(
            "ImportError: gpuframe needs NumPy, which this interpreter (%s, Python %d.%d) cannot "
            "import: install it there (python3 -m pip install numpy), or use Debian's "
            "/usr/bin/python3, for which scripts/setup.sh installs python3-numpy (in a venv: "
            "python3 -m venv --system-site-packages)" % ((sys.executable,) + sys.version_info[:2]),
            done.stderr)

    def test_default_path_is_the_environment_then_run(self):
        from unittest import mock
        with mock.patch.dict(os.environ, {"GPUFRAMED_SOCKET": "/x/y.sock"}):
            self.assertEqual(gpuframe.default_socket_path(), "/x/y.sock")
        with mock.patch.dict(os.environ, {"GPUFRAMED_SOCKET": ""}):
            self.assertEqual(gpuframe.default_socket_path(), "/run/gpuframed.sock")
        env = {k: v for k, v in os.environ.items() if k != "GPUFRAMED_SOCKET"}
        with mock.patch.dict(os.environ, env, clear=True):
            self.assertEqual(gpuframe.default_socket_path(), "/run/gpuframed.sock")

    def test_client_uses_the_environment(self):
        from unittest import mock
        peer = Peer(echo_replies(1))
        self.addCleanup(peer.join)
        with mock.patch.dict(os.environ, {"GPUFRAMED_SOCKET": peer.path}):
            with gpuframe.Client(timeout=5) as c:
                self.assertEqual(c.path, peer.path)
                self.assertEqual(c.process(ECHO, b"hi"), b"hi")
            self.assertTrue(c.closed)


if __name__ == "__main__":
    unittest.main(verbosity=2)
