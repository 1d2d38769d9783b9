"""The client against a scripted peer: replies a real daemon never sends
(unknown status codes, replies out of order, malformed headers, silence,
a close in the middle), each checked for the exact error and whether the
connection survives it, as PROTOCOL.md prescribes."""

import os
import shutil
import socket
import struct
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


class PeerTest(unittest.TestCase):

    def run_peer(self, script, timeout=5.0):
        peer = Peer(script)
        self.addCleanup(peer.join)
        c = gpuframe.Client(peer.path, timeout=timeout)
        self.addCleanup(c.close)
        return peer, c

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


class ConnectTest(unittest.TestCase):

    def test_missing_socket_names_the_path(self):
        with self.assertRaises(FileNotFoundError) as cm:
            gpuframe.Client("/nonexistent/gpuframed.sock")
        self.assertEqual(cm.exception.filename, "/nonexistent/gpuframed.sock")

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
