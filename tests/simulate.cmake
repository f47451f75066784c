# zen simulate from the command line: a JSON line per (ranks, gbps), exit 2 on a usage error.
add_test(NAME cli_simulate_json
         COMMAND ${ZEN_CHECK_RUN} -m "\"ranks\":16,.*\"best\":\"[a-z]+\""
                 -- $<TARGET_FILE:zen> simulate --ranks 2,16 --gbps 1 --rows 100000 --json)
set_tests_properties(cli_simulate_json PROPERTIES TIMEOUT 60 LABELS cli)
add_test(NAME cli_simulate_usage
         COMMAND sh -c "$<TARGET_FILE:zen> simulate --density 2 2>/dev/null; test $? -eq 2")
set_tests_properties(cli_simulate_usage PROPERTIES TIMEOUT 60 LABELS cli)
# --calibrate prints constants that --cpu reads back; the JSON then carries the compute parts.
add_test(NAME cli_simulate_calibrate
         COMMAND ${ZEN_CHECK_RUN}
                 -m "\"balanced_cpu_ms\":[0-9.]+.*\"cpu_share\":0.25,.*\"best_cpu_frac\":0\\.[0-9]+"
                 -- sh -c "$<TARGET_FILE:zen> simulate --calibrate > simulate_cpu.env && \
grep -q '^ZEN_SPARSE_NS_PER_SORT=' simulate_cpu.env && grep -q '^ZEN_NET_MSG_CPU_US=' simulate_cpu.env && \
$<TARGET_FILE:zen> simulate --cpu simulate_cpu.env --cpu-share 0.25 --ranks 8 --gbps 10 \
--rows 100000 --json")
set_tests_properties(cli_simulate_calibrate PROPERTIES TIMEOUT 120 LABELS cli)
add_test(NAME cli_simulate_bad_cpu_file
         COMMAND sh -c "$<TARGET_FILE:zen> simulate --cpu /nonexistent 2>/dev/null; test $? -eq 2")
set_tests_properties(cli_simulate_bad_cpu_file PROPERTIES TIMEOUT 60 LABELS cli)
# --global-topk: the volume table up to 1024 ranks, one JSON line per rank count (the gap-coded
# pull keeps it below 4k(n-1)/n values' worth).
add_test(NAME cli_simulate_global_topk
         COMMAND ${ZEN_CHECK_RUN} -m "\"ranks\":1024,.*\"topk_bytes\":[0-9]+,.*\"topk_over_4k\":0\\.9"
                 -- $<TARGET_FILE:zen> simulate --global-topk 41943 --rows 4194304 --json)
set_tests_properties(cli_simulate_global_topk PROPERTIES TIMEOUT 60 LABELS cli)
