# SPDX-License-Identifier: MIT
"""The gpuframed client: connect, look pipelines up, stream frames through them,
by value over the socket or by reference in shared-memory regions."""

from __future__ import annotations

import errno
import grp
import json
import mmap
import os
import pwd
import socket
import stat
import time
from collections import deque
from types import TracebackType
from typing import (TYPE_CHECKING, Any, Deque, Dict, Iterable, Iterator, List, Optional, Tuple,
                    Type, Union, overload)

import numpy as np

from . import protocol
from .connection import Connection
from .connection import Request
from .errors import BusyError, ConnectionClosedError, GpuframeError, ProtocolError, StatusError
from .pipelines import Frame, Pipeline, Pipelines, Result, encode_frame
from .protocol import MsgType
from .device import DeviceFrame, DeviceRegion, add_device_region, encode_device
from .shm import FrameBuffers, Region, ShmFrame, create_memfd, encode_shm

if TYPE_CHECKING:
    from typing import Literal

    import numpy.typing as npt

__all__ = ["Client", "default_socket_path", "connect_error", "SOCKET_ENV", "DEFAULT_SOCKET",
           "PipelineKey", "AnyFrame"]

#: What names a pipeline: its name, its id, or a :class:`Pipeline`.
PipelineKey = Union[str, int, "np.integer[Any]", Pipeline]
#: A frame of :meth:`Client.stream`: by value, or by reference in a region.
AnyFrame = Union[Frame, ShmFrame, DeviceFrame]
#: Frames whose results are arrays: NumPy arrays and frames by reference.
_ArrayFrame = Union["npt.NDArray[Any]", ShmFrame]
#: Frames whose results are bytearrays.
_BytesFrame = Union[bytes, bytearray, memoryview]

#: The environment variable naming the daemon's socket (as for ``gpuframe``).
SOCKET_ENV = "GPUFRAMED_SOCKET"
#: Where the daemon listens when nothing else says (gpuframed.socket's path).
DEFAULT_SOCKET = "/run/gpuframed.sock"
#: Seconds a wait may go without any byte moving, as ``gpuframe``'s default.
DEFAULT_TIMEOUT_S = 30.0
#: Frames in flight in :meth:`Client.stream` unless the caller says otherwise.
DEFAULT_WINDOW = 16
#: Largest LIST/STATS/TRACE document (or result of an unknown kind) accepted.
DEFAULT_MAX_REPLY_BYTES = 1 << 30

_U32_MAX = 0xFFFFFFFF
_ERRORS_MODES = ("raise", "yield")
#: The longest deadline set_frame_options takes, in seconds: within what a
#: deadline on the wire names (PROTOCOL.md, version 3).
_DEADLINE_MAX_S = 1800


def default_socket_path() -> str:
    """$GPUFRAMED_SOCKET when set and not empty, else /run/gpuframed.sock."""
    return os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET


#: How a Python program is pointed at another socket, in connect errors.
_HOW_TO_POINT = "pass Client(path) / set " + SOCKET_ENV
#: The longest socket path Linux takes (sun_path less its NUL).
_SUN_PATH_MAX = 107
#: What starts the daemon, in every explanation that needs it started.
_START_HINT = "start it (systemctl start gpuframed)"


#: Groups that grant far more than a socket: telling a user to join one of
#: them to reach gpuframed would be a remedy worse than the problem (gid 0
#: whatever its name).  libgpuframe's connect_error.c has the same list.
_PRIVILEGED_GROUPS = frozenset(("root", "wheel", "sudo", "admin", "adm", "shadow", "disk", "kmem",
                                "docker", "lxd", "libvirt"))


def _in_user_groups(gid: int) -> Tuple[bool, bool]:
    """(the user database lists this user in group ``gid``, this process
    runs with it)."""
    listed = False
    try:
        me = pwd.getpwuid(os.geteuid())
        listed = me.pw_gid == gid or gid in os.getgrouplist(me.pw_name, me.pw_gid)
    except (KeyError, OSError):
        pass
    return listed, os.getegid() == gid or gid in os.getgroups()


