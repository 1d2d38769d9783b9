# SPDX-License-Identifier: MIT
"""Exceptions of the gpuframe client.

Every exception the package raises on purpose derives from :class:`GpuframeError`.
An ERROR reply becomes a :class:`StatusError`, one subclass per status code of
PROTOCOL.md's error table, so callers can catch exactly the failures they can act
on::

    try:
        out = client.process("rgb224", image)
    except gpuframe.BadLengthError as e:       # status 7: wrong input size
        ...
    except gpuframe.FatalStatusError as e:     # the daemon closed the connection
        ...

Decide in code on the class or on ``status``, never on ``text``: the daemon's
wording may change.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

__all__ = [
    "GpuframeError",
    "ConnectionClosedError",
    "ProtocolError",
    "ClientTimeoutError",
    "NoSuchPipelineError",
    "BusyError",
    "StatusError",
    "FatalStatusError",
    "BadMagicError",
    "BadVersionError",
    "BadTypeError",
    "BadFlagsError",
    "TooLargeError",
    "UnknownPipelineError",
    "BadLengthError",
    "EngineError",
    "ShuttingDownError",
    "FrameTimeoutError",
    "InternalError",
    "RequestTimeoutError",
    "UnknownRegionError",
    "BadDescriptorError",
    "BadRegionError",
    "RegionLimitError",
    "StrayFdError",
    "TooManyConnectionsError",
    "ForbiddenError",
    "DeadlineExceededError",
    "SupersededError",
    "UnknownStatusError",
    "status_error_class",
    "make_status_error",
]


class GpuframeError(Exception):
    """Base class of every error of this package."""


class ConnectionClosedError(GpuframeError, ConnectionError):
    """The connection is closed: the daemon closed it (it stopped, restarted or
    refused a request with a fatal status), or the client was closed.

    Every request still without a reply has failed; the daemon may or may not
    have computed it.  ``cause`` is what closed the connection when known (the
    fatal :class:`StatusError`, the :class:`OSError`, ...), else None.
    """

    def __init__(self, message: str, cause: Optional[BaseException] = None) -> None:
        super().__init__(message)
        self.cause = cause


class ProtocolError(GpuframeError):
    """The daemon sent something this client cannot accept: a malformed or
    unexpected reply header, a reply out of order, JSON that does not parse, or
    a result whose length contradicts the pipeline.  When the byte stream can
    no longer be followed the client has closed the connection (``client.closed``).
    """


class ClientTimeoutError(GpuframeError, TimeoutError):
    """The daemon made no progress (no byte accepted or sent) for the client's
    ``timeout`` while a reply was awaited.  The client closed the connection,
    since a late reply could no longer be matched to its request."""


class NoSuchPipelineError(GpuframeError, LookupError):
    """No pipeline of the daemon's LIST has that name.  Raised by the client
    before anything is sent."""


class BusyError(GpuframeError, RuntimeError):
    """A request that needs the connection to itself (adding or removing a
    shared-memory region) was asked for while frames of a stream were still
    in flight.  Nothing was sent; finish or close the stream, then retry."""


class StatusError(GpuframeError):
    """The daemon answered a request with ERROR.

    Attributes:
        status: the code from the reply (an int; PROTOCOL.md's error table).
        name: its stable name ("bad_length", ...; "unknown" for a code newer
            than this package).
        text: the daemon's UTF-8 text for people (may be empty).
        fatal: True when the daemon closed the connection after it.
        frame_id, pipeline_id: from the reply header (they mean nothing after
            ``bad_magic``).
        index: for a frame of :meth:`Client.stream`, its position in the
            iterable of frames; else None.
    """

    #: The status code of this class; None for :class:`UnknownStatusError`.
    STATUS: Optional[int] = None
    #: Its name in PROTOCOL.md and in STATS.
    NAME: str = "unknown"
    #: Whether the daemon always closes the connection after this status.
    FATAL: bool = False

    def __init__(self, status: int, text: str = "", *, frame_id: Optional[int] = None,
                 pipeline_id: Optional[int] = None, fatal: Optional[bool] = None) -> None:
        self.status = status
        self.name = self.NAME
        self.text = text
        self.fatal = self.FATAL if fatal is None else fatal
        self.frame_id = frame_id
        self.pipeline_id = pipeline_id
        self.index: Optional[int] = None
        super().__init__(status, text)

    def __str__(self) -> str:
        where = ""
        if self.index is not None:
            where = " (frame %d of the stream)" % self.index
        text = ": %s" % self.text if self.text else ""
        return "%s (status %d)%s%s" % (self.name, self.status, where, text)


class FatalStatusError(StatusError):
    """A status after which the daemon closes the connection: the header of a
    request was unusable, too large, or not sent in time.  The client is
    closed; every later request on it fails."""

    FATAL = True


class BadMagicError(FatalStatusError):
    """1 ``bad_magic``: a request header did not start with GFRM."""

    STATUS, NAME = 1, "bad_magic"


class BadVersionError(FatalStatusError):
    """2 ``bad_version``: the daemon speaks another protocol version."""

    STATUS, NAME = 2, "bad_version"


class BadTypeError(FatalStatusError):
    """3 ``bad_type``: the request's type is unknown or not a request."""

    STATUS, NAME = 3, "bad_type"


class BadFlagsError(FatalStatusError):
    """4 ``bad_flags``: reserved flags, or a request's status, were not 0."""

    STATUS, NAME = 4, "bad_flags"


class TooLargeError(FatalStatusError):
    """5 ``too_large``: the frame is larger than the daemon's max_frame_bytes."""

    STATUS, NAME = 5, "too_large"


class UnknownPipelineError(StatusError):
    """6 ``unknown_pipeline``: no pipeline has the frame's id."""

    STATUS, NAME = 6, "unknown_pipeline"


class BadLengthError(StatusError):
    """7 ``bad_length``: the pipeline cannot take a frame of this length.  Costs
    only that frame (it would be fatal after a LIST/STATS/TRACE request with a
    payload, which this package never sends; ``fatal`` says which)."""

    STATUS, NAME = 7, "bad_length"


class EngineError(StatusError):
    """8 ``engine``: the engine (GPU or CPU) failed to run the frame."""

    STATUS, NAME = 8, "engine"


class ShuttingDownError(StatusError):
    """9 ``shutting_down``: the daemon is stopping and did not run the frame."""

    STATUS, NAME = 9, "shutting_down"


class FrameTimeoutError(StatusError):
    """10 ``timeout``: the frame missed its deadline on the engine."""

    STATUS, NAME = 10, "timeout"


class InternalError(StatusError):
    """11 ``internal``: a bug or resource failure inside the daemon."""

    STATUS, NAME = 11, "internal"


class RequestTimeoutError(FatalStatusError):
    """12 ``request_timeout``: a request the client had begun was not complete
    within the daemon's request_timeout_ms."""

    STATUS, NAME = 12, "request_timeout"


class UnknownRegionError(StatusError):
    """13 ``unknown_region``: a frame by reference or REGION_REMOVE named a
    region this connection does not hold."""

    STATUS, NAME = 13, "unknown_region"


class BadDescriptorError(StatusError):
    """14 ``bad_descriptor``: a frame by reference does not fit its region."""

    STATUS, NAME = 14, "bad_descriptor"


class BadRegionError(StatusError):
    """15 ``bad_region``: REGION_ADD without a usable sealed memfd."""

    STATUS, NAME = 15, "bad_region"


class RegionLimitError(StatusError):
    """16 ``region_limit``: REGION_ADD over max_regions or max_shm_bytes."""

    STATUS, NAME = 16, "region_limit"


class StrayFdError(FatalStatusError):
    """17 ``stray_fd``: file descriptors came with another request than
    REGION_ADD, several at once, or with truncated control data."""

    STATUS, NAME = 17, "stray_fd"


class TooManyConnectionsError(FatalStatusError):
    """18 ``too_many_connections``: the daemon serves max_connections already,
    or is out of file descriptors; it closed this connection at once."""

    STATUS, NAME = 18, "too_many_connections"


class ForbiddenError(FatalStatusError):
    """19 ``forbidden``: the daemon's allow rules do not list this user or its
    groups; it closed the connection at once."""

    STATUS, NAME = 19, "forbidden"


class DeadlineExceededError(StatusError):
    """20 ``deadline_exceeded``: the frame's deadline (``Client.set_frame_options``)
    passed before it went to the engine; it did not run, or its result was
    dropped."""

    STATUS, NAME = 20, "deadline_exceeded"


class SupersededError(StatusError):
    """21 ``superseded``: a newer frame of this connection, sent with
    ``latest_only``, took this one's place before it went to the engine."""

    STATUS, NAME = 21, "superseded"


class UnknownStatusError(StatusError):
    """A status code missing from this package's table: a newer daemon failed
    that one frame (PROTOCOL.md, "Versioning").  ``status`` has the number."""


_BY_STATUS: Dict[Optional[int], Type[StatusError]] = {
    cls.STATUS: cls
    for cls in (
        BadMagicError,
        BadVersionError,
        BadTypeError,
        BadFlagsError,
        TooLargeError,
        UnknownPipelineError,
        BadLengthError,
        EngineError,
        ShuttingDownError,
        FrameTimeoutError,
        InternalError,
        RequestTimeoutError,
        UnknownRegionError,
        BadDescriptorError,
        BadRegionError,
        RegionLimitError,
        StrayFdError,
        TooManyConnectionsError,
        ForbiddenError,
        DeadlineExceededError,
        SupersededError,
    )
}


def status_error_class(status: int) -> Type[StatusError]:
    """The :class:`StatusError` subclass for ``status``; :class:`UnknownStatusError`
    for a code this package does not know."""
    return _BY_STATUS.get(status, UnknownStatusError)


def make_status_error(status: int, text: str = "", *, frame_id: Optional[int] = None,
                      pipeline_id: Optional[int] = None,
                      fatal: Optional[bool] = None) -> StatusError:
    """An instance of :func:`status_error_class` (``status``) with these fields.
    ``fatal`` None takes the class's rule."""
    cls = status_error_class(status)
    return cls(status, text, frame_id=frame_id, pipeline_id=pipeline_id, fatal=fatal)
