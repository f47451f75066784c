# zen info says which optional parts this build has (#37: nothing said whether MPI or zen_torch
# was built in). The reference is this CMake configuration itself, not the CLI's own macros.
if(ZEN_HAVE_MPI)
  set(zen_info_mpi_word "yes")
  set(zen_info_mpi_json "true")
else()
  set(zen_info_mpi_word "no")
  set(zen_info_mpi_json "false")
endif()
if(ZEN_BUILD_PYTHON)
  set(zen_info_torch_word "yes")
  set(zen_info_torch_json "true")
else()
  set(zen_info_torch_word "no")
  set(zen_info_torch_json "false")
endif()
add_test(NAME info_build_features
         COMMAND ${ZEN_CHECK_RUN}
                 -m "^build: mpi transport ${zen_info_mpi_word}.*; zen_torch ${zen_info_torch_word}"
                 -- $<TARGET_FILE:zen> info)
add_test(NAME info_build_features_json
         COMMAND ${ZEN_CHECK_RUN}
                 -m "^\\{\"version\":.*\"mpi\":${zen_info_mpi_json},\"zen_torch\":${zen_info_torch_json},\"launcher\":"
                 -- $<TARGET_FILE:zen> info --json)
# --params is accepted (older scripts) and its help line says what it does.
add_test(NAME info_params_explained
         COMMAND ${ZEN_CHECK_RUN} -m "^  --params +accepted and ignored"
                 -- $<TARGET_FILE:zen> info --help)
set_tests_properties(info_build_features info_build_features_json info_params_explained
                     PROPERTIES TIMEOUT 30 LABELS cli)
