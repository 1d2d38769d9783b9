# Run by cpack (CPACK_PRE_BUILD_SCRIPTS) once the files are staged: puts
# copyright and changelog.Debian.gz into /usr/share/doc/PACKAGE of every
# package, as Debian policy wants them, and the package's lintian overrides
# (overrides/PACKAGE, each with its reason) into
# /usr/share/lintian/overrides.  Variables are cmake/packaging.cmake's.
foreach(component IN LISTS CPACK_COMPONENTS_ALL)
  string(TOUPPER ${component} upper)
  set(package ${CPACK_DEBIAN_${upper}_PACKAGE_NAME})
  set(doc "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/${component}/usr/share/doc/${package}")
  file(MAKE_DIRECTORY "${doc}")
  file(COPY ${CPACK_GF_DEB_DOCS} DESTINATION "${doc}")
  execute_process(COMMAND gzip -9nf "${doc}/changelog.Debian" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip ${doc}/changelog.Debian failed")
  endif()
  set(overrides "${CPACK_GF_DEB_DIR}/overrides/${package}")
  if(EXISTS "${overrides}")
    file(COPY "${overrides}" DESTINATION
         "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/${component}/usr/share/lintian/overrides")
  endif()
endforeach()
