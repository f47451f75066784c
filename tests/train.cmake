# CLI runs of `zen train` (owner: train-cli). A tiny generated corpus with predictable tokens:
# 30 steps at dp 2 x tp 2 must beat the unigram baseline, and a resumed run must continue.
set(ZEN_TRAIN_TEXT ${CMAKE_CURRENT_BINARY_DIR}/train_cli_corpus.txt)
set(ZEN_TRAIN_WORK ${CMAKE_CURRENT_BINARY_DIR}/train_cli)
set(_zen_train_lines "")
foreach(i RANGE 1 200)
  math(EXPR a "${i} % 7")
  math(EXPR b "${i} % 5")
  math(EXPR c "${i} % 3")
  string(APPEND _zen_train_lines "the cat ${a} saw the dog ${b} and said ${c} .\n")
endforeach()
file(WRITE ${ZEN_TRAIN_TEXT} "${_zen_train_lines}")
set(ZEN_TRAIN_TINY --data ${ZEN_TRAIN_TEXT} --cache-dir ${ZEN_TRAIN_WORK}/cache --layers 1
    --d-model 32 --heads 2 --d-ff 64 --ctx 16 --seq 16 --batch 4 --dp 2 --tp 2 --warmup 5
    --lr 1e-2 --eval-interval 10 --log-interval 10 --sample-tokens 8 --threads 1)

add_test(NAME train_cli_learns COMMAND ${ZEN_CHECK_RUN} -m "the model beats it"
         -- $<TARGET_FILE:zen> train ${ZEN_TRAIN_TINY} --steps 30
         --metrics ${ZEN_TRAIN_WORK}/metrics.jsonl)
set_tests_properties(train_cli_learns PROPERTIES TIMEOUT 300 LABELS cli
                     ENVIRONMENT "ZEN_TIMEOUT_S=60")

# a usage error: exit 2 with the reason (WILL_FAIL took any failure, a crash included)
add_test(NAME train_cli_usage COMMAND ${ZEN_CHECK_RUN} -x 2 -m "bad value '0' for --steps"
         -- $<TARGET_FILE:zen> train --steps 0)
set_tests_properties(train_cli_usage PROPERTIES TIMEOUT 60 LABELS cli)

string(REPLACE ";" " " ZEN_TRAIN_TINY_SH "${ZEN_TRAIN_TINY}")
# stop at step 20 of 30 with a checkpoint, then resume to the end
add_test(NAME train_cli_resume COMMAND ${ZEN_CHECK_RUN} -m "resumed from .* at step 20" -- sh -c
         "rm -rf '${ZEN_TRAIN_WORK}/ck' && \
          '$<TARGET_FILE:zen>' train ${ZEN_TRAIN_TINY_SH} --steps 30 --stop-at 20 --quiet \
            --checkpoint-dir '${ZEN_TRAIN_WORK}/ck' && \
          '$<TARGET_FILE:zen>' train ${ZEN_TRAIN_TINY_SH} --steps 30 --resume '${ZEN_TRAIN_WORK}/ck' \
            --checkpoint-dir '${ZEN_TRAIN_WORK}/ck'")
set_tests_properties(train_cli_resume PROPERTIES TIMEOUT 300 LABELS cli
                     ENVIRONMENT "ZEN_TIMEOUT_S=60")

# the same job as four tcp processes (zen launch): it must reach a validation loss below 1 nat
# (unigram baseline 2.54; the in-process run reaches 0.68 with the same batches and seed)
add_test(NAME train_cli_tcp COMMAND ${ZEN_CHECK_RUN} -m "\"dp\":2,\"tp\":2.*\"val_loss\":0\\.[0-9]"
         -- $<TARGET_FILE:zen> launch -n 4 -- $<TARGET_FILE:zen> train ${ZEN_TRAIN_TINY} --steps 30 --json)
set_tests_properties(train_cli_tcp PROPERTIES TIMEOUT 300 LABELS cli
                     ENVIRONMENT "ZEN_TIMEOUT_S=60")

# a straggler run's summary says what the straggler cost and what balancing recovered (#37);
# a run without one says nothing of stragglers
add_test(NAME train_cli_straggler_summary COMMAND ${ZEN_CHECK_RUN}
         -m "^  straggler   slowest rank's tp GEMM time [0-9.]+x the fastest's \\(emulated slowdown 3\\.00x\\); balancing \\(resize\\) recovered -?[0-9]+% of the gap$"
         -- $<TARGET_FILE:zen> train ${ZEN_TRAIN_TINY} --steps 10 --sample-tokens 0 --slow 1:3
         --balance resize)
add_test(NAME train_cli_straggler_json COMMAND ${ZEN_CHECK_RUN}
         -m "\"straggler_factor\":3,\"straggler_gemm_ratio\":[0-9.]+,\"straggler_recovered\":-?[0-9.e-]+,"
         -- $<TARGET_FILE:zen> train ${ZEN_TRAIN_TINY} --steps 10 --sample-tokens 0 --slow 1:3
         --json)
add_test(NAME train_cli_no_straggler_summary COMMAND ${ZEN_CHECK_RUN} -m "^summary: 10 steps"
         -n "straggler" -- $<TARGET_FILE:zen> train ${ZEN_TRAIN_TINY} --steps 10 --sample-tokens 0)
set_tests_properties(train_cli_straggler_summary train_cli_straggler_json
                     train_cli_no_straggler_summary PROPERTIES TIMEOUT 120 LABELS cli
                     ENVIRONMENT "ZEN_TIMEOUT_S=60")

# --metrics splits the sync into its phases: a top-k run spends time selecting and in the sparse
# allreduce and none in the dense buckets; a dense run the other way round
set(_zen_pos "([1-9][0-9]*\\.[0-9]+|0\\.[0-9]*[1-9][0-9]*)") # a positive %.4f
string(CONCAT _zen_topk_phases "\"sync_pack_ms\":[0-9.]+,\"sync_select_ms\":${_zen_pos},"
       "\"sync_reduce_ms\":${_zen_pos},\"sync_unpack_ms\":[0-9.]+,\"sync_emb_ms\":[0-9.]+,"
       "\"sync_buckets_ms\":0\\.0000,\"topk_sparse_ms\":\\[")
add_test(NAME train_cli_topk_phases COMMAND ${ZEN_CHECK_RUN} -m "${_zen_topk_phases}"
         -n "\"sync_select_ms\":0\\.0000," -- sh -c
         "'$<TARGET_FILE:zen>' train ${ZEN_TRAIN_TINY_SH} --steps 3 --sample-tokens 0 --quiet \
            --topk 0.1 --metrics '${ZEN_TRAIN_WORK}/topk_phases.jsonl' && \
          cat '${ZEN_TRAIN_WORK}/topk_phases.jsonl'")
add_test(NAME train_cli_dense_phases COMMAND ${ZEN_CHECK_RUN}
         -m "\"sync_select_ms\":0\\.0000,.*\"sync_buckets_ms\":${_zen_pos}," -- sh -c
         "'$<TARGET_FILE:zen>' train ${ZEN_TRAIN_TINY_SH} --steps 3 --sample-tokens 0 --quiet \
            --metrics '${ZEN_TRAIN_WORK}/dense_phases.jsonl' && \
          cat '${ZEN_TRAIN_WORK}/dense_phases.jsonl'")
set_tests_properties(train_cli_topk_phases train_cli_dense_phases PROPERTIES TIMEOUT 120
                     LABELS cli ENVIRONMENT "ZEN_TIMEOUT_S=60")
