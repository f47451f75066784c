# zen_torch.topk_select (python/zen_torch/compress.cpp) against torch.topk: one process, no
# communicator. ZEN_TORCH_PY is tests/torch.cmake's (a skip that says why without zen_torch).
add_test(NAME torch_topk_select COMMAND ${ZEN_TORCH_PY} ${CMAKE_CURRENT_SOURCE_DIR}/torch/topk_check.py)
set_tests_properties(torch_topk_select PROPERTIES
  LABELS torch TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;OMP_NUM_THREADS=1")
