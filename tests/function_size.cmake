# function_size: no function in src/, tools/ or the headers over 100 lines unless allowed
# (scripts/check-function-size.sh, scripts/function-size-allow.txt).
add_test(NAME function_size COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check-function-size.sh)
set_tests_properties(function_size PROPERTIES TIMEOUT 60 LABELS unit)
