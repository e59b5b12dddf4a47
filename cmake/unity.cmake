# Unity builds by folder. A group of up to KILN_UNITY_FILES sources of one folder compiles
# as one translation unit: the headers they share (the standard library, fmt, gtest, kiln's
# API) are parsed and their templates instantiated once per group instead of once per file,
# which is most of what a kiln object costs. Groups never span folders, so a folder's
# anonymous-namespace helpers only have to be distinct within it, and an edit recompiles
# one group of its own folder. KILN_UNITY_BUILD=OFF compiles file by file.
option(KILN_UNITY_BUILD "Compile each folder's sources in unity groups" ON)
set(KILN_UNITY_FILES 8 CACHE STRING "Most sources in one unity group")

# Puts the sources of `target` into unity groups: each folder's sources (in the target's
# order) in ceil(n / KILN_UNITY_FILES) groups of nearly equal size. Sources with their own
# flags are left out by CMake itself; `exclude` names more (files that include themselves,
# as Highway's per-target SIMD files do).
function(kiln_unity_groups target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "EXCLUDE")
  if(NOT KILN_UNITY_BUILD)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(folders "")
  foreach(source IN LISTS sources)
    if(NOT source MATCHES "\\.(cc|cxx|cpp)$" OR source IN_LIST arg_EXCLUDE)
      continue()
    endif()
    get_filename_component(folder ${source} DIRECTORY)
    file(RELATIVE_PATH folder ${CMAKE_SOURCE_DIR} ${folder})
    string(MAKE_C_IDENTIFIER "${folder}" id)
    if(NOT id IN_LIST folders)
      list(APPEND folders ${id})
      set(files_${id} "")
    endif()
    list(APPEND files_${id} ${source})
  endforeach()
  foreach(id IN LISTS folders)
    list(LENGTH files_${id} count)
    math(EXPR groups "(${count} + ${KILN_UNITY_FILES} - 1) / ${KILN_UNITY_FILES}")
    set(index 0)
    foreach(source IN LISTS files_${id})
      math(EXPR group "${index} * ${groups} / ${count}")
      set_property(SOURCE ${source} TARGET_DIRECTORY ${target} PROPERTY UNITY_GROUP
                   "${target}_${id}_${group}")
      math(EXPR index "${index} + 1")
    endforeach()
  endforeach()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  # GCC warns when a type of a header has members of a type from an anonymous namespace,
  # since each includer would get a different one; a unity group includes .cc files, each
  # exactly once, so the warning's premise does not hold there.
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
endfunction()
