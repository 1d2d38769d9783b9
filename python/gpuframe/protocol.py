"""The gpuframed wire format: the 32-byte header, message types and status codes.

``protocol/PROTOCOL.md`` is the contract; this module is its Python form.  Every
message is a fixed 32-byte little-endian header followed by ``payload_bytes``
bytes of payload.  Nothing here does I/O.

The header codec takes the version as an argument rather than assuming 1:
``magic`` and ``version`` keep their place in every future version
(PROTOCOL.md, "Versioning"), so a later version is one more entry in
``SUPPORTED_VERSIONS`` plus what it adds, not a rewrite of the parser.
"""

import enum
import struct
from collections import namedtuple

from .errors import ProtocolError

__all__ = [
    "MAGIC",
    "VERSION",
    "SUPPORTED_VERSIONS",
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
]

#: "GFRM" read as a little-endian 32-bit integer.
MAGIC = 0x4D524647
#: The protocol version this package sends.
VERSION = 1
#: The versions whose replies this package can read.
SUPPORTED_VERSIONS = (1,)
#: The fixed header that precedes every payload.
HEADER_BYTES = 32
#: Upper bound on an ERROR reply's text; a longer ERROR is a protocol violation.
ERROR_TEXT_MAX_BYTES = 256

# magic, version, type, flags, frame_id, pipeline_id, status, payload_bytes:
# every field at its PROTOCOL.md offset, no padding ("<" packs exactly).
_HEADER = struct.Struct("<IBBHQIIQ")
assert _HEADER.size == HEADER_BYTES


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


#: The types a client accepts from the daemon.
REPLY_TYPES = frozenset(
    {MsgType.RESULT, MsgType.ERROR, MsgType.LIST, MsgType.STATS, MsgType.TRACE}
)


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
    }
)

#: One decoded header; fields as in PROTOCOL.md's table.
Header = namedtuple(
    "Header", "version type flags frame_id pipeline_id status payload_bytes"
)


def status_name(code):
    """The stable name of status ``code`` ("bad_length", ...), or "unknown"."""
    try:
        return Status(code).name.lower()
    except ValueError:
        return "unknown"


def encode_header_into(
    buf, offset, msg_type, frame_id, pipeline_id, payload_bytes, *, status=0, flags=0,
    version=VERSION
):
    """Writes one header into ``buf[offset:offset + HEADER_BYTES]``.

    Every field is written exactly as given (tests forge bad headers this way);
    a value that does not fit its field raises ``struct.error``.
    """
    _HEADER.pack_into(
        buf, offset, MAGIC, version, msg_type, flags, frame_id, pipeline_id, status,
        payload_bytes,
    )


def encode_header(
    msg_type, frame_id, pipeline_id, payload_bytes, *, status=0, flags=0, version=VERSION
):
    """Returns one header as 32 bytes; see :func:`encode_header_into`."""
    return _HEADER.pack(
        MAGIC, version, msg_type, flags, frame_id, pipeline_id, status, payload_bytes
    )


def decode_header(buf, offset=0, *, versions=SUPPORTED_VERSIONS):
    """Decodes and checks the reply header at ``buf[offset:offset + 32]``.

    Checks what PROTOCOL.md asks of a client, in wire order: the magic, a
    version in ``versions``, a reply type, ``flags`` 0, ``status`` nonzero
    exactly for ERROR, and an ERROR text of at most ``ERROR_TEXT_MAX_BYTES``.
    A status code this package does not know is accepted: it is a failure of
    that one frame, not a violation.  Returns a :class:`Header`; raises
    :class:`ProtocolError` naming the first problem.  ``buf`` needs at least
    32 bytes from ``offset``.
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
    if flags != 0:
        raise ProtocolError("reply with flags 0x%04x (must be 0)" % flags)
    if (status != 0) != (type_ == MsgType.ERROR):
        raise ProtocolError(
            "%s reply with status %d" % (MsgType(type_).name, status)
        )
    if type_ == MsgType.ERROR and payload_bytes > ERROR_TEXT_MAX_BYTES:
        raise ProtocolError(
            "ERROR reply of %d bytes (at most %d)" % (payload_bytes, ERROR_TEXT_MAX_BYTES)
        )
    return Header(version, type_, flags, frame_id, pipeline_id, status, payload_bytes)
