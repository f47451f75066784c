# cli_spellings: zen bench, bench sparse, train and launch take and refuse the same spellings of a
# transport, a size, a count, a duration and a sparse scheme (tools/opt_parse.h).
add_test(NAME cli_spellings
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/cli_spellings.sh $<TARGET_FILE:zen>)
set_tests_properties(cli_spellings PROPERTIES TIMEOUT 120 LABELS cli)
