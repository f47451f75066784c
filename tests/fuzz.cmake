# Fuzzing of the sparse pull-phase decoders (tests/fuzz/fuzz_decode.c).
#
# fuzz_decode_replay: the fuzz target driven by a plain main that replays the seed corpus (and
# truncated / byte-flipped variants of every seed), a normal CTest test in every build, so gcc
# and sanitizer builds exercise the decoders' rejection paths too.
# fuzz_decode: the libFuzzer binary, only with clang and -DZEN_BUILD_FUZZ=ON. The decoder sources
# are compiled into it directly so that they carry the fuzzer's coverage instrumentation.
#   ./fuzz_decode -max_total_time=60 <copy of tests/fuzz/corpus>
set(ZEN_FUZZ_DECODE_SOURCES
    ${CMAKE_SOURCE_DIR}/src/sparse/wire/bitmap.c ${CMAKE_SOURCE_DIR}/src/sparse/wire/universe.c
    ${CMAKE_SOURCE_DIR}/src/sparse/wire/coo.c ${CMAKE_SOURCE_DIR}/src/sparse/wire/radix_sort.c
    ${CMAKE_SOURCE_DIR}/src/common/alloc.c ${CMAKE_SOURCE_DIR}/src/common/dtype.c
    ${CMAKE_SOURCE_DIR}/src/common/tunables.c ${CMAKE_SOURCE_DIR}/src/common/log.c
    ${CMAKE_SOURCE_DIR}/src/common/tunables_check.c ${CMAKE_SOURCE_DIR}/src/common/fault_spec.c)

add_executable(fuzz_decode_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_decode.c
                                  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay.c)
target_include_directories(fuzz_decode_replay PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(fuzz_decode_replay PRIVATE zen_static)
add_test(NAME fuzz_decode_replay
         COMMAND fuzz_decode_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus)
set_tests_properties(fuzz_decode_replay PROPERTIES TIMEOUT 300 LABELS unit)

if(ZEN_BUILD_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_decode ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_decode.c
                             ${ZEN_FUZZ_DECODE_SOURCES})
  target_include_directories(fuzz_decode PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
  # -Wno-unknown-warning-option: the project flags include gcc-only ones (-Wno-format-truncation)
  target_compile_options(fuzz_decode PRIVATE -fsanitize=fuzzer,address,undefined
                                             -Wno-unknown-warning-option)
  target_link_options(fuzz_decode PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_decode PRIVATE Threads::Threads m)
endif()

# The rendezvous message parsers with the proof check (fuzz_rdv) and the tcp frame header check
# (fuzz_frame): the same pair of a replay test in every build and a libFuzzer binary with clang.
set(ZEN_FUZZ_RDV_SOURCES ${CMAKE_SOURCE_DIR}/src/bootstrap/rdv_msg.c
    ${CMAKE_SOURCE_DIR}/src/bootstrap/auth.c ${CMAKE_SOURCE_DIR}/src/common/input.c)
set(ZEN_FUZZ_FRAME_SOURCES ${CMAKE_SOURCE_DIR}/src/transport/tcp_frame.c)
foreach(t rdv frame)
  add_executable(fuzz_${t}_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${t}.c
                                  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay.c)
  target_include_directories(fuzz_${t}_replay PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(fuzz_${t}_replay PRIVATE zen_static)
  add_test(NAME fuzz_${t}_replay
           COMMAND fuzz_${t}_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus_${t})
  set_tests_properties(fuzz_${t}_replay PROPERTIES TIMEOUT 300 LABELS "unit;security")
endforeach()

if(ZEN_BUILD_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  foreach(t rdv frame)
    string(TOUPPER ${t} T)
    add_executable(fuzz_${t} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${t}.c ${ZEN_FUZZ_${T}_SOURCES})
    target_include_directories(fuzz_${t} PRIVATE ${CMAKE_SOURCE_DIR}/src
                                                 ${CMAKE_SOURCE_DIR}/include ${SODIUM_INCLUDE})
    target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer,address,undefined
                                             -Wno-unknown-warning-option)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_${t} PRIVATE ${SODIUM_LIB} Threads::Threads m)
  endforeach()
endif()
