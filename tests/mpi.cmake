# The collective and sparse suites over the mpi transport, under mpirun (not in sanitizer builds:
# Open MPI itself is not instrumented and its process-lifetime allocations swamp LeakSanitizer).
find_program(MPIRUN mpirun)
if(ZEN_HAVE_MPI AND MPIRUN AND NOT ZEN_SANITIZE)
  add_executable(mpi_suite ${CMAKE_CURRENT_SOURCE_DIR}/mpi_suite.c)
  target_link_libraries(mpi_suite PRIVATE zen_testutil)
  foreach(n 1 3 4)
    add_test(NAME mpi_suite_${n}
             COMMAND ${MPIRUN} --allow-run-as-root --oversubscribe -n ${n} $<TARGET_FILE:mpi_suite>)
    set_tests_properties(mpi_suite_${n} PROPERTIES TIMEOUT 300 LABELS mpi
                         ENVIRONMENT "ZEN_TIMEOUT_S=60;OMPI_MCA_rmaps_base_oversubscribe=1")
  endforeach()
  # auto picks MPI's own allreduce with ZEN_MPI_NATIVE=1
  add_test(NAME mpi_suite_native_4
           COMMAND ${MPIRUN} --allow-run-as-root --oversubscribe -n 4 $<TARGET_FILE:mpi_suite>)
  set_tests_properties(mpi_suite_native_4 PROPERTIES TIMEOUT 300 LABELS mpi
                       ENVIRONMENT "ZEN_TIMEOUT_S=60;ZEN_MPI_NATIVE=1")
endif()
