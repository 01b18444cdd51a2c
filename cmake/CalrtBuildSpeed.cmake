# How the project builds fast on a 2-core machine (README.md, "Build times"): ccache when it is
# installed, a faster linker when one is, and one precompiled header per kind of target for
# the heavy third-party headers every unit would otherwise parse again.
# scripts/build-profile lists where a build's time goes; the figures behind each choice here
# are in README.md.

# Debug information: line tables by default. They are what stack traces and sanitizer reports
# need, and full DWARF costs about a third more compile time on this code's template-heavy
# units (README.md, "Build times"). -DCALRT_DEBUG_INFO=full restores -g for a debugger's view
# of locals; a Debug build always has it.
set(CALRT_DEBUG_INFO "lines" CACHE STRING "Debug information in RelWithDebInfo: lines or full")
set_property(CACHE CALRT_DEBUG_INFO PROPERTY STRINGS lines full)
if(CALRT_DEBUG_INFO STREQUAL "lines")
  foreach(lang C CXX)
    string(REPLACE "-g" "-g1" CMAKE_${lang}_FLAGS_RELWITHDEBINFO "${CMAKE_${lang}_FLAGS_RELWITHDEBINFO}")
  endforeach()
elseif(NOT CALRT_DEBUG_INFO STREQUAL "full")
  message(FATAL_ERROR "CALRT_DEBUG_INFO=${CALRT_DEBUG_INFO}: expected lines or full")
endif()

