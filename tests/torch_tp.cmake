# zen_torch.tp (tensor-parallel layers with balancing) and zen_torch.all_gather_v /
# reduce_scatter_v against single-process torch references (tests/torch/tp_check.py), at tp 2
# and 4, zen the default group. Skips like tests/torch.cmake when the build has no zen_torch.
if(ZEN_BUILD_PYTHON)
  set(ZEN_TORCH_TP_PY /usr/bin/python3)
else()
  set(ZEN_TORCH_TP_PY sh -c "echo 'skipping: zen_torch is not built in this build (ZEN_BUILD_PYTHON=OFF)' && exit 77" --)
endif()
foreach(nproc 2 4)
  add_test(NAME torch_tp_${nproc}
           COMMAND ${ZEN_TORCH_TP_PY} ${CMAKE_CURRENT_SOURCE_DIR}/torch/tp_check.py ${nproc})
  set_tests_properties(torch_tp_${nproc} PROPERTIES
    LABELS torch TIMEOUT 180 SKIP_RETURN_CODE 77
    ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;ZEN_TIMEOUT_S=60;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
endforeach()
