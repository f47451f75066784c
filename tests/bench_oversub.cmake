# zen bench says when its ranks outnumber the cores they may use (#37: 16 ranks on 2 cores
# printed a normal table). taskset pins the run to one core, so 2 ranks are oversubscribed on
# any machine; 1 rank never is.
find_program(ZEN_TASKSET taskset)
if(ZEN_TASKSET)
  set(zen_os_note "^# oversubscribed: 2 ranks on 1 core: times include scheduling")
  set(zen_os_dense $<TARGET_FILE:zen> bench allreduce -b 8 -e 8 -w 1 -n 2)
  set(zen_os_sparse $<TARGET_FILE:zen> bench sparse --rows 2000 --iters 2 --warmup 1
      --schemes dense)
  add_test(NAME bench_oversub_dense
           COMMAND ${ZEN_CHECK_RUN} -m "${zen_os_note}"
                   -- ${ZEN_TASKSET} -c 0 ${zen_os_dense} --ranks 2)
  add_test(NAME bench_oversub_dense_json
           COMMAND ${ZEN_CHECK_RUN} -m "\"cores\":1,\"oversubscribed\":true,"
                   -- ${ZEN_TASKSET} -c 0 ${zen_os_dense} --ranks 2 --json)
  add_test(NAME bench_oversub_sparse
           COMMAND ${ZEN_CHECK_RUN} -m "${zen_os_note}" -m "^# per call:"
                   -- ${ZEN_TASKSET} -c 0 ${zen_os_sparse} --ranks 2)
  add_test(NAME bench_oversub_sparse_json
           COMMAND ${ZEN_CHECK_RUN} -m "\"cores\":1,\"oversubscribed\":true,"
                   -- ${ZEN_TASKSET} -c 0 ${zen_os_sparse} --ranks 2 --json)
  add_test(NAME bench_oversub_none
           COMMAND ${ZEN_CHECK_RUN} -n "oversubscribed: " -m "^# ranks 1,"
                   -- ${ZEN_TASKSET} -c 0 ${zen_os_dense} --ranks 1)
  add_test(NAME bench_oversub_none_json
           COMMAND ${ZEN_CHECK_RUN} -m "\"cores\":1,\"oversubscribed\":false,"
                   -- ${ZEN_TASKSET} -c 0 ${zen_os_sparse} --ranks 1 --json)
  set_tests_properties(bench_oversub_dense bench_oversub_dense_json bench_oversub_sparse
                       bench_oversub_sparse_json bench_oversub_none bench_oversub_none_json
                       PROPERTIES TIMEOUT 60 LABELS cli)
endif()