def _permission_text(path: str) -> str:
    """The permission problem at ``path``: a directory on it, the socket's
    mode, or the user's groups (libgpuframe's connect_error.c, word for
    word)."""
    try:
        st = os.stat(path)
    except OSError:
        return ("cannot connect to %s: permission denied on a directory on its path: ask its "
                "owner for access, or %s" % (path, _HOW_TO_POINT))
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = "uid %d" % st.st_uid
    try:
        group = grp.getgrgid(st.st_gid).gr_name
    except KeyError:
        group = "gid %d" % st.st_gid
    mode = stat.S_IMODE(st.st_mode)
    listed, session = _in_user_groups(st.st_gid)
    if not mode & stat.S_IWGRP:
        return ("cannot connect to %s: permission denied: the socket's mode %04o lets only its "
                "owner %s connect (the daemon's socket_mode, or its socket unit's SocketMode=, "
                "decides; 0660 admits group %s)" % (path, mode, owner, group))
    if listed and not session:
        return ("cannot connect to %s: permission denied: you are in group %s, which may connect, "
                "but this login session began before you joined it: log in again (or run "
                "'newgrp %s')" % (path, group, group))
    if not session and (st.st_gid == 0 or group in _PRIVILEGED_GROUPS):
        return ("cannot connect to %s: permission denied: the socket admits user %s and group %s "
                "(mode %04o), and group %s grants far more than this socket: do not join it; have "
                "the daemon give its socket a group of its own (socket_group or --socket-group, "
                "or the socket unit's SocketGroup=; gpuframed by default), then join that group"
                % (path, owner, group, mode, group))
    if not session:
        return ("cannot connect to %s: permission denied: the socket admits user %s and group %s "
                "(mode %04o): join group %s (sudo usermod -aG %s $USER, then log in again)"
                % (path, owner, group, mode, group, group))
    return ("cannot connect to %s: permission denied, though you are in its group %s (mode "
            "%04o): a directory on its path or a security module refuses" % (path, group, mode))


def connect_error(path: str, err: int) -> str:
    """Says why connecting to the socket ``path`` failed with errno ``err``
    and what to do, in the words of libgpuframe's gf_client_connect_error: no
    socket there (is gpuframed running?), a socket nobody listens on, a
    permission problem (join the socket's group, or log in again)."""
    if err in (errno.ENOENT, errno.ENOTDIR):
        return ("cannot connect to %s: no such socket: is gpuframed running? %s, or %s"
                % (path, _START_HINT, _HOW_TO_POINT))
    if err == errno.ECONNREFUSED:
        try:
            is_socket = stat.S_ISSOCK(os.stat(path).st_mode)
        except OSError:
            is_socket = True
        if not is_socket:
            return "cannot connect to %s: that is not a socket: %s" % (path, _HOW_TO_POINT)
        return ("cannot connect to %s: a socket file is there but no daemon listens: gpuframed "
                "stopped without removing it, or crashed; %s, or %s"
                % (path, _START_HINT, _HOW_TO_POINT))
    if err in (errno.EACCES, errno.EPERM):
        return _permission_text(path)
    if err == errno.ENAMETOOLONG:
        return ("cannot connect to %s: the path has %d bytes; a socket's has at most %d"
                % (path, len(os.fsencode(path)), _SUN_PATH_MAX))
    return "cannot connect to %s: %s" % (path, os.strerror(err))


