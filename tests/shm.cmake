# The shm transport through the CLI: `zen launch` picks it by default (--transport auto puts the
# ranks of one host on shared memory) and the benchmarks name it; `zen bench sparse` verifies
# every scheme's output against a dense sum on every rank.
add_test(NAME bench_sparse_shm
         COMMAND ${ZEN_CHECK_RUN} -m "\"scheme\":\"auto\".*\"transport\":\"shm\".*\"verified\":true"
                 -n "\"verified\":false"
                 -- $<TARGET_FILE:zen> launch -n 3 -- $<TARGET_FILE:zen> bench sparse --rows 5000
                 --density 0.02 --width 2 --iters 1 --warmup 0 --json)
set_tests_properties(bench_sparse_shm PROPERTIES TIMEOUT 120 LABELS cli
                     ENVIRONMENT "ZEN_TIMEOUT_S=60")
add_test(NAME bench_allreduce_shm_forced
         COMMAND ${ZEN_CHECK_RUN} -m "\"transport\":\"shm\"" -n "\"wrong\":[1-9]"
                 -- $<TARGET_FILE:zen> launch -n 3 --transport shm -- $<TARGET_FILE:zen> bench
                 allreduce -c -b 1K -e 4M -f 16 -w 1 -n 2 --json)
set_tests_properties(bench_allreduce_shm_forced PROPERTIES TIMEOUT 120 LABELS cli
                     ENVIRONMENT "ZEN_TIMEOUT_S=60")
add_test(NAME launch_transport_usage
         COMMAND ${ZEN_CHECK_RUN} -x 2 -m "bad value .carrier-pigeon. for --transport: use auto, inproc, shm, tcp, shm\\+tcp or mpi"
                 -- $<TARGET_FILE:zen> launch -n 2 --transport carrier-pigeon -- true)
set_tests_properties(launch_transport_usage PROPERTIES TIMEOUT 30 LABELS cli)
add_test(NAME launch_bind_core_shm
         COMMAND ${ZEN_CHECK_RUN} -m "\"transport\":\"shm\"" -n "\"wrong\":[1-9]"
                 -- $<TARGET_FILE:zen> launch -n 2 --bind core -- $<TARGET_FILE:zen> bench p2p -b 8
                 -e 64K -f 64 -w 1 -n 20 -c --json)
set_tests_properties(launch_bind_core_shm PROPERTIES TIMEOUT 60 LABELS cli)

# The shm setup socket under attack (strangers during the hand-over, another user, missing
# ranks named) is part of the security suite (docs/security.md).
set_tests_properties(test_shm_boot PROPERTIES LABELS "unit;security")

# The same through the CLI, from another process that finds the sockets in /proc/net/unix.
if(EXISTS /usr/bin/python3)
  add_test(NAME security_shm_setup_strangers
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/shm_setup_strangers.py
                   $<TARGET_FILE:zen>)
  set_tests_properties(security_shm_setup_strangers PROPERTIES TIMEOUT 120
                       LABELS "cli;security")
endif()

# mpirun's habits: -np for -n, and the command right after the options without `--`.
add_test(NAME launch_np_no_dashes
         COMMAND ${ZEN_CHECK_RUN} -m "\"wrong\":0" -n "\"wrong\":[1-9]"
                 -- $<TARGET_FILE:zen> launch -np 2 $<TARGET_FILE:zen> bench allreduce -b 8 -e 1K
                 -w 1 -n 2 -c --json)
set_tests_properties(launch_np_no_dashes PROPERTIES TIMEOUT 60 LABELS cli
                     ENVIRONMENT "ZEN_TIMEOUT_S=30")
