# SPDX-License-Identifier: MIT
# The installed copy of one Markdown document, whose links name installed
# files only (CMakeLists.txt, "documentation"):
#
#   cmake -DSRC=TREE_PATH -DDEST=DOC_PATH -DMAP=TREE=DOC|... -DSOURCE_DIR=DIR
#         -DOUT=FILE -P doc_links.cmake
#
# SRC is the document's path in the tree and DEST its path in the installed
# documentation directory; MAP pairs each installed document's tree path
# with its installed path.  A relative link [text](target#anchor) whose
# target, resolved from SRC's directory, is in MAP is written as the path
# from DEST's directory to the installed file; one to a file that is not
# installed keeps its text and loses the link.  Links with a scheme
# (https:, mailto:) and anchors within the page stay as they are.

cmake_minimum_required(VERSION 3.20)
foreach(var SRC DEST MAP SOURCE_DIR OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "doc_links.cmake: -D${var}= is required")
  endif()
endforeach()

string(REPLACE "|" ";" MAP "${MAP}")
file(READ "${SOURCE_DIR}/${SRC}" text)
cmake_path(GET SRC PARENT_PATH src_dir)
cmake_path(GET DEST PARENT_PATH dest_dir)
if(dest_dir STREQUAL "")
  set(dest_dir ".")
endif()

# "[text](target)": text without ']', target without ')' or a space.
string(REGEX MATCHALL "\\[[^]\n]*\\]\\([^) \n]+\\)" links "${text}")
list(REMOVE_DUPLICATES links)
foreach(link IN LISTS links)
  string(REGEX REPLACE "^\\[([^]]*)\\]\\(([^)]*)\\)$" "\\1" label "${link}")
  string(REGEX REPLACE "^\\[([^]]*)\\]\\(([^)]*)\\)$" "\\2" target "${link}")
  if(target MATCHES "^[a-z]+:" OR target MATCHES "^#")
    continue()
  endif()
  set(anchor "")
  if(target MATCHES "^([^#]*)(#.*)$")
    set(target "${CMAKE_MATCH_1}")
    set(anchor "${CMAKE_MATCH_2}")
  endif()
  if(src_dir STREQUAL "")
    set(resolved "${target}")
  else()
    set(resolved "${src_dir}/${target}")
  endif()
  cmake_path(NORMAL_PATH resolved)
  set(installed "")
  foreach(pair IN LISTS MAP)
    string(REPLACE "=" ";" pair "${pair}")
    list(GET pair 0 tree_path)
    list(GET pair 1 doc_path)
    if(tree_path STREQUAL resolved)
      set(installed "${doc_path}")
    endif()
  endforeach()
  if(installed STREQUAL "")
    if(NOT EXISTS "${SOURCE_DIR}/${resolved}")
      message(FATAL_ERROR "${SRC}: the link ${link} names ${resolved}, which the tree lacks")
    endif()
    set(replacement "${label}")
  else()
    cmake_path(RELATIVE_PATH installed BASE_DIRECTORY "${dest_dir}" OUTPUT_VARIABLE rel)
    set(replacement "[${label}](${rel}${anchor})")
  endif()
  string(REPLACE "${link}" "${replacement}" text "${text}")
endforeach()
file(WRITE "${OUT}" "${text}")
