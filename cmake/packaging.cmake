# The Debian packages, built with `cpack` in the build tree (README.md,
# "Debian package"; tests/deb_package.sh builds and checks them):
#   gpuframed        both commands, the systemd units and sysusers file, the
#                    configuration (a conffile), man pages, documentation
#   libgpuframe0     the shared client library
#   libgpuframe-dev  headers, static library, libgpuframe.so, gpuframe.pc,
#                    the example program
# One package per install component (CMakeLists.txt), as Debian splits a
# library from its development files, so that programs linking libgpuframe
# need not install the daemon.
#
# The files are staged with DESTDIR and the prefix /usr, so that every path
# the installed files name is the package's (cmake/install_paths.cmake).
# Depends: come from dpkg-shlibdeps (libc6, libuv1, libcjson1, libstdc++6 and
# libgcc-s1 on Debian 12); the CUDA runtime is linked in, and the NVIDIA
# driver, which provides libcuda.so.1, comes from outside Debian's main
# archive (non-free, or NVIDIA's own packages), so the package names it in
# its description and suggests Debian's libcuda1 rather than depending on it.
set(GF_DEB_MAINTAINER "gpuframed maintainers <gpuframed@localhost>" CACHE STRING
  "The Maintainer: of the Debian packages")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpuframed)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${GF_DEB_MAINTAINER}")
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/deb)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL daemon lib dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_GF_DEB_FULL_VERSION "${PROJECT_VERSION}-1")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# A shlibs file and the ldconfig trigger for the package with the library.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(gf_deb ${PROJECT_SOURCE_DIR}/packaging/debian)
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME gpuframed)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SUGGESTS "libcuda1, prometheus-node-exporter")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
  ${gf_deb}/conffiles ${gf_deb}/postinst ${gf_deb}/prerm ${gf_deb}/postrm)
if(GF_HAVE_CUDA)
  set(gf_deb_cuda "Using the GPU needs the NVIDIA driver for CUDA ${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR} or later
(libcuda.so.1 and the kernel module), which is not part of Debian main;
without it gpuframed serves the same pipelines on the CPU.")
else()
  set(gf_deb_cuda "This build has no CUDA engine: it serves the pipelines on the CPU; a
build with CUDA needs the NVIDIA driver (libcuda.so.1, the kernel module).")
endif()
set(CPACK_COMPONENT_DAEMON_DESCRIPTION "GPU frame-processing daemon for local programs
gpuframed turns a local NVIDIA GPU into a frame-processing service: local
programs connect to its Unix socket, stream frames of bytes and get each
frame back processed by a named pipeline (a CUDA kernel and its
parameters), with copies and kernels of consecutive frames overlapped.
.
${gf_deb_cuda}
.
Includes the gpuframe client, the systemd units (socket activated,
sandboxed) and a timer that feeds node_exporter's textfile collector.")

set(CPACK_DEBIAN_LIB_PACKAGE_NAME libgpuframe${GF_CLIENT_ABI_VERSION})
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA
  ${gf_deb}/lib/triggers ${gf_deb}/lib/postinst ${gf_deb}/lib/postrm)
set(CPACK_COMPONENT_LIB_DESCRIPTION "client library of gpuframed
libgpuframe connects a program to gpuframed, the GPU frame-processing
daemon, over its Unix socket: it keeps a window of frames in flight, reads
results while it writes requests, and checks every reply against the
protocol.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libgpuframe-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
  "libgpuframe${GF_CLIENT_ABI_VERSION} (= ${CPACK_GF_DEB_FULL_VERSION})")
set(CPACK_COMPONENT_DEV_DESCRIPTION "client library of gpuframed (development files)
The header <gpuframe/libgpuframe.h>, the static library, gpuframe.pc for
pkg-config and an example program, for building programs that stream
frames to gpuframed.")

# Debian wants a copyright file and a changelog in every package's
# /usr/share/doc/PACKAGE; packaging/debian/add-docs.cmake puts them into the
# staged files, so that a plain `cmake --install` does not get them.
if(DEFINED ENV{SOURCE_DATE_EPOCH})
  set(gf_deb_time "$ENV{SOURCE_DATE_EPOCH}")
else()
  string(TIMESTAMP gf_deb_time "%s" UTC)
endif()
execute_process(COMMAND date -u -R -d "@${gf_deb_time}" OUTPUT_VARIABLE GF_DEB_DATE
  OUTPUT_STRIP_TRAILING_WHITESPACE)
configure_file(${gf_deb}/changelog.in ${PROJECT_BINARY_DIR}/deb-docs/changelog.Debian @ONLY)
set(CPACK_PRE_BUILD_SCRIPTS ${gf_deb}/add-docs.cmake)
set(CPACK_GF_DEB_DIR ${gf_deb})
set(CPACK_GF_DEB_DOCS ${gf_deb}/copyright ${PROJECT_BINARY_DIR}/deb-docs/changelog.Debian)

include(CPack)
