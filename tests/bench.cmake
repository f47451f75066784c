# The MPI_Allreduce baseline of bench/run_dense.sh checks its own results (-c) under mpirun;
# the `zen bench` CLI itself is tested by test_cli_bench.c. Not in sanitizer builds (Open MPI is
# not instrumented).
find_program(BENCH_MPIRUN mpirun)
if(TARGET mpi_allreduce AND BENCH_MPIRUN AND NOT ZEN_SANITIZE)
  add_test(NAME bench_mpi_allreduce
           COMMAND ${ZEN_CHECK_RUN} -m "\"wrong\":0}" -n "\"wrong\":[1-9]"
                   -- ${BENCH_MPIRUN} --allow-run-as-root --oversubscribe -n 3
                   $<TARGET_FILE:mpi_allreduce> -c -b 1K -e 1M -f 32 -w 1 -n 2 --json)
  set_tests_properties(bench_mpi_allreduce PROPERTIES TIMEOUT 120 LABELS mpi)
endif()
