include(Catch)

# Shared build settings: one warnings target, one sanitizer option, one helper per module.

add_library(sandfort_warnings INTERFACE)
target_compile_options(sandfort_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wnon-virtual-dtor
  # GCC 12 misreports Asio coroutine frames (operator new/delete pairs) as mismatched.
  -Wno-mismatched-new-delete)
if(SANDFORT_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # In a unity batch GCC takes every included .cpp for a header and warns about its own
  # anonymous-namespace types.
  target_compile_options(sandfort_warnings INTERFACE -Wno-subobject-linkage)
endif()

add_library(sandfort_sanitize INTERFACE)
if(SANDFORT_SANITIZE)
  target_compile_options(sandfort_sanitize INTERFACE -fsanitize=${SANDFORT_SANITIZE} -fno-omit-frame-pointer)
  target_link_options(sandfort_sanitize INTERFACE -fsanitize=${SANDFORT_SANITIZE})
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang" AND SANDFORT_SANITIZE MATCHES "undefined")
    # clang <= 16: -fsanitize=function (part of "undefined") puts prologue data on the split
    # functions of a coroutine and the backend fails with "Cannot represent a difference across
    # sections" (llvm/llvm-project#49689, #54153), e.g. on src/http/url_client.cpp.
    target_compile_options(sandfort_sanitize INTERFACE -fno-sanitize=function)
    target_link_options(sandfort_sanitize INTERFACE -fno-sanitize=function)
  endif()
endif()

# Precompiled headers: Asio, Beast, nlohmann/json and the standard library are parsed once per
# build (by sandfort_pch for the product, sandfort_test_pch for the tests, which add Catch2 and
# build at -O1) instead of once per translation unit: about 7 s of every unity batch. GCC takes a
# precompiled header only when the macros it uses are defined as they were for it, so it serves
# the targets that link Asio (whose definitions they share), found by their dependencies.
# GCC only for now: clang refuses, rather than ignores, a precompiled header whose options differ,
# and the sanitized clang build has not been measured with it.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  option(SANDFORT_PCH "Precompile the common headers" ON)
else()
  option(SANDFORT_PCH "Precompile the common headers" OFF)
endif()
set_property(GLOBAL PROPERTY SANDFORT_ASIO_USERS sandfort_asio sandfort_asio_ssl)
set(SANDFORT_PCH_HEADERS
    <boost/asio/as_tuple.hpp> <boost/asio/awaitable.hpp> <boost/asio/co_spawn.hpp> <boost/asio/detached.hpp>
    <boost/asio/experimental/awaitable_operators.hpp> <boost/asio/io_context.hpp> <boost/asio/ip/tcp.hpp>
    <boost/asio/local/stream_protocol.hpp> <boost/asio/steady_timer.hpp> <boost/asio/use_awaitable.hpp>
    <boost/beast/core.hpp> <boost/beast/http.hpp> <boost/beast/websocket.hpp> <nlohmann/json.hpp>
    <chrono> <functional> <map> <memory> <optional> <string> <string_view> <vector>)

# Sets OUT to whether the list in variable DEPS names Asio or a target that links it.
macro(sandfort_uses_asio deps out)
  get_property(_asio_users GLOBAL PROPERTY SANDFORT_ASIO_USERS)
  set(${out} FALSE)
  foreach(_dep IN LISTS ${deps})
    if(_dep IN_LIST _asio_users)
      set(${out} TRUE)
    endif()
  endforeach()
endmacro()

function(sandfort_precompiled_headers target host)
  if(SANDFORT_PCH)
    target_precompile_headers(${target} REUSE_FROM ${host})
  endif()
endfunction()

# sandfort_module(NAME SOURCES ... DEPS ...) makes library target sandfort_NAME
# with public headers under include/sandfort/NAME.
function(sandfort_module name)
  cmake_parse_arguments(M "" "" "SOURCES;DEPS" ${ARGN})
  add_library(sandfort_${name} STATIC ${M_SOURCES})
  target_include_directories(sandfort_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                                              PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(sandfort_${name} PUBLIC ${M_DEPS} PRIVATE sandfort_warnings sandfort_sanitize)
  sandfort_uses_asio(M_DEPS uses_asio)
  if(uses_asio)
    set_property(GLOBAL APPEND PROPERTY SANDFORT_ASIO_USERS sandfort_${name})
    sandfort_precompiled_headers(sandfort_${name} sandfort_pch)
  endif()
endfunction()

# sandfort_test(NAME SOURCES ... DEPS ...) makes a Catch2 test binary registered with ctest.
function(sandfort_test name)
  cmake_parse_arguments(T "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_DEPS} sandfort_catch_main sandfort_warnings sandfort_sanitize)
  sandfort_uses_asio(T_DEPS uses_asio)
  if(uses_asio)
    sandfort_precompiled_headers(${name} sandfort_test_pch)
  endif()
  # UBSan's vptr check needs a pipe to test whether it may read an object: with every descriptor
  # used up on purpose it reports valid objects as "invalid vptr". Those tests run in the plain build.
  set(spec "")
  if(SANDFORT_SANITIZE MATCHES "undefined")
    set(spec "~[exhausts-descriptors]")
  endif()
  # One ctest entry per Catch2 test case, so the summary counts real tests. An entry that runs no
  # test fails (-w NoTests): Catch2's discovery cuts a name at a `;`, and the cut name matched
  # nothing, so such a test never ran and still passed. Test names carry no `;` for that reason.
  catch_discover_tests(${name} TEST_SPEC ${spec} EXTRA_ARGS -w NoTests
                       PROPERTIES ENVIRONMENT "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1;ASAN_OPTIONS=detect_leaks=1")
endfunction()

# One version for every binary and /healthz: the project's. A version change recompiles only the
# few files that include sandfort/version.hpp.
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.hpp.in ${PROJECT_BINARY_DIR}/generated/sandfort/version.hpp @ONLY)
add_library(sandfort_version INTERFACE)
target_include_directories(sandfort_version INTERFACE ${PROJECT_BINARY_DIR}/generated)
