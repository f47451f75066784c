# Fuzz targets (tests/fuzz/fuzz_*.c), each built twice:
#
# fuzz_X_replay: the target driven by a plain main (fuzz/replay.c) that replays its seed corpus
# (and truncated / byte-flipped variants of every seed), a normal CTest test in every build, so
# gcc and sanitizer builds exercise the rejection paths too.
# fuzz_X: the libFuzzer binary, only with clang and -DZEN_BUILD_FUZZ=ON (`make test` builds them
# in build-fuzz and runs each briefly; docs/security.md, "Fuzzing", has the long runs):
#   ./fuzz_X -runs=1000000 <copy of tests/fuzz/corpus_X>
#
#   decode  the sparse pull-phase decoders (src/sparse/wire)
#   rdv     the rendezvous message parsers with the proof check (src/bootstrap/rdv_msg.c)
#   frame   the tcp frame header check (src/transport/tcp_frame.c)
#   trace   gradient trace files (zen_trace_read, src/sparse/trace)
#   ckpt    trainer checkpoints (zen_ckpt_load, src/train/checkpoint.c)
#   shmboot the shm hand-over message check (src/transport/shm_hand.c)
#   nodelist Slurm host and tasks-per-node lists (src/bootstrap/nodelist.c)
set(ZEN_FUZZ_TARGETS decode rdv frame trace shmboot nodelist)
if(TARGET zentrain)
  list(APPEND ZEN_FUZZ_TARGETS ckpt)
endif()

foreach(t ${ZEN_FUZZ_TARGETS})
  add_executable(fuzz_${t}_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${t}.c
                                  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay.c)
  target_include_directories(fuzz_${t}_replay PRIVATE ${CMAKE_SOURCE_DIR}/src)
  if(t STREQUAL "ckpt")
    target_link_libraries(fuzz_${t}_replay PRIVATE zentrain)
  endif()
  target_link_libraries(fuzz_${t}_replay PRIVATE zen_static)
  add_test(NAME fuzz_${t}_replay
           COMMAND fuzz_${t}_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus_${t})
  set_tests_properties(fuzz_${t}_replay PROPERTIES TIMEOUT 300 LABELS "unit;security")
endforeach()

# The libFuzzer binaries link an instrumented copy of libzen (and of the trainer for ckpt) built
# from the same source lists as zen_static and zentrain, so a target never misses a file that a
# parser came to depend on (a hand-kept list of sources did, twice).
if(ZEN_BUILD_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  # -Wno-unknown-warning-option: the project flags include gcc-only ones (-Wno-format-truncation)
  set(ZEN_FUZZ_FLAGS -fsanitize=address,undefined -Wno-unknown-warning-option)
  add_library(zen_fuzz_lib STATIC ${ZEN_SOURCES})
  target_compile_options(zen_fuzz_lib PRIVATE -fsanitize=fuzzer-no-link ${ZEN_FUZZ_FLAGS})
  target_include_directories(zen_fuzz_lib PUBLIC ${CMAKE_SOURCE_DIR}/include
                             PRIVATE ${CMAKE_SOURCE_DIR}/src ${CBLAS_INCLUDE} ${SODIUM_INCLUDE})
  target_link_libraries(zen_fuzz_lib PUBLIC ${OPENBLAS_LIB} ${SODIUM_LIB} Threads::Threads m)
  if(ZEN_HAVE_MPI)
    target_compile_definitions(zen_fuzz_lib PRIVATE ZEN_HAVE_MPI=1)
    target_include_directories(zen_fuzz_lib PRIVATE ${MPI_C_INCLUDE_DIRS})
    target_link_libraries(zen_fuzz_lib PUBLIC MPI::MPI_C)
  endif()
  if(TARGET zentrain)
    add_library(zen_fuzz_train STATIC ${ZEN_TRAIN_SOURCES})
    target_compile_options(zen_fuzz_train PRIVATE -fsanitize=fuzzer-no-link ${ZEN_FUZZ_FLAGS})
    target_include_directories(zen_fuzz_train PUBLIC ${CMAKE_SOURCE_DIR}/src/train
                               ${CMAKE_SOURCE_DIR}/include PRIVATE ${CBLAS_INCLUDE})
    target_link_libraries(zen_fuzz_train PUBLIC ${OPENBLAS_LIB} Threads::Threads m)
  endif()
  foreach(t ${ZEN_FUZZ_TARGETS})
    add_executable(fuzz_${t} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${t}.c)
    target_include_directories(fuzz_${t} PRIVATE ${CMAKE_SOURCE_DIR}/src)
    target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer ${ZEN_FUZZ_FLAGS})
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer,address,undefined)
    if(t STREQUAL "ckpt")
      target_link_libraries(fuzz_${t} PRIVATE zen_fuzz_train)
    endif()
    target_link_libraries(fuzz_${t} PRIVATE zen_fuzz_lib)
  endforeach()
  add_custom_target(fuzz_targets)
  foreach(t ${ZEN_FUZZ_TARGETS})
    add_dependencies(fuzz_targets fuzz_${t})
  endforeach()
endif()
