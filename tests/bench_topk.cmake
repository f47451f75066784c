# `zen bench topk`: a small sweep in both modes, f32 and bf16, 3 threads; every size must keep its
# count contract (the command exits 1 otherwise) and report the reference's mass recall.
add_test(NAME bench_topk_json
         COMMAND ${ZEN_CHECK_RUN} -m "\"size\":1048576,\"k\":10486,.*\"in_contract\":true"
                 -n "\"in_contract\":false"
                 -- $<TARGET_FILE:zen> bench topk -b 64K -e 1M -f 4 --ratio 0.01 --threads 3
                 --iters 2 --warmup 0 --json)
add_test(NAME bench_topk_table
         COMMAND ${ZEN_CHECK_RUN} -m "^# zen bench topk \\|" -m "^ +262144 +2622 +2622 +1.000 .* ok$"
                 -- $<TARGET_FILE:zen> bench topk --size 256K --mode exact --dtype bf16
                 --data heavy --iters 1 --warmup 0)
add_test(NAME bench_topk_usage
         COMMAND ${ZEN_CHECK_RUN} -x 2 -m "bad value 'medium' for --mode"
                 -- $<TARGET_FILE:zen> bench topk --mode medium)
set_tests_properties(bench_topk_json bench_topk_table bench_topk_usage PROPERTIES TIMEOUT 120
                     LABELS cli)
