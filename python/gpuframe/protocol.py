# SPDX-License-Identifier: MIT
"""The gpuframed wire format: the 32-byte header, message types and status codes.

``protocol/PROTOCOL.md`` is the contract; this module is its Python form.  Every
message is a fixed 32-byte little-endian header followed by ``payload_bytes``
bytes of payload.  Nothing here does I/O.

The header codec takes the version as an argument rather than assuming 1:
``magic`` and ``version`` keep their place in every future version
(PROTOCOL.md, "Versioning").  Version 2 is version 1 plus shared-memory
regions: the REGION_ADD and REGION_REMOVE messages, the ``SHM`` flag on a
FRAME and its RESULT, and the three fixed descriptors those carry (encoded and
decoded here).  A client marks only those messages as version 2.  Version 4
is version 2 plus device regions: DEVICE_REGION_ADD (GPU memory from the
CUDA driver's cuMemCreate, shared as a POSIX file descriptor) and the
``DEVICE`` flag on a FRAME and its RESULT, whose descriptors are version 2's.
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple, Optional, Tuple, Union

from .errors import ProtocolError

__all__ = [
    "MAGIC",
    "VERSION",
    "VERSION_SHM",
    "VERSION_SCHED",
    "VERSION_DEVICE",
    "SUPPORTED_VERSIONS",
    "FLAG_SHM",
    "FLAG_DEVICE",
    "FLAG_DEADLINE",
    "FLAG_LATEST",
    "CLASS_SHIFT",
    "CLASSES",
    "deadline_wire",
    "DEVICE_REGION_BYTES",
    "DEVICE_HANDLE_POSIX_FD",
    "REGION_DEVICE",
    "SHM_FRAME_BYTES",
    "SHM_RESULT_BYTES",
    "REGION_INFO_BYTES",
    "REGION_PINNED",
    "HEADER_BYTES",
    "ERROR_TEXT_MAX_BYTES",
    "MsgType",
    "Status",
    "FATAL_STATUSES",
    "REPLY_TYPES",
    "Header",
    "status_name",
    "encode_header",
    "encode_header_into",
    "decode_header",
    "ShmResult",
    "RegionInfo",
    "encode_shm_frame",
    "decode_shm_result",
    "decode_region_info",
    "encode_device_region",
]

#: "GFRM" read as a little-endian 32-bit integer.
MAGIC = 0x4D524647
#: The protocol version of every request but the shared-memory ones.
VERSION = 1
#: The version of REGION_ADD, REGION_REMOVE and frames by reference.
VERSION_SHM = 2
#: The version of a FRAME with scheduling flags (FLAG_DEADLINE, FLAG_LATEST).
VERSION_SCHED = 3
#: The version of DEVICE_REGION_ADD and device frames (and all of version 3).
VERSION_DEVICE = 4
#: The versions whose replies this package can read.
SUPPORTED_VERSIONS = (1, 2, 3, 4)
#: ``flags`` of a version-2 FRAME whose payload is a descriptor into a region,
#: and of its RESULT.
FLAG_SHM = 0x0001
#: ``flags`` of a version-4 FRAME whose descriptor names a device region,
#: and of its RESULT.
FLAG_DEVICE = 0x0002
#: ``flags`` of a version-3 FRAME whose ``status`` carries its deadline
#: (:func:`deadline_wire`): not on the engine by then, it is answered
#: ``deadline_exceeded`` without running.
FLAG_DEADLINE = 0x0100
#: ``flags`` of a version-3 FRAME of which only the newest matters: the
#: connection's previous such frame, not yet on the engine, is answered
#: ``superseded`` and this one runs in its place.
FLAG_LATEST = 0x0200
#: A version-3 or -4 FRAME's priority class, in ``flags`` bits 10-11: 0 the
#: class the daemon's ``priorities`` give the user, else the index in CLASSES
#: (at most what the configuration gives).
CLASS_SHIFT = 10
CLASSES = ("default", "realtime", "normal", "batch")
#: DEVICE_REGION_ADD's payload: region_bytes, handle_type, reserved.
DEVICE_REGION_BYTES = 16
#: Its handle type: CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.
DEVICE_HANDLE_POSIX_FD = 1
#: A frame by reference's payload: region_id, reserved, in_offset, in_bytes,
#: out_offset, out_capacity.
SHM_FRAME_BYTES = 40
#: Its RESULT's payload: region_id, reserved, out_offset, out_bytes.
SHM_RESULT_BYTES = 24
#: REGION_ADD's reply payload: region_id, flags, region_bytes.
REGION_INFO_BYTES = 16
#: Region info flag: the daemon page-locked the region (CUDA engine).
REGION_PINNED = 0x1
#: Region info flag: the region is device memory (DEVICE_REGION_ADD).
REGION_DEVICE = 0x2
#: The fixed header that precedes every payload.
HEADER_BYTES = 32
#: Upper bound on an ERROR reply's text; a longer ERROR is a protocol violation.
ERROR_TEXT_MAX_BYTES = 256

# magic, version, type, flags, frame_id, pipeline_id, status, payload_bytes:
# every field at its PROTOCOL.md offset, no padding ("<" packs exactly).
_HEADER = struct.Struct("<IBBHQIIQ")
assert _HEADER.size == HEADER_BYTES
_SHM_FRAME = struct.Struct("<IIQQQQ")
_SHM_RESULT = struct.Struct("<IIQQ")
_REGION_INFO = struct.Struct("<IIQ")
_DEVICE_REGION = struct.Struct("<QII")
assert _DEVICE_REGION.size == DEVICE_REGION_BYTES
assert (_SHM_FRAME.size, _SHM_RESULT.size, _REGION_INFO.size) == (
    SHM_FRAME_BYTES, SHM_RESULT_BYTES, REGION_INFO_BYTES)


class MsgType(enum.IntEnum):
    """The ``type`` byte of a header."""

    FRAME = 1  #: client -> daemon: the frame's input bytes
    RESULT = 2  #: daemon -> client: the frame's output bytes
    ERROR = 3  #: daemon -> client: ``status`` and UTF-8 text
    LIST = 4  #: both: empty request; JSON of the pipelines
    STATS = 5  #: both: empty request; JSON of the daemon's counters
    TRACE = 6  #: both: empty request (pipeline_id = most frames); JSON of stage times
    REGION_ADD = 7  #: both, version 2: a memfd as SCM_RIGHTS; 16 bytes of region info
    REGION_REMOVE = 8  #: both, version 2: pipeline_id = the region; empty reply
    DEVICE_REGION_ADD = 9  #: both, version 4: a cuMemCreate fd as SCM_RIGHTS; region info


#: The types a client accepts from the daemon.
REPLY_TYPES = frozenset(
    {MsgType.RESULT, MsgType.ERROR, MsgType.LIST, MsgType.STATS, MsgType.TRACE,
     MsgType.REGION_ADD, MsgType.REGION_REMOVE, MsgType.DEVICE_REGION_ADD}
)
# The reply types that exist only from version 2 on, and from version 4 on.
_SHM_TYPES = frozenset({MsgType.REGION_ADD, MsgType.REGION_REMOVE})
_DEVICE_TYPES = frozenset({MsgType.DEVICE_REGION_ADD})


class Status(enum.IntEnum):
    """The ``status`` of a reply: 0, or why an ERROR refused a request."""

    OK = 0
    BAD_MAGIC = 1
    BAD_VERSION = 2
    BAD_TYPE = 3
    BAD_FLAGS = 4
    TOO_LARGE = 5
    UNKNOWN_PIPELINE = 6
    BAD_LENGTH = 7
    ENGINE = 8
    SHUTTING_DOWN = 9
    TIMEOUT = 10
    INTERNAL = 11
    REQUEST_TIMEOUT = 12
    UNKNOWN_REGION = 13
    BAD_DESCRIPTOR = 14
    BAD_REGION = 15
    REGION_LIMIT = 16
    STRAY_FD = 17
    TOO_MANY_CONNECTIONS = 18
    FORBIDDEN = 19
    DEADLINE_EXCEEDED = 20
    SUPERSEDED = 21


#: The codes after which the daemon always closes the connection.  ``bad_length``
#: is fatal only as the answer to a LIST, STATS or TRACE request that carried a
#: payload, which this package never sends.
FATAL_STATUSES = frozenset(
    {
        Status.BAD_MAGIC,
        Status.BAD_VERSION,
        Status.BAD_TYPE,
        Status.BAD_FLAGS,
        Status.TOO_LARGE,
        Status.REQUEST_TIMEOUT,
        Status.STRAY_FD,
        Status.TOO_MANY_CONNECTIONS,
        Status.FORBIDDEN,
    }
)

#: What the codecs read from: bytes, a bytearray, a memoryview or mmap.
Buffer = Union[bytes, bytearray, memoryview]
#: What encode_header_into writes into.
WritableBuffer = Union[bytearray, memoryview]


class Header(NamedTuple):
    """One decoded header; fields as in PROTOCOL.md's table."""

    version: int
    type: int
    flags: int
    frame_id: int
    pipeline_id: int
    status: int
    payload_bytes: int


