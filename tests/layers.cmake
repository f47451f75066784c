# layers: every #include follows the layer table of docs/architecture.md (scripts/check-layers.sh).
add_test(NAME layers COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check-layers.sh)
set_tests_properties(layers PROPERTIES TIMEOUT 120 LABELS unit)