class Client:
    """One connection to gpuframed over its Unix socket.

    ``path`` is the daemon's socket (default: :func:`default_socket_path`).
    ``timeout`` is how many seconds any call may wait without a byte moving
    before it gives up, closes the connection and raises ClientTimeoutError
    (None: wait for ever).  ``max_reply_bytes`` caps a JSON reply.  Connecting
    raises the OSError of connect() (FileNotFoundError, PermissionError,
    ConnectionRefusedError, ...) with :func:`connect_error`'s text: the path,
    what is wrong and what to do.

    Use it as a context manager, or call :meth:`close`.  A client is not
    thread-safe; use one per thread.  Requests of every kind may be mixed: a
    :meth:`stats` call while a :meth:`stream` is suspended is answered after
    the frames already sent, which it also collects for the stream.

    Frame ids are a per-connection counter from 0 shared by every request
    (``next_frame_id`` is the next one), which is what TRACE reports.

    Every request is sent in protocol version 1 except the shared-memory
    ones (:meth:`region`, frames given as :class:`ShmFrame`), which need
    version 2, frames sent after :meth:`set_frame_options` asked for a
    deadline or ``latest_only``, which need version 3, and device regions
    (:meth:`device_region`, frames given as :class:`DeviceFrame`), version
    4; a client that uses none of them works with a version-1 daemon.
    """

    def __init__(self, path: Union[None, str, "os.PathLike[str]"] = None, *,
                 timeout: Optional[float] = DEFAULT_TIMEOUT_S,
                 max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> None:
        self.path: str = default_socket_path() if path is None else os.fspath(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(self.path)
        except OSError as e:
            sock.close()
            code = e.errno
            if code is None:  # Python refuses a path longer than sun_path itself
                code = errno.ENAMETOOLONG
            raise OSError(code, connect_error(self.path, code)) from None
        self._conn = Connection(sock, timeout=timeout, version=protocol.VERSION,
                                max_reply_bytes=max_reply_bytes)
        self._pipelines: Optional[Pipelines] = None
        # id -> the open regions of this connection, of either kind
        self._regions: Dict[int, Union[Region, DeviceRegion]] = {}
        self._deadline_ns = 0  # set_frame_options: each frame's deadline after it is sent
        self._latest_only = False
        self._class_flags = 0

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<gpuframe.Client %s%s>" % (self.path, " closed" if self.closed else "")

    def close(self) -> None:
        """Closes the connection.  Requests without a reply fail; later calls
        raise ConnectionClosedError.  Its regions are closed too (the daemon
        removes them with the connection; views of them stay valid).
        Closing twice is harmless."""
        self._conn.close()
        for region in list(self._regions.values()):
            region._release()

    @property
    def closed(self) -> bool:
        """True once the connection is closed, by :meth:`close`, by the daemon
        or after a fatal error."""
        return self._conn.closed

    @property
    def timeout(self) -> Optional[float]:
        """Seconds a call may wait without progress (None: for ever)."""
        return self._conn.timeout

    @timeout.setter
    def timeout(self, value: Optional[float]) -> None:
        self._conn.timeout = value

    @property
    def in_flight(self) -> int:
        """Requests sent or queued whose replies have not arrived yet."""
        return self._conn.in_flight

    @property
    def next_frame_id(self) -> int:
        """The frame_id the next request will carry."""
        return self._conn.next_frame_id

    def set_frame_options(self, deadline: Optional[float] = None, *,
                          latest_only: bool = False, priority: Optional[str] = None) -> None:
        """Scheduling options of every frame sent from now on (protocol
        version 3; a daemon older than it answers ``bad_version`` and closes).

        ``deadline``: seconds after a frame is queued by which it must be on
        the daemon's engine; one that is not is answered ``deadline_exceeded``
        (:class:`DeadlineExceededError`) without its result.  At most 1800.
        ``latest_only``: only the newest frame matters (a live camera): a
        frame still waiting in the daemon is answered ``superseded``
        (:class:`SupersededError`) at once when the next frame of the same
        pipeline and length comes, which runs in its place.  Every frame still
        gets one reply, in order; pass ``errors="yield"`` to :meth:`stream` to
        go on past them.  ``priority``: ``"realtime"``, ``"normal"`` or
        ``"batch"``, the frames' class, at most what the daemon's
        ``priorities`` give this user (asking for more gets that).  ``None``
        and ``False`` (the default) send plain frames.
        """
        if priority is not None and priority not in protocol.CLASSES[1:]:
            raise ValueError("priority must be realtime, normal or batch, not %r" % (priority,))
        if deadline is not None and not 0 < deadline <= _DEADLINE_MAX_S:
            raise ValueError("deadline must be in (0, %d] seconds, not %r"
                             % (_DEADLINE_MAX_S, deadline))
        self._deadline_ns = 0 if deadline is None else max(1, int(deadline * 1e9))
        self._latest_only = bool(latest_only)
        self._class_flags = (0 if priority is None else
                             protocol.CLASSES.index(priority) << protocol.CLASS_SHIFT)

    # ---- LIST, STATS, TRACE -------------------------------------------------------

    def _request(self, msg_type: int, pipeline_id: int = 0, *, version: Optional[int] = None,
                 fd: Optional[int] = None) -> bytearray:
        """Sends one request without payload, waits for its reply and returns
        the reply's payload as a bytearray (raises the reply's error)."""
        req = self._conn.submit(msg_type, pipeline_id, version=version, fd=fd)
        self._conn.wait(req)
        if req.error is not None:
            raise req.error
        result: bytearray = req.result
        return result

    def _request_json(self, msg_type: int, pipeline_id: int = 0) -> Any:
        payload = self._request(msg_type, pipeline_id)
        try:
            return json.loads(payload)
        except ValueError as e:  # UnicodeDecodeError and JSONDecodeError alike
            raise ProtocolError("%s reply is not UTF-8 JSON: %s"
                                % (MsgType(msg_type).name, e)) from e

    def list(self) -> Pipelines:
        """Asks the daemon for its pipelines (LIST) and returns them as
        :class:`Pipelines`: by position, by name (``p["echo"]``), ``ids``
        (name -> id) and ``by_id``.  Also refreshes the table that
        :meth:`stream` resolves names with."""
        doc = self._request_json(MsgType.LIST)
        self._pipelines = Pipelines.from_json(doc)
        return self._pipelines

    def stats(self) -> Dict[str, Any]:
        """The daemon's counters (STATS) as a dict; daemon/STATS.md lists the
        keys.  Ignore keys you do not know: they are only ever added."""
        doc = self._request_json(MsgType.STATS)
        if not isinstance(doc, dict):
            raise ProtocolError("STATS reply is not a JSON object")
        return doc

    def trace(self, max_frames: int = 0) -> Dict[str, Any]:
        """Stage timestamps of the last ``max_frames`` frames answered (0:
        every frame the daemon keeps), oldest first, as a dict
        (daemon/STATS.md, TRACE)."""
        n = int(max_frames)
        if not 0 <= n <= _U32_MAX:
            raise ValueError("max_frames must be in [0, %d], not %d" % (_U32_MAX, n))
        doc = self._request_json(MsgType.TRACE, n)
        if not isinstance(doc, dict):
            raise ProtocolError("TRACE reply is not a JSON object")
        return doc

    def pipeline(self, key: PipelineKey) -> Pipeline:
        """The :class:`Pipeline` that ``key`` names: a Pipeline (returned as
        is), a name (looked up in LIST, fetched when needed; raises
        NoSuchPipelineError when the daemon has none of that name), or an id
        (an id the LIST lacks is still sent, and the daemon answers
        ``unknown_pipeline``)."""
        if isinstance(key, Pipeline):
            return key
        if isinstance(key, str):
            pipelines = self._pipelines
            if pipelines is None or key not in pipelines:
                pipelines = self.list()
            return pipelines[key]
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            pid = int(key)
            if not 0 <= pid <= _U32_MAX:
                raise ValueError("a pipeline id is in [0, %d], not %d" % (_U32_MAX, pid))
            pipelines = self._pipelines if self._pipelines is not None else self.list()
            found = pipelines.by_id(pid)
            return found if found is not None else Pipeline(pid, None, None)
        raise TypeError("a pipeline is a name, an id or a Pipeline, not %s"
                        % type(key).__name__)

    # ---- shared-memory regions ---------------------------------------------------

    def region(self, nbytes: int, *, name: str = "gpuframe-region") -> Region:
        """Creates a shared-memory :class:`Region` of ``nbytes`` bytes and
        hands it to the daemon (REGION_ADD, version 2): a memfd sealed
        against shrinking and growing, mapped here, sent as SCM_RIGHTS with
        the request's 32 bytes alone.  Waits for the daemon's reply, which on
        the CUDA engine comes once the region is page-locked (about a
        millisecond per MiB).  ``name`` shows in /proc/PID/fd.

        Needs the connection to itself: raises BusyError while frames of a
        stream are in flight (replies due to abandoned streams are read
        first).  The daemon's refusal raises RegionLimitError (over
        max_regions or max_shm_bytes) or BadRegionError, and the connection
        goes on; BadVersionError means a daemon without regions (fatal).
        System failures raise OSError.
        """
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) \
                or not 0 < nbytes < 1 << 64:
            raise ValueError("a region has 1 to 2**64 - 1 bytes, not %r" % (nbytes,))
        nbytes = int(nbytes)
        self._require_idle("adding a region")
        fd = create_memfd(nbytes, name)
        mapping: Optional[mmap.mmap] = None
        try:
            mapping = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            info = self._region_add(fd)
        except BaseException:
            if mapping is not None:
                mapping.close()
            raise
        finally:
            # mmap keeps a descriptor of its own, the daemon its own mapping.
            os.close(fd)
        if info.region_bytes != nbytes or info.region_id in self._regions:
            err = ProtocolError(
                "REGION_ADD reply says region %d of %d bytes for a new region of %d bytes"
                % (info.region_id, info.region_bytes, nbytes))
            mapping.close()
            self._conn.close(err)
            raise err
        region = Region(self, info, mapping)
        self._regions[region.id] = region
        return region

    def frame_buffers(self, count: int, nbytes: int, out_nbytes: Optional[int] = None, *,
                      name: str = "gpuframe-frames") -> FrameBuffers:
        """``count`` shared-memory frame buffers (:class:`FrameBuffers`) in one
        new :meth:`region`: each an input of ``nbytes`` bytes that a producer
        fills in place and an output of ``out_nbytes`` (default ``nbytes``;
        give more for a pipeline whose result is larger, as normalize_u8's,
        four times its input).  Raises as :meth:`region` does, and ValueError
        for a count below 1 or a negative size."""
        if out_nbytes is None:
            out_nbytes = nbytes
        for what, n in (("count", count), ("nbytes", nbytes), ("out_nbytes", out_nbytes)):
            if isinstance(n, bool) or not isinstance(n, (int, np.integer)) \
                    or n < (1 if what == "count" else 0):
                raise ValueError("%s must be an integer >= %d, not %r"
                                 % (what, 1 if what == "count" else 0, n))
        count, nbytes, out_nbytes = int(count), int(nbytes), int(out_nbytes)
        region = self.region(FrameBuffers.region_bytes(count, nbytes, out_nbytes), name=name)
        return FrameBuffers(region, count, nbytes, out_nbytes)

    def device_region(self, nbytes: int, device: int = 0) -> DeviceRegion:
        """Makes a :class:`DeviceRegion` of at least ``nbytes`` on CUDA device
        ``device`` (this process's ordinal) with the CUDA driver, loaded
        here on first use, and hands it to the daemon (DEVICE_REGION_ADD,
        version 4), which maps it once.  Raises DeviceUnavailableError
        without a driver or device here, BadRegionError when the daemon
        cannot map it (the cpu engine has no device memory; the text says
        why), RegionLimitError, BusyError as :meth:`region`."""
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) \
                or not 0 < nbytes < 1 << 63:
            raise ValueError("a device region has 1 to 2**63 - 1 bytes, not %r" % (nbytes,))
        self._require_idle("adding a device region")

        def request(payload: bytes, fd: int) -> bytearray:
            req = self._conn.submit(MsgType.DEVICE_REGION_ADD, 0, memoryview(payload),
                                    version=protocol.VERSION_DEVICE, fd=fd)
            self._conn.wait(req)
            if req.error is not None:
                raise req.error
            result: bytearray = req.result
            return result

        region_id, alloc = add_device_region(request, int(nbytes), int(device))
        region = DeviceRegion(self, region_id, alloc)
        self._regions[region_id] = region
        return region

    def _region_add(self, fd: Optional[int]) -> protocol.RegionInfo:
        """REGION_ADD with the descriptor ``fd`` (None: without one, which
        the daemon refuses); returns the reply's protocol.RegionInfo."""
        self._require_idle("adding a region")
        payload = self._request(MsgType.REGION_ADD, 0, version=protocol.VERSION_SHM, fd=fd)
        return protocol.decode_region_info(payload)

    def _region_remove(self, region: Union[Region, DeviceRegion]) -> None:
        """REGION_REMOVE of ``region``, then its mapping released here.
        Raises BusyError, changing nothing, while frames of a stream are in
        flight.  A closed connection took its regions with it: then only the
        mapping is released, and without an error."""
        conn = self._conn
        live = 0 if conn.closed else conn.live()
        if live:
            raise BusyError(
                "removing region %d needs the connection to itself, but %d requests of a "
                "stream are in flight: finish or close the stream first" % (region.id, live))
        try:
            conn.wait_all()  # replies due to abandoned streams, on the region too
            if not conn.closed:
                self._request(MsgType.REGION_REMOVE, region.id, version=protocol.VERSION_SHM)
        except ConnectionClosedError:
            pass
        finally:
            region._release()

    def _region_forget(self, region: Union[Region, DeviceRegion]) -> None:
        """Drops ``region`` from the open regions (its _release calls this)."""
        self._regions.pop(region.id, None)

    def _require_idle(self, what: str) -> None:
        """Returns once no request is in flight, after reading the replies
        due to abandoned streams; raises BusyError, sending nothing, while a
        stream still waits for frames, and ConnectionClosedError when the
        connection is closed."""
        conn = self._conn
        if not conn.closed:
            live = conn.live()
            if live:
                raise BusyError(
                    "%s needs the connection to itself, but %d requests of a stream are in "
                    "flight: finish or close the stream first" % (what, live))
            conn.wait_all()
        if conn.closed:
            raise ConnectionClosedError("the client is closed", conn.closed_error)

    # ---- frames -----------------------------------------------------------------------

    @overload
    def stream(self, pipeline: PipelineKey, frames: Iterable[_ArrayFrame],
               window: int = ..., *,
               errors: Literal["raise"] = ...) -> Iterator[npt.NDArray[Any]]: ...

    @overload
    def stream(self, pipeline: PipelineKey, frames: Iterable[_BytesFrame],
               window: int = ..., *, errors: Literal["raise"] = ...) -> Iterator[bytearray]: ...

    @overload
    def stream(self, pipeline: PipelineKey, frames: Iterable[AnyFrame],
               window: int = ..., *, errors: Literal["raise"] = ...) -> Iterator[Result]: ...

    @overload
    def stream(self, pipeline: PipelineKey, frames: Iterable[AnyFrame],
               window: int = ..., *,
               errors: str) -> Iterator[Union[Result, GpuframeError]]: ...

    def stream(self, pipeline: PipelineKey, frames: Iterable[AnyFrame],
               window: int = DEFAULT_WINDOW, *,
               errors: str = "raise") -> Iterator[Union[Result, GpuframeError]]:
        """Runs every frame of the iterable ``frames`` through ``pipeline``
        and yields the results in order, keeping up to ``window`` frames in
        flight.

        ``pipeline`` is a name, an id or a :class:`Pipeline`.  A frame is a
        NumPy array or a bytes-like object; see :func:`encode_frame` for the
        dtypes each pipeline takes.  Arrays give arrays of the dtype and shape
        the pipeline's LIST entry describes (``Pipeline.outputs``; affine,
        sincos: float32 of the input's shape; normalize_u8: float32 (3,
        height, width); echo: the input's dtype and shape), other frames give
        bytearrays.  Results
        are read straight into new arrays; inputs already in the wire's layout
        are sent from their own memory, so a frame must not change until its
        result has been yielded.

        A frame may also be a :class:`ShmFrame` (``region.frame(x, out)``):
        its input already lies in a shared-memory region of this client, only
        its descriptor is sent (a version-2 FRAME), and its result is a NumPy
        view of the region where the daemon wrote it, of the dtype and shape
        an array frame would give (raw-offset frames: the output's, 1-D where
        the frame's length decides it).
        A view stays valid until its range is written again, by you or by a
        later frame's output.  Both kinds mix freely in one stream.

        While it waits for a result it keeps writing later frames and reading
        earlier replies, so no window is too large for the socket buffers.

        ``errors``: with "raise" (the default) a frame the daemon refuses
        raises its StatusError (``index`` is the frame's position) and ends
        the stream; with "yield" the exception object is yielded in the
        frame's place and the stream goes on.  Errors that close the
        connection (fatal statuses, the daemon going away, a timeout) always
        raise.  Leaving the loop early is fine: replies still due are read
        and dropped by the next call.

        The pipeline is resolved when stream() is called (NoSuchPipelineError
        then); frames are sent once iteration starts.
        """
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) \
                or window < 1:
            raise ValueError("window must be an integer >= 1, not %r" % (window,))
        if errors not in _ERRORS_MODES:
            raise ValueError("errors must be one of %s, not %r" % (_ERRORS_MODES, errors))
        if self.closed:
            raise ConnectionClosedError("the client is closed", self._conn.closed_error)
        return self._stream(self.pipeline(pipeline), frames, int(window), errors)

    def _stream(self, p: Pipeline, frames: Iterable[AnyFrame], window: int,
                errors: str) -> Iterator[Union[Result, GpuframeError]]:
        conn = self._conn
        source = iter(frames)
        in_flight: Deque[Tuple[int, Request]] = deque()  # (index, Request), oldest first
        index = 0
        more = True
        try:
            while True:
                while more and len(in_flight) < window:
                    try:
                        frame = next(source)
                    except StopIteration:
                        more = False
                        break
                    if isinstance(frame, ShmFrame):
                        enc = encode_shm(p, frame, self)
                    elif isinstance(frame, DeviceFrame):
                        enc = encode_device(p, frame, self)
                    else:
                        enc = encode_frame(p, frame)
                    flags, version, status = enc.flags, enc.version, 0
                    if self._deadline_ns:
                        flags |= protocol.FLAG_DEADLINE
                        status = protocol.deadline_wire(time.monotonic_ns() + self._deadline_ns)
                    if self._latest_only:
                        flags |= protocol.FLAG_LATEST
                    flags |= self._class_flags
                    if flags & (protocol.FLAG_DEADLINE | protocol.FLAG_LATEST |
                                self._class_flags):
                        version = max(version or protocol.VERSION, protocol.VERSION_SCHED)
                    req = conn.submit(MsgType.FRAME, p.id, enc.payload, enc.expect_bytes,
                                      enc.make_output, version=version, flags=flags,
                                      finish=enc.finish, status=status)
                    in_flight.append((index, req))
                    index += 1
                if not in_flight:
                    return
                i, req = in_flight[0]
                conn.wait(req)
                in_flight.popleft()
                err = req.error
                if err is None:
                    yield req.result
                    continue
                if isinstance(err, StatusError):
                    err.index = i
                # What failed this frame alone is yielded; what closed the
                # connection (and so fails every later frame too) raises.
                per_frame = err is not conn.closed_error and (
                    isinstance(err, ProtocolError)
                    or (isinstance(err, StatusError) and not err.fatal))
                if errors == "yield" and per_frame:
                    assert isinstance(err, GpuframeError)
                    yield err
                    continue
                raise err
        finally:
            # Abandoned (an error, or the caller stopped iterating): the
            # requests stay in the connection's FIFO and their replies are
            # read and dropped by whatever waits next.
            for _, req in in_flight:
                req.abandoned = True
            in_flight.clear()

    # The overloads overlap where a narrower list type comes first: lists are
    # invariant, so mypy calls that unsafe, but the narrower one is what the
    # call returns.
    @overload
    def map(self, pipeline: PipelineKey, frames: Iterable[_ArrayFrame],  # type: ignore[misc]
            window: int = ..., *,
            errors: Literal["raise"] = ...) -> List[npt.NDArray[Any]]: ...

    @overload
    def map(self, pipeline: PipelineKey, frames: Iterable[_BytesFrame],  # type: ignore[misc]
            window: int = ..., *, errors: Literal["raise"] = ...) -> List[bytearray]: ...

    @overload
    def map(self, pipeline: PipelineKey, frames: Iterable[AnyFrame],  # type: ignore[misc]
            window: int = ..., *, errors: Literal["raise"] = ...) -> List[Result]: ...

    @overload
    def map(self, pipeline: PipelineKey, frames: Iterable[AnyFrame], window: int = ..., *,
            errors: str) -> List[Union[Result, GpuframeError]]: ...

    def map(self, pipeline: PipelineKey, frames: Iterable[AnyFrame],
            window: int = DEFAULT_WINDOW, *, errors: str = "raise") -> List[Any]:
        """:meth:`stream` collected into a list."""
        return list(self.stream(pipeline, frames, window, errors=errors))

    @overload
    def process(self, pipeline: PipelineKey, frame: _ArrayFrame) -> npt.NDArray[Any]: ...

    @overload
    def process(self, pipeline: PipelineKey, frame: _BytesFrame) -> bytearray: ...

    def process(self, pipeline: PipelineKey, frame: AnyFrame) -> Result:
        """Runs one frame and returns its result (raises its error)."""
        for result in self.stream(pipeline, (frame,), 1):
            assert not isinstance(result, GpuframeError)
            return result
        raise AssertionError("unreachable: a stream of one frame yields one result")
