# `zen bench sparse` with one rank per process: over tcp (zen launch) and, when built with MPI,
# under mpirun. Every scheme must report "verified":true (each rank checks its own output
# against a locally computed dense sum); the inproc runs are in test_sparse_trace.c.
add_test(NAME bench_sparse_tcp
         COMMAND ${ZEN_CHECK_RUN} -m "\"scheme\":\"auto\".*\"verified\":true" -n "\"verified\":false"
                 -- $<TARGET_FILE:zen> launch -n 3 --transport tcp -- $<TARGET_FILE:zen> bench sparse
                 --rows 5000 --density 0.02 --width 2 --iters 1 --warmup 0 --json)
set_tests_properties(bench_sparse_tcp PROPERTIES TIMEOUT 120 LABELS cli
                     ENVIRONMENT "ZEN_TIMEOUT_S=60")
find_program(BENCH_SPARSE_MPIRUN mpirun)
if(ZEN_HAVE_MPI AND BENCH_SPARSE_MPIRUN AND NOT ZEN_SANITIZE)
  add_test(NAME bench_sparse_mpi
           COMMAND ${ZEN_CHECK_RUN} -m "\"scheme\":\"auto\".*\"verified\":true"
                   -n "\"verified\":false"
                   -- ${BENCH_SPARSE_MPIRUN} --allow-run-as-root --oversubscribe -n 3
                   $<TARGET_FILE:zen> bench sparse --rows 5000 --density 0.02 --iters 1 --warmup 0
                   --json)
  set_tests_properties(bench_sparse_mpi PROPERTIES TIMEOUT 120 LABELS mpi
                       ENVIRONMENT "ZEN_TIMEOUT_S=60;OMPI_MCA_rmaps_base_oversubscribe=1")
endif()

# The BALANCED ablation switches (ZEN Fig. 16/17) from the command line: still the exact sum, and
# each switch changes what it acts on against the default (the pull blobs' format and bytes, the
# hash partition's serial items and passes; tests/ablation_check.py says what and why).
add_test(NAME bench_sparse_ablation
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/ablation_check.py $<TARGET_FILE:zen>)
set_tests_properties(bench_sparse_ablation PROPERTIES TIMEOUT 120 LABELS cli)
