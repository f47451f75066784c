# bench/torch_to_trace.py (PyTorch gradients -> .zgrad) read back by its own parser against torch's
# gradients, and replayed by `zen bench sparse --trace` with every scheme verified. Needs Debian's
# python3-torch, visible only to /usr/bin/python3.
if(EXISTS /usr/bin/python3)
  execute_process(COMMAND /usr/bin/python3 -c "import torch, numpy" RESULT_VARIABLE ZEN_NO_TORCH
                  OUTPUT_QUIET ERROR_QUIET)
  if(ZEN_NO_TORCH EQUAL 0)
    add_test(NAME torch_trace
             COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/torch_trace_check.py
                     $<TARGET_FILE:zen> ${CMAKE_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/torch_trace)
    set_tests_properties(torch_trace PROPERTIES TIMEOUT 300 LABELS cli
                         ENVIRONMENT "ZEN_TIMEOUT_S=60")
  endif()
endif()