class ShmResult(NamedTuple):
    """A frame by reference's RESULT: where in which region its output is."""

    region_id: int
    out_offset: int
    out_bytes: int


class RegionInfo(NamedTuple):
    """REGION_ADD's reply: the region's id on this connection, its flags
    (REGION_PINNED) and its size."""

    region_id: int
    flags: int
    region_bytes: int


def deadline_wire(deadline_ns: int) -> int:
    """A deadline as a version-3 FRAME's ``status`` carries it: the low 32
    bits of the instant on CLOCK_MONOTONIC (``time.monotonic_ns()`` on
    Linux, which the daemon on the same host shares) in microseconds."""
    return (deadline_ns // 1000) & 0xFFFFFFFF


def status_name(code: int) -> str:
    """The stable name of status ``code`` ("bad_length", ...), or "unknown"."""
    try:
        return Status(code).name.lower()
    except ValueError:
        return "unknown"


def encode_header_into(
    buf: WritableBuffer, offset: int, msg_type: int, frame_id: int, pipeline_id: int,
    payload_bytes: int, *, status: int = 0, flags: int = 0, version: int = VERSION
) -> None:
    """Writes one header into ``buf[offset:offset + HEADER_BYTES]``.

    Every field is written exactly as given (tests forge bad headers this way);
    a value that does not fit its field raises ``struct.error``.
    """
    _HEADER.pack_into(
        buf, offset, MAGIC, version, msg_type, flags, frame_id, pipeline_id, status,
        payload_bytes,
    )


def encode_header(
    msg_type: int, frame_id: int, pipeline_id: int, payload_bytes: int, *, status: int = 0,
    flags: int = 0, version: int = VERSION
) -> bytes:
    """Returns one header as 32 bytes; see :func:`encode_header_into`."""
    return _HEADER.pack(
        MAGIC, version, msg_type, flags, frame_id, pipeline_id, status, payload_bytes
    )


def decode_header(buf: Buffer, offset: int = 0, *,
                  versions: Tuple[int, ...] = SUPPORTED_VERSIONS) -> Header:
    """Decodes and checks the reply header at ``buf[offset:offset + 32]``.

    Checks what PROTOCOL.md asks of a client, in wire order: the magic, a
    version in ``versions``, a reply type of that version (REGION_* from
    version 2 on, DEVICE_REGION_ADD from version 4 on), ``flags`` 0 (or
    ``FLAG_SHM`` on a version-2 or -4 RESULT, ``FLAG_DEVICE`` on a version-4 one),
    ``status`` nonzero exactly for ERROR, an ERROR text of at most
    ``ERROR_TEXT_MAX_BYTES``, and the fixed payload lengths of version 2: 24
    bytes for a RESULT with a flag, 16 for REGION_ADD and DEVICE_REGION_ADD, 0 for
    REGION_REMOVE.  A status code this package does not know is accepted: it
    is a failure of that one frame, not a violation.  Returns a
    :class:`Header`; raises :class:`ProtocolError` naming the first problem.
    ``buf`` needs at least 32 bytes from ``offset``.
    """
    magic, version, type_, flags, frame_id, pipeline_id, status, payload_bytes = (
        _HEADER.unpack_from(buf, offset)
    )
    if magic != MAGIC:
        raise ProtocolError("reply with bad magic 0x%08x (expected 0x%08x)" % (magic, MAGIC))
    if version not in versions:
        raise ProtocolError(
            "reply of protocol version %d (this client reads %s)"
            % (version, ", ".join(map(str, versions)))
        )
    if type_ not in REPLY_TYPES:
        raise ProtocolError("reply of type %d, which is not a reply" % type_)
    if type_ in _SHM_TYPES and version < VERSION_SHM:
        raise ProtocolError("reply of type %d in version %d (it needs version %d)"
                            % (type_, version, VERSION_SHM))
    if type_ in _DEVICE_TYPES and version < VERSION_DEVICE:
        raise ProtocolError("reply of type %d in version %d (it needs version %d)"
                            % (type_, version, VERSION_DEVICE))
    allowed: Tuple[int, ...] = (0,)
    if type_ == MsgType.RESULT and version >= VERSION_SHM:
        allowed = (0, FLAG_SHM, FLAG_DEVICE) if version >= VERSION_DEVICE else (0, FLAG_SHM)
    if flags not in allowed:
        raise ProtocolError("reply with flags 0x%04x (must be %s)"
                            % (flags, " or ".join("0x%04x" % f if f else "0" for f in allowed)))
    if (status != 0) != (type_ == MsgType.ERROR):
        raise ProtocolError(
            "%s reply with status %d" % (MsgType(type_).name, status)
        )
    if type_ == MsgType.ERROR and payload_bytes > ERROR_TEXT_MAX_BYTES:
        raise ProtocolError(
            "ERROR reply of %d bytes (at most %d)" % (payload_bytes, ERROR_TEXT_MAX_BYTES)
        )
    fixed: Optional[int] = None
    if flags:
        fixed = SHM_RESULT_BYTES
    elif type_ in (MsgType.REGION_ADD, MsgType.DEVICE_REGION_ADD):
        fixed = REGION_INFO_BYTES
    elif type_ == MsgType.REGION_REMOVE:
        fixed = 0
    if fixed is not None and payload_bytes != fixed:
        raise ProtocolError("%s%s reply of %d bytes (it has %d)"
                            % (MsgType(type_).name,
                               " (SHM)" if flags == FLAG_SHM else " (DEVICE)" if flags else "",
                               payload_bytes,
                               fixed))
    return Header(version, type_, flags, frame_id, pipeline_id, status, payload_bytes)


# ---- version 2: the shared-memory descriptors ------------------------------------


def encode_shm_frame(region_id: int, in_offset: int, in_bytes: int, out_offset: int,
                     out_capacity: int, *, reserved: int = 0) -> bytes:
    """A frame by reference's 40-byte payload: the input is ``in_bytes`` at
    ``in_offset`` of region ``region_id``, the output goes to ``out_offset``
    with ``out_capacity`` bytes of room.  Every field is written exactly as
    given (``reserved`` must be 0 for the daemon; tests forge it); a value
    that does not fit its field raises ``struct.error``."""
    return _SHM_FRAME.pack(region_id, reserved, in_offset, in_bytes, out_offset, out_capacity)


def decode_shm_result(buf: Buffer) -> ShmResult:
    """The :class:`ShmResult` of a RESULT with ``FLAG_SHM`` (its 24-byte
    payload).  Raises :class:`ProtocolError` when the reserved bytes are not 0."""
    region_id, reserved, out_offset, out_bytes = _SHM_RESULT.unpack(buf)
    if reserved:
        raise ProtocolError("shm RESULT with reserved bytes 0x%08x (must be 0)" % reserved)
    return ShmResult(region_id, out_offset, out_bytes)


def decode_region_info(buf: Buffer) -> RegionInfo:
    """The :class:`RegionInfo` of a REGION_ADD reply (its 16-byte payload)."""
    return RegionInfo(*_REGION_INFO.unpack(buf))


def encode_device_region(region_bytes: int, *, handle_type: int = DEVICE_HANDLE_POSIX_FD,
                         reserved: int = 0) -> bytes:
    """DEVICE_REGION_ADD's 16-byte payload: the allocation's size as given to
    cuMemCreate, and its handle type.  Every field is written exactly as given
    (tests forge them); a value that does not fit raises ``struct.error``."""
    return _DEVICE_REGION.pack(region_bytes, handle_type, reserved)
