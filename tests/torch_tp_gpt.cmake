# examples/torch_tp_gpt.py kept honest (tests/torch/tp_gpt_check.py): at tp 2 the zen_torch.tp
# layers give the Megatron-style baseline's losses, which give a one-process model's, and
# migration around a slow rank changes none of them; under `zen launch`, dp 2 x tp 2 gives
# dp 2 x tp 1's. Needs the zen_torch module (ZEN_BUILD_PYTHON), as tests/torch.cmake.
if(ZEN_BUILD_PYTHON)
  set(ZEN_TP_GPT_PY /usr/bin/python3)
else()
  set(ZEN_TP_GPT_PY sh -c "echo 'skipping: zen_torch is not built in this build (ZEN_BUILD_PYTHON=OFF)' && exit 77" --)
endif()
add_test(NAME torch_tp_gpt_2
         COMMAND ${ZEN_TP_GPT_PY} ${CMAKE_CURRENT_SOURCE_DIR}/torch/tp_gpt_check.py)
add_test(NAME torch_tp_gpt_launch_dp2x2
         COMMAND ${ZEN_TP_GPT_PY} ${CMAKE_CURRENT_SOURCE_DIR}/torch/tp_gpt_check.py
                 launch $<TARGET_FILE:zen>)
set_tests_properties(torch_tp_gpt_2 torch_tp_gpt_launch_dp2x2 PROPERTIES
  LABELS torch TIMEOUT 180 SKIP_RETURN_CODE 77
  ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;ZEN_TIMEOUT_S=60;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
