# exports: libzen.so exports exactly the functions declared in include/zen/*.h (hidden
# visibility + the ZEN_0.1 version script; scripts/check-exports.sh reads the dynamic symbols).
find_program(ZEN_NM nm)
if(ZEN_NM)
  add_test(NAME exports
           COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check-exports.sh $<TARGET_FILE:zen_shared>
                   ${CMAKE_SOURCE_DIR}/include/zen)
  set_tests_properties(exports PROPERTIES TIMEOUT 60 LABELS unit)
endif()
