# The first hour (#37): what a new user meets one step beyond the README's Use lines.

# bench/sparse_partition with no arguments prints its usage and exits 2 (it used to start a
# 100M-row benchmark); a word where a number goes is a usage error too.
add_test(NAME sparse_partition_usage
         COMMAND ${ZEN_CHECK_RUN} -x 2 -m "^usage: sparse_partition NNZ"
                 -- $<TARGET_FILE:sparse_partition>)
add_test(NAME sparse_partition_bad_number
         COMMAND ${ZEN_CHECK_RUN} -x 2 -m "'lots' is not a number"
                 -- $<TARGET_FILE:sparse_partition> lots)
set_tests_properties(sparse_partition_usage sparse_partition_bad_number PROPERTIES TIMEOUT 30
                     LABELS cli)

# The reproduction pipeline on a fresh tree: --dump-grads into a directory whose parents do not
# exist yet (docs/reproduction.md: build/workloads/gpt) creates them; the progress line says what
# was sent against a dense allreduce, not "dense" alone (it read as if the dense scheme ran).
set(ZEN_FH_WORK ${CMAKE_CURRENT_BINARY_DIR}/first_hour)
set(ZEN_FH_TRAIN --data ${CMAKE_CURRENT_BINARY_DIR}/train_cli_corpus.txt
    --cache-dir ${ZEN_FH_WORK}/cache --layers 1 --d-model 32 --heads 2 --d-ff 64 --ctx 16
    --seq 16 --batch 4 --dp 2 --tp 1 --warmup 1 --eval-interval 1000 --log-interval 1
    --sample-tokens 0 --threads 1 --steps 2)
string(REPLACE ";" " " ZEN_FH_TRAIN_SH "${ZEN_FH_TRAIN}")
add_test(NAME train_dump_grads_fresh_dir
         COMMAND ${ZEN_CHECK_RUN} -m "sent [0-9.]+ [kKMG]?B \\(dense allreduce: [0-9.]+ [kKMG]?B\\)"
                 -- sh -c "rm -rf '${ZEN_FH_WORK}/workloads' && \
                   '$<TARGET_FILE:zen>' train ${ZEN_FH_TRAIN_SH} \
                     --dump-grads '${ZEN_FH_WORK}/workloads/gpt' && \
                   ls '${ZEN_FH_WORK}/workloads/gpt/rank1-step000001.zgrad'")
set_tests_properties(train_dump_grads_fresh_dir PROPERTIES TIMEOUT 120 LABELS cli
                     ENVIRONMENT "ZEN_TIMEOUT_S=60")

# plot_reproduction.py on an empty result (the runs failed): one line and exit 1, not a
# ZeroDivisionError.
if(EXISTS /usr/bin/python3)
  add_test(NAME plot_reproduction_no_rows
           COMMAND ${ZEN_CHECK_RUN} -x 1 -m "measured.jsonl: no rows" -n "Traceback"
                   -- sh -c "mkdir -p '${ZEN_FH_WORK}/empty' && \
                     : > '${ZEN_FH_WORK}/empty/measured.jsonl' && \
                     /usr/bin/python3 '${CMAKE_SOURCE_DIR}/bench/plot_reproduction.py' comm \
                       '${ZEN_FH_WORK}/empty' --png '${ZEN_FH_WORK}/empty/x.png'")
  set_tests_properties(plot_reproduction_no_rows PROPERTIES TIMEOUT 30 LABELS cli)
endif()

# A receive that waits long says whom it waits for every ZEN_WAIT_REPORT_S (30 s by default; a
# job missing a rank printed nothing for the whole ZEN_TIMEOUT_S): rank 1 sleeps 0.7 s before a
# send (ZEN_FAULT delay), rank 0 must name it, over shm, tcp (the mailbox) and in-process.
foreach(tr shm tcp inproc)
  if(tr STREQUAL "inproc")
    set(_fh_cmd $<TARGET_FILE:zen> bench allreduce --ranks 2)
  else()
    set(_fh_cmd $<TARGET_FILE:zen> launch -n 2 --transport ${tr} -- $<TARGET_FILE:zen> bench
        allreduce)
  endif()
  add_test(NAME wait_report_${tr}
           COMMAND ${ZEN_CHECK_RUN} -m "rank 0: still waiting for a message from rank 1 \\(0\\.[2-9] s of 60 s\\)"
                   -- ${_fh_cmd} -b 8 -e 8 -n 5 -w 1 -c)
  set_tests_properties(wait_report_${tr} PROPERTIES TIMEOUT 60 LABELS cli
                       ENVIRONMENT "ZEN_TIMEOUT_S=60;ZEN_WAIT_REPORT_S=0.2;ZEN_FAULT=rank=1,after=3,action=delay,ms=700")
