# The zen torch.distributed backend (python/zen_torch) against gloo in the same processes. Always
# registered. When this build made zen_torch (ZEN_BUILD_PYTHON) the scripts skip (exit 77) only if
# torch itself does not import; a zen_torch that does not import (its _C missing, an ABI break)
# fails. When the build did not make it (no torch at configure time, a sanitizer build) each test
# is a skip that says so.
if(ZEN_BUILD_PYTHON)
  set(ZEN_TORCH_PY /usr/bin/python3)
else()
  set(ZEN_TORCH_PY sh -c "echo 'skipping: zen_torch is not built in this build (ZEN_BUILD_PYTHON=OFF)' && exit 77" --)
endif()
# Launchers: spawn (torch.multiprocessing; gloo the default group, zen a second one) and torchrun
# of Debian torch 1.13.1 (zen the default group from torchrun's environment, gloo the second):
# static rendezvous at a free --master_port, and c10d at localhost:0. The script starts torchrun
# with the --redirects/--tee values that work on Python 3.11 (docs/pytorch-notes.md). "secret": a zen
# group is refused under ZEN_REQUIRE_SECRET=1 without a secret (the Store path), formed with one.
# Each case runs in the default asynchronous mode; "sync" cases run the same checks with
# ZEN_TORCH_SYNC=1 (every collective completes inside its call).
foreach(case "ops,sparse,errors,agree,ddp,async,monitored;3;spawn;async"
             "ops,sparse,agree,dtypes;2;spawn;async" "secret;2;spawn;async"
             "ops,errors,dtypes,async,ddp;2;spawn;sync"
             "ops,sparse,errors,ddp,dtypes;2;torchrun-static;async"
             "ops,sparse,ddp;3;torchrun-c10d;async")
  list(GET case 0 suite)
  list(GET case 1 nproc)
  list(GET case 2 launcher)
  list(GET case 3 mode)
  string(REPLACE "," "_" name "${suite}")
  if(NOT launcher STREQUAL "spawn")
    string(REPLACE "-" "_" name "${launcher}")
  endif()
  set(sync 0)
  if(mode STREQUAL "sync")
    set(name "sync_${name}")
    set(sync 1)
  endif()
  add_test(NAME torch_${name}_${nproc}
           COMMAND ${ZEN_TORCH_PY} ${CMAKE_CURRENT_SOURCE_DIR}/torch/zen_backend_check.py
                   ${suite} ${nproc} ${launcher})
  set_tests_properties(torch_${name}_${nproc} PROPERTIES
    LABELS torch TIMEOUT 180 SKIP_RETURN_CODE 77
    ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;ZEN_TIMEOUT_S=60;OMP_NUM_THREADS=1;ZEN_TORCH_SYNC=${sync}")
endforeach()

# Under mpirun (explicit rank/world_size from OMPI_COMM_WORLD_*, env:// at MASTER_ADDR/PORT).
# MASTER_PORT: a free port the kernel picks, as tools/free_port.c does.
find_program(ZEN_TORCH_MPIRUN mpirun)
if(ZEN_TORCH_MPIRUN AND NOT ZEN_SANITIZE AND ZEN_BUILD_PYTHON)
  add_test(NAME torch_mpirun_3
           COMMAND sh -c "port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'); exec '${ZEN_TORCH_MPIRUN}' --allow-run-as-root --oversubscribe -n 3 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port -x PYTHONPATH -x ZEN_TIMEOUT_S -x OMP_NUM_THREADS /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/torch/mpirun_check.py")
  set_tests_properties(torch_mpirun_3 PROPERTIES
    LABELS "torch;mpi" TIMEOUT 180 SKIP_RETURN_CODE 77
    ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;ZEN_TIMEOUT_S=60;OMP_NUM_THREADS=1")
endif()

# zen_torch.hooks.topk_hook and sparse_allreduce_coo at 3 processes (spawn; gloo the default
# group): against gloo's dense all_reduce, DDP without a hook, and exact error feedback across
# bucket rebuilds (tests/torch/topk_hook_check.py says what each check compares).
add_test(NAME torch_topk_hook_3
         COMMAND ${ZEN_TORCH_PY} ${CMAKE_CURRENT_SOURCE_DIR}/torch/topk_hook_check.py 3)
set_tests_properties(torch_topk_hook_3 PROPERTIES
  LABELS torch TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;ZEN_TIMEOUT_S=60;OMP_NUM_THREADS=1")

# zen_torch.rows.rows_hook and rows_allreduce_into at 3 processes: against gloo's dense all_reduce
# and DDP on gloo without a hook, on zen async, zen sync and gloo (tests/torch/rows_hook_check.py).
add_test(NAME torch_rows_hook_3
         COMMAND ${ZEN_TORCH_PY} ${CMAKE_CURRENT_SOURCE_DIR}/torch/rows_hook_check.py 3)
set_tests_properties(torch_rows_hook_3 PROPERTIES
  LABELS torch TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;ZEN_TIMEOUT_S=60;OMP_NUM_THREADS=1")

# A WORLD_SIZE larger than the ranks started (2 of 3) through the env:// store: every started
# rank fails within about the timeout (6 s here) naming rank 2 only (torch/world_size_check.py).
add_test(NAME torch_world_size_2_of_3
         COMMAND ${ZEN_TORCH_PY} ${CMAKE_CURRENT_SOURCE_DIR}/torch/world_size_check.py 6)
set_tests_properties(torch_world_size_2_of_3 PROPERTIES
  LABELS torch TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "PYTHONPATH=${CMAKE_BINARY_DIR}/python;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
