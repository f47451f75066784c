# cli_links_libzen: the zen CLI (with zentrain) is a program on the public API only: it loads
# libzen.so and carries no second, static libzen (docs/architecture.md, "The rule, as the build
# checks it").
find_program(ZEN_NM nm)
find_program(ZEN_READELF readelf)
if(ZEN_NM AND ZEN_READELF)
  add_test(NAME cli_links_libzen
           COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/check-program-link.sh $<TARGET_FILE:zen>
                   ${CMAKE_SOURCE_DIR}/include/zen)
  set_tests_properties(cli_links_libzen PROPERTIES TIMEOUT 60 LABELS unit)
endif()
