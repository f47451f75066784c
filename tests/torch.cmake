# The zen torch.distributed backend (python/zen_torch) against gloo in the same processes. Always
# registered: without torch or zen_torch the script exits 77 and ctest reports a skip.
foreach(case "ops,sparse,errors,ddp;3" "ops,sparse;2")
  list(GET case 0 suite)
  list(GET case 1 nproc)
  string(REPLACE "," "_" name "${suite}")
  add_test(NAME torch_${name}_${nproc}
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/torch/zen_backend_check.py
                   ${suite} ${nproc})
  set_tests_properties(torch_${name}_${nproc} PROPERTIES
    LABELS torch TIMEOUT 180 SKIP_RETURN_CODE 77
    ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;ZEN_TIMEOUT_S=60;OMP_NUM_THREADS=1")
endforeach()
