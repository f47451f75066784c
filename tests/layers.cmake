# layers: every #include follows the layer table of docs/architecture.md (scripts/check-layers.sh).
add_test(NAME layers COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check-layers.sh)
set_tests_properties(layers PROPERTIES TIMEOUT 300 LABELS unit)
# check_scripts: check-layers and check-function-size catch what they must on a tree of their own
# (an angle-bracket breach, a file not in git, a static inline function in a header).
add_test(NAME check_scripts COMMAND bash ${CMAKE_SOURCE_DIR}/tests/check_scripts.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(check_scripts PROPERTIES TIMEOUT 120 LABELS unit)
# call_circles: no two files of src/ and tools/ call each other (scripts/check-call-circles.sh,
# on this build's objects).
add_test(NAME call_circles
         COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check-call-circles.sh ${CMAKE_BINARY_DIR})
set_tests_properties(call_circles PROPERTIES TIMEOUT 120 LABELS unit)