endforeach()

# zen launch: "[rank N] " before every line of a rank (--prefix on; auto is on at a terminal,
# and ctest's output is not one), the ranks' own output untouched with --prefix off, and one
# placement line at start.
add_test(NAME launch_prefix_on
         COMMAND ${ZEN_CHECK_RUN} -m "^\\[rank 0\\] out 0$" -m "^\\[rank 1\\] err 1$"
                 -m "^\\[rank 1\\] no newline$"
                 -m "^zen launch: 2 ranks on .*, transport tcp; (rank 0 on cpu [0-9]+, rank 1 on cpu [0-9]+|not bound)"
                 -- $<TARGET_FILE:zen> launch -n 2 --transport tcp --prefix on -- sh -c
                 "echo out $ZEN_RANK; echo err $ZEN_RANK >&2; printf 'no newline'")
add_test(NAME launch_prefix_off
         COMMAND ${ZEN_CHECK_RUN} -m "^out 1$" -n "^\\[rank"
                 -- $<TARGET_FILE:zen> launch -n 2 --prefix off -- sh -c "echo out $ZEN_RANK")
add_test(NAME launch_prefix_usage
         COMMAND ${ZEN_CHECK_RUN} -x 2 -m "--prefix must be auto, on or off"
                 -- $<TARGET_FILE:zen> launch -n 2 --prefix maybe -- true)
set_tests_properties(launch_prefix_on launch_prefix_off launch_prefix_usage PROPERTIES TIMEOUT 30
                     LABELS cli)

# docs: README.md's Use lines (the quick ones; DOCS_FULL=1 for all) and its Install block, run
# as written from a scratch HOME against this build installed there (scripts/test-docs.sh).
# Not under sanitizers: the example programs are built without them.
find_program(ZEN_DOCS_PKG_CONFIG pkg-config)
if(NOT ZEN_SANITIZE AND ZEN_DOCS_PKG_CONFIG)
  add_test(NAME docs_readme_recipes
           COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/test-docs.sh ${CMAKE_BINARY_DIR})
  set_tests_properties(docs_readme_recipes PROPERTIES TIMEOUT 180 LABELS docs)
endif()
# docs: docs/pytorch.md's Run block as written (zen launch and torchrun by default; mpirun and
# srun with DOCS_FULL=1), from this build installed into a scratch prefix; skipped (77) without
# torch or zen_torch. And docs/reproduction.md's first row on a fresh tree, only with
# DOCS_FULL=1 (many minutes), else reported as skipped.
if(NOT ZEN_SANITIZE)
  add_test(NAME docs_pytorch_recipes
           COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/test-docs.sh ${CMAKE_BINARY_DIR} pytorch)
  set_tests_properties(docs_pytorch_recipes PROPERTIES TIMEOUT 600 LABELS "docs;torch"
                       SKIP_RETURN_CODE 77 ENVIRONMENT "OMP_NUM_THREADS=1;ZEN_TIMEOUT_S=120")
  add_test(NAME docs_reproduction_first_row
           COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/test-docs.sh ${CMAKE_BINARY_DIR} repro)
  set_tests_properties(docs_reproduction_first_row PROPERTIES TIMEOUT 3600 LABELS docs
                       SKIP_RETURN_CODE 77)
endif()

# docs: zen(1) names only options that the commands' --help list, and the same transports.
if(EXISTS /usr/bin/python3)
  add_test(NAME docs_man_matches_help
           COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/man_help_check.py
                   $<TARGET_FILE:zen> ${CMAKE_SOURCE_DIR}/docs/zen.1)
  set_tests_properties(docs_man_matches_help PROPERTIES TIMEOUT 60 LABELS "docs;unit")
endif()