# Unity builds: each target's sources compile in batches of eight, so that the inline and
# template code they share (nlohmann::json, fmt, the C++ wrapper) is instantiated and
# optimised once per batch instead of once per file. This is the largest single saving
# (README.md, "Build times"); -DCALRT_UNITY=OFF compiles file by file.
option(CALRT_UNITY "Compile each target's sources in batches (unity build)" ON)
set(CMAKE_UNITY_BUILD ${CALRT_UNITY})
set(CALRT_UNITY_BATCH 8 CACHE STRING "Sources per unity unit (0: one unit per target)")
set(CMAKE_UNITY_BUILD_BATCH_SIZE ${CALRT_UNITY_BATCH})
if(CALRT_UNITY AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC warns when a class derives from a type of an anonymous namespace that was declared
  # outside the main file, which in a unity unit is every file: a test fixture would trip
  # it. The warning still guards headers in the file-by-file build.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage>)
endif()

# ccache: used when installed, never required. The precompiled header needs its sloppiness
# settings, or ccache would refuse to cache the units that use it.
option(CALRT_CCACHE "Compile through ccache when it is installed" ON)
if(CALRT_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(CALRT_CCACHE_PROGRAM ccache)
  if(CALRT_CCACHE_PROGRAM)
    set(launcher ${CMAKE_COMMAND} -E env
        CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
        ${CALRT_CCACHE_PROGRAM})
    set(CMAKE_C_COMPILER_LAUNCHER ${launcher})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${launcher})
    message(STATUS "calrt: compiling through ${CALRT_CCACHE_PROGRAM}")
  endif()
endif()

# The linker: mold, else lld, else the compiler's default. Linking ~40 test executables
# against static libraries with debug info is where the default linker spends its time.
set(CALRT_LINKER "auto" CACHE STRING "Linker: auto (mold, lld, default), mold, lld or default")
set_property(CACHE CALRT_LINKER PROPERTY STRINGS auto mold lld default)
set(calrt_linker ${CALRT_LINKER})
if(calrt_linker STREQUAL "auto")
  set(calrt_linker default)
  foreach(candidate mold lld)
    find_program(CALRT_LD_${candidate} NAMES ld.${candidate} ${candidate})
    if(CALRT_LD_${candidate})
      set(calrt_linker ${candidate})
      break()
    endif()
  endforeach()
endif()
if(NOT calrt_linker STREQUAL "default")
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=${calrt_linker}" CALRT_HAVE_LD_${calrt_linker})
  if(CALRT_HAVE_LD_${calrt_linker})
    add_link_options(-fuse-ld=${calrt_linker})
    message(STATUS "calrt: linking with ${calrt_linker}")
  elseif(NOT CALRT_LINKER STREQUAL "auto")
    message(FATAL_ERROR "CALRT_LINKER=${CALRT_LINKER}: the compiler cannot link with it")
  endif()
endif()

# Precompiled headers. A unit can only use a precompiled header built with the same
# code-generation flags and the same command-line macros that the header's contents test, so
# there is one per kind of target: libraries (PIC), libraries with hidden visibility (the
# runtimes' shared libraries), executables (PIE), and test executables (PIE plus GoogleTest). Every consumer gets the macros of the libraries in the header
# (spdlog's, fmt's) through calrt_pch_flags, even when it does not link them.
option(CALRT_PCH "Precompile the heavy third-party headers" ON)

set(CALRT_PCH_HEADERS
  <algorithm> <array> <chrono> <cstdint> <cstring> <filesystem> <functional> <map>
  <memory> <mutex> <optional> <set> <sstream> <stdexcept> <string> <string_view>
  <unordered_map> <utility> <vector>
  <nlohmann/json.hpp> <spdlog/spdlog.h> <spdlog/fmt/fmt.h> <tl/expected.hpp>)

add_library(calrt_pch_flags INTERFACE)
foreach(lib nlohmann_json::nlohmann_json spdlog::spdlog tl::expected)
  target_include_directories(calrt_pch_flags SYSTEM INTERFACE
                             $<TARGET_PROPERTY:${lib},INTERFACE_INCLUDE_DIRECTORIES>)
  target_compile_definitions(calrt_pch_flags INTERFACE
                             $<TARGET_PROPERTY:${lib},INTERFACE_COMPILE_DEFINITIONS>)
endforeach()
get_target_property(calrt_fmt_defs fmt::fmt INTERFACE_COMPILE_DEFINITIONS)
if(calrt_fmt_defs)
  target_compile_definitions(calrt_pch_flags INTERFACE ${calrt_fmt_defs})
endif()

if(CALRT_PCH)
  # The hosts compile nothing but the header; the executables' hosts are executables, so
  # that their code-generation flags (PIE) are exactly those of the units that reuse them.
  set(anchor ${PROJECT_SOURCE_DIR}/cmake/pch_anchor.cpp)
  add_library(calrt_pch_library OBJECT ${anchor})
  add_library(calrt_pch_hidden OBJECT ${anchor})
  set_target_properties(calrt_pch_hidden PROPERTIES CXX_VISIBILITY_PRESET hidden
                                                    VISIBILITY_INLINES_HIDDEN ON)
  add_executable(calrt_pch_executable EXCLUDE_FROM_ALL ${anchor})
  add_executable(calrt_pch_test EXCLUDE_FROM_ALL ${anchor})
  target_link_libraries(calrt_pch_test PRIVATE GTest::gtest)
  foreach(host calrt_pch_library calrt_pch_hidden calrt_pch_executable calrt_pch_test)
    target_link_libraries(${host} PRIVATE calrt_pch_flags)
    target_precompile_headers(${host} PRIVATE ${CALRT_PCH_HEADERS})
  endforeach()
  target_precompile_headers(calrt_pch_test PRIVATE <gtest/gtest.h>)
endif()

# calrt_precompile(TARGET...): the target's units use the precompiled header of its kind.
# GCC rejects a precompiled header built with other code-generation flags (-Winvalid-pch,
# an error with CALRT_WERROR) and clang refuses it outright, so a mismatch cannot go unseen.
function(calrt_precompile)
  foreach(target IN LISTS ARGN)
    target_link_libraries(${target} PRIVATE calrt_pch_flags)
    if(NOT CALRT_PCH)
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.cpp$")
    if(NOT sources)
      continue()  # C only (the fake runtimes of tests/abi): nothing to precompile for
    endif()
    get_target_property(type ${target} TYPE)
    get_target_property(links ${target} LINK_LIBRARIES)
    get_target_property(visibility ${target} CXX_VISIBILITY_PRESET)
    if(visibility STREQUAL "hidden")
      # Hidden visibility changes how the header's inline code is emitted.
      target_precompile_headers(${target} REUSE_FROM calrt_pch_hidden)
    elseif(type STREQUAL "EXECUTABLE" AND "GTest::gtest_main" IN_LIST links)
      target_link_libraries(${target} PRIVATE GTest::gtest)
      target_precompile_headers(${target} REUSE_FROM calrt_pch_test)
    elseif(type STREQUAL "EXECUTABLE")
      target_precompile_headers(${target} REUSE_FROM calrt_pch_executable)
    else()
      target_precompile_headers(${target} REUSE_FROM calrt_pch_library)
    endif()
  endforeach()
endfunction()

# Every target that compiles C++ in the project, so that none is left out of the above.
function(calrt_compiled_targets out dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  set(found)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$"
       AND NOT target MATCHES "^calrt_pch_")
      list(APPEND found ${target})
    endif()
  endforeach()
  foreach(subdir IN LISTS subdirs)
    calrt_compiled_targets(below ${subdir})
    list(APPEND found ${below})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()
