# srun and sbatch under a real single-node Slurm that the script configures, starts and stops
# (tests/slurm/slurm-test.sh): `srun -n 4 zen bench allreduce --check` and, when this build made
# zen_torch, `srun -n 2 python3 examples/torch_ddp_kjv.py --backend zen`, with no SLURM-to-RANK
# shim. Label `slurm`; reported as skipped, with the reason, when not root, when slurm-wlm or
# munge is not installed (scripts/deps.sh --slurm) or when the daemons do not come up.
if(ZEN_BUILD_PYTHON)
  set(ZEN_SLURM_PYTHONPATH ${CMAKE_BINARY_DIR}/python)
else()
  set(ZEN_SLURM_PYTHONPATH "")
endif()
add_test(NAME slurm_srun
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/slurm/slurm-test.sh $<TARGET_FILE:zen>
                 "${ZEN_SLURM_PYTHONPATH}")
set_tests_properties(slurm_srun PROPERTIES LABELS slurm TIMEOUT 180 SKIP_RETURN_CODE 77
                     ENVIRONMENT "ZEN_TIMEOUT_S=60;OMP_NUM_THREADS=1")
