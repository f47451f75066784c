# Collectives issued and waited on from future callbacks (python/zen_torch/worker.hpp says how
# the worker runs them), and torch's PowerSGD DDP hook on zen against the sync zen group and gloo
# (tests/torch/powersgd_check.py). 2 processes; the script's watchdog turns a deadlock into a
# failure. ZEN_TORCH_PY is tests/torch.cmake's (a skip that says why without zen_torch).
add_test(NAME torch_powersgd_2
         COMMAND ${ZEN_TORCH_PY} ${CMAKE_CURRENT_SOURCE_DIR}/torch/powersgd_check.py 2)
set_tests_properties(torch_powersgd_2 PROPERTIES
  LABELS torch TIMEOUT 150 SKIP_RETURN_CODE 77
  ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;ZEN_TIMEOUT_S=60;OMP_NUM_THREADS=1")
