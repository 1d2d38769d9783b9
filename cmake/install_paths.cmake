# SPDX-License-Identifier: MIT
# The absolute paths that installed files name (the units' ExecStart= and
# Documentation=, gpuframe.pc, the "Keeping" message), computed from one
# install prefix.  Included twice with the same inputs: when configuring, for
# the paths compiled into gpuframed (--help, gpuframed(8)), and by
# `cmake --install`, with the prefix of that install (`--prefix P` included),
# so that every file written names where the files really went.
#
# In:  GF_PREFIX            the install prefix
#      GF_REL_BINDIR, GF_REL_LIBDIR, GF_REL_INCLUDEDIR, GF_REL_DOCDIR
#                           GNUInstallDirs' directories (relative, or absolute)
#      GF_REL_PLUGINDIR     the repository's plugins and their weights
#      GF_CONFIG_DIR        where gpuframed.json goes, or "" to choose by prefix
#      GF_DOC_COMPRESSED    whether the packager compresses the documentation
# Out: GF_INSTALL_FULL_BINDIR, GF_INSTALL_FULL_LIBDIR, GF_INSTALL_FULL_INCLUDEDIR,
#      GF_INSTALL_FULL_PLUGINDIR, GF_DOC_DIR, GF_DOC_SUFFIX (".gz" when the
#      documentation is compressed, else empty: README.md's name there is
#      README.md${GF_DOC_SUFFIX}), GF_INSTALL_CONFIG_DIR, GF_INSTALL_FULL_CONFIG,
#      GF_PC_LIBS_RPATH (gpuframe.pc's run path flag, or empty)
foreach(gf_dir BINDIR LIBDIR INCLUDEDIR DOCDIR PLUGINDIR)
  if(IS_ABSOLUTE "${GF_REL_${gf_dir}}")
    set(gf_full "${GF_REL_${gf_dir}}")
  elseif(GF_PREFIX STREQUAL "/")
    set(gf_full "/${GF_REL_${gf_dir}}")
  else()
    set(gf_full "${GF_PREFIX}/${GF_REL_${gf_dir}}")
  endif()
  set(GF_INSTALL_FULL_${gf_dir} "${gf_full}")
endforeach()
set(GF_DOC_DIR "${GF_INSTALL_FULL_DOCDIR}")
set(GF_DOC_SUFFIX "")
if(GF_DOC_COMPRESSED)
  set(GF_DOC_SUFFIX ".gz")
endif()
# A system-wide prefix: /usr, as the Debian package has it, or /usr/local.
set(gf_system_prefix OFF)
if(GF_PREFIX MATCHES "^/(usr(/local)?)?/?$")
  set(gf_system_prefix ON)
endif()
# A system service's settings live in /etc: a system-wide prefix puts the
# configuration in /etc/gpuframed.  Any other prefix (a scratch install,
# /opt/gpuframed) keeps it under the prefix, so that such an install writes
# nothing outside it.
if(GF_CONFIG_DIR)
  set(GF_INSTALL_CONFIG_DIR "${GF_CONFIG_DIR}")
elseif(gf_system_prefix)
  set(GF_INSTALL_CONFIG_DIR "/etc/gpuframed")
else()
  set(GF_INSTALL_CONFIG_DIR "${GF_PREFIX}/etc/gpuframed")
endif()
set(GF_INSTALL_FULL_CONFIG "${GF_INSTALL_CONFIG_DIR}/gpuframed.json")
# The loader finds libgpuframe.so.0 of a system-wide prefix by itself (in
# /usr/local once `ldconfig` has run); a program built with `pkg-config
# --libs gpuframe` against any other prefix is told where it lies, so that it
# runs as built, without LD_LIBRARY_PATH (SERVICE.md, "Programs against an install").
if(gf_system_prefix)
  set(GF_PC_LIBS_RPATH "")
else()
  set(GF_PC_LIBS_RPATH "-Wl,-rpath,\${libdir} ")
endif()
