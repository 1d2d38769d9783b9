# SPDX-License-Identifier: MIT
"""Python client of gpuframed, written from protocol/PROTOCOL.md.

Pure Python (standard library and NumPy).  A :class:`Client` connects to the
daemon's Unix socket; :meth:`Client.stream` keeps a window of frames in flight
while it reads results back in order::

    import numpy as np
    import gpuframe

    with gpuframe.Client() as c:                 # $GPUFRAMED_SOCKET or /run/gpuframed.sock
        print(c.list().ids)                      # {'echo': 0, 'affine': 1, ...}
        frames = (np.random.rand(1 << 18).astype(np.float32) for _ in range(100))
        for y in c.stream("affine", frames, window=16):
            ...                                  # float32 arrays, in order

Frames whose input already lies in shared memory go by reference: a
:class:`Region` (``c.region(nbytes)``) is mapped here and in the daemon, and a
:class:`ShmFrame` (``region.frame(x, out_offset)``) streams like any frame,
its result a NumPy view of the region (:mod:`gpuframe.shm`);
:class:`FrameBuffers` (``c.frame_buffers(count, nbytes)``) lays a region out
as one input and one output per frame in flight, which a producer fills in
place.

ERROR replies raise :class:`StatusError` subclasses, one per status code
(:mod:`gpuframe.errors`).
"""

import sys as _sys

try:
    import numpy  # noqa: F401 (every frame and result is an array: say so first when missing)
except ImportError as _e:
    raise ImportError(
        "gpuframe needs NumPy, which this interpreter (%s, Python %d.%d) cannot import: install "
        "it there (python3 -m pip install numpy), or use Debian's /usr/bin/python3, for which "
        "scripts/setup.sh installs python3-numpy (in a venv: python3 -m venv "
        "--system-site-packages)"
        % (_sys.executable, _sys.version_info[0], _sys.version_info[1])) from _e

from .client import DEFAULT_SOCKET, SOCKET_ENV, Client, connect_error, default_socket_path
from .errors import *  # noqa: F401,F403 (the exception hierarchy is public API)
from .errors import __all__ as _errors_all
from .pipelines import KNOWN_KINDS, Pipeline, Pipelines, TensorSpec
from .protocol import ERROR_TEXT_MAX_BYTES, FATAL_STATUSES, MsgType, Status, status_name
from .device import DeviceBuffer, DeviceFrame, DeviceRegion, DeviceUnavailableError
from .shm import FrameBuffers, Region, ShmFrame

__version__ = "0.1.0"

__all__ = [
    "Client",
    "default_socket_path",
    "connect_error",
    "DEFAULT_SOCKET",
    "SOCKET_ENV",
    "Pipeline",
    "Pipelines",
    "KNOWN_KINDS",
    "TensorSpec",
    "Region",
    "FrameBuffers",
    "ShmFrame",
    "DeviceRegion",
    "DeviceFrame",
    "DeviceBuffer",
    "DeviceUnavailableError",
    "MsgType",
    "Status",
    "FATAL_STATUSES",
    "ERROR_TEXT_MAX_BYTES",
    "status_name",
    "__version__",
] + list(_errors_all)
