# Fuzzing of the shm hand-over message check (tests/fuzz/fuzz_shmboot.c), the same pair as in
# fuzz.cmake: fuzz_shmboot_replay replays the seed corpus (with truncations and byte flips) in
# every build; fuzz_shmboot is the libFuzzer binary, only with clang and -DZEN_BUILD_FUZZ=ON.
#   ./fuzz_shmboot -runs=1000000 <copy of tests/fuzz/corpus_shmboot>
add_executable(fuzz_shmboot_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_shmboot.c
                                   ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay.c)
target_include_directories(fuzz_shmboot_replay PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(fuzz_shmboot_replay PRIVATE zen_static)
add_test(NAME fuzz_shmboot_replay
         COMMAND fuzz_shmboot_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus_shmboot)
set_tests_properties(fuzz_shmboot_replay PROPERTIES TIMEOUT 300 LABELS "unit;security")

if(ZEN_BUILD_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  add_executable(fuzz_shmboot ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_shmboot.c
                              ${CMAKE_SOURCE_DIR}/src/transport/shm_hand.c)
  target_include_directories(fuzz_shmboot PRIVATE ${CMAKE_SOURCE_DIR}/src
                                                  ${CMAKE_SOURCE_DIR}/include)
  target_compile_options(fuzz_shmboot PRIVATE -fsanitize=fuzzer,address,undefined
                                              -Wno-unknown-warning-option)
  target_link_options(fuzz_shmboot PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
