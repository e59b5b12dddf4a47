# Unity builds by folder. A group of up to KILN_UNITY_FILES sources of one folder compiles
# as one translation unit: the headers they share (the standard library, fmt, gtest, kiln's
# API) are parsed and their templates instantiated once per group instead of once per file,
# which is most of what a kiln object costs. Groups never span folders, so a folder's
# anonymous-namespace helpers only have to be distinct within it, and an edit recompiles
# one group of its own folder. KILN_UNITY_BUILD=OFF compiles file by file.
#
# The group files are written here rather than by CMake's UNITY_BUILD, whose files include
# each source by its absolute path: that path is in the text ccache hashes, so a clone in
# another directory (CI's clean checkout) found nothing in the cache. Ours include each
# source by its path relative to the group file, the same in every clone.
option(KILN_UNITY_BUILD "Compile each folder's sources in unity groups" ON)
set(KILN_UNITY_FILES 8 CACHE STRING "Most sources in one unity group")

# Puts the sources of `target` into unity groups: each folder's sources (in the target's
# order) in ceil(n / KILN_UNITY_FILES) groups of nearly equal size. Sources with flags of
# their own (compile options, definitions, include directories, no precompiled header) and
# those named after EXCLUDE (files that include themselves, as Highway's per-target SIMD
# files do) compile alone.
function(kiln_unity_groups target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "EXCLUDE")
  if(NOT KILN_UNITY_BUILD)
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(binary_dir ${target} BINARY_DIR)
  set(folders "")
  foreach(source IN LISTS sources)
    if(NOT source MATCHES "\\.(cc|cxx|cpp)$" OR source IN_LIST arg_EXCLUDE)
      continue()
    endif()
    set(own_flags FALSE)
    foreach(property COMPILE_OPTIONS COMPILE_DEFINITIONS INCLUDE_DIRECTORIES
                     SKIP_PRECOMPILE_HEADERS)
      get_source_file_property(value ${source} TARGET_DIRECTORY ${target} ${property})
      if(value)
        set(own_flags TRUE)
      endif()
    endforeach()
    if(own_flags)
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
  set(unity_dir ${binary_dir}/unity/${target})
  foreach(id IN LISTS folders)
    list(LENGTH files_${id} count)
    math(EXPR groups "(${count} + ${KILN_UNITY_FILES} - 1) / ${KILN_UNITY_FILES}")
    set(index 0)
    foreach(source IN LISTS files_${id})
      math(EXPR group "${index} * ${groups} / ${count}")
      file(RELATIVE_PATH relative ${unity_dir} ${source})
      string(APPEND text_${id}_${group} "#include \"${relative}\"\n")
      math(EXPR index "${index} + 1")
    endforeach()
    math(EXPR last "${groups} - 1")
    foreach(group RANGE ${last})
      set(unity_file ${unity_dir}/${id}_${group}.cc)
      # Rewritten only when its text changes, so that a reconfigure recompiles nothing.
      file(CONFIGURE OUTPUT ${unity_file}
           CONTENT "// A unity group of ${target} (cmake/unity.cmake); generated.\n${text_${id}_${group}}"
           @ONLY)
      target_sources(${target} PRIVATE ${unity_file})
    endforeach()
    set_source_files_properties(${files_${id}} TARGET_DIRECTORY ${target} PROPERTIES
                                HEADER_FILE_ONLY ON)
  endforeach()
  # GCC warns when a type of a header has members of a type from an anonymous namespace,
  # since each includer would get a different one; a unity group includes .cc files, each
  # exactly once, so the warning's premise does not hold there.
  target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
endfunction()
