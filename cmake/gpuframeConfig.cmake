# SPDX-License-Identifier: MIT
# find_package(gpuframe): libgpuframe, the client library of gpuframed, as
# installed with its headers (libgpuframe-dev).  Defines gpuframe::gpuframe,
# the shared library, and gpuframe::gpuframe_static; both carry the include
# directory of <gpuframe/libgpuframe.h>, <gpuframe/protocol.h> and
# <gpuframe/plugin.h>.  Neither needs another library: the protocol code is
# inside.
include("${CMAKE_CURRENT_LIST_DIR}/gpuframeTargets.cmake")
