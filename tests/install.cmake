# install_example: `cmake --install` into a scratch DESTDIR, then examples/allreduce.c and
# simulate.c built against the installed copy with pkg-config and with find_package(zen), and run,
# and every installed public header compiled on its own (scripts/test-install.sh). Not under sanitizers: the example is built without them and could
# not load a sanitized libzen.so.
find_program(ZEN_PKG_CONFIG pkg-config)
if(NOT ZEN_SANITIZE AND ZEN_PKG_CONFIG)
  add_test(NAME install_example
           COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/test-install.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(install_example PROPERTIES TIMEOUT 300 LABELS install)
endif()
