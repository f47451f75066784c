# zen simulate from the command line: a JSON line per (ranks, gbps), exit 2 on a usage error.
add_test(NAME cli_simulate_json
         COMMAND $<TARGET_FILE:zen> simulate --ranks 2,16 --gbps 1 --rows 100000 --json)
set_tests_properties(cli_simulate_json PROPERTIES TIMEOUT 60 LABELS cli
                     PASS_REGULAR_EXPRESSION "\"ranks\":16,.*\"best\":\"[a-z]+\"")
add_test(NAME cli_simulate_usage
         COMMAND sh -c "$<TARGET_FILE:zen> simulate --density 2 2>/dev/null; test $? -eq 2")
set_tests_properties(cli_simulate_usage PROPERTIES TIMEOUT 60 LABELS cli)
