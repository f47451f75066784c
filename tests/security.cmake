# Mismatched resume: two checkpoints of the same configuration at steps 10 and 20; a 2-rank
# job (dp 2) whose ranks resume from different ones must refuse to start, naming the ranks,
# instead of training inconsistent replicas (docs/security.md).
if(TARGET zentrain)
  set(ZEN_SEC_WORK ${CMAKE_CURRENT_BINARY_DIR}/security_resume)
  # the corpus train.cmake writes at configure time (globbed after this file)
  set(ZEN_SEC_TRAIN --data ${CMAKE_CURRENT_BINARY_DIR}/train_cli_corpus.txt --cache-dir ${ZEN_SEC_WORK}/cache --layers 1
      --d-model 16 --heads 2 --d-ff 32 --ctx 8 --seq 8 --batch 2 --dp 2 --tp 1 --warmup 2
      --eval-interval 100 --log-interval 100 --sample-tokens 0 --threads 1 --steps 30 --quiet)
  string(REPLACE ";" " " ZEN_SEC_TRAIN_SH "${ZEN_SEC_TRAIN}")
  # both ranks must refuse on their own: exit 1 each, no crash, nothing left to terminate
  add_test(NAME security_resume_mismatch COMMAND ${ZEN_CHECK_RUN} -x 1
           -m "ranks start from different checkpoints: rank 0 at step 10"
           -m "zen launch: rank 0 exited with status 1" -m "zen launch: rank 1 exited with status 1"
           -- sh -c
           "rm -rf '${ZEN_SEC_WORK}' && mkdir -p '${ZEN_SEC_WORK}' && \
            '$<TARGET_FILE:zen>' train ${ZEN_SEC_TRAIN_SH} --stop-at 10 \
              --checkpoint-dir '${ZEN_SEC_WORK}/ck0' >/dev/null && \
            '$<TARGET_FILE:zen>' train ${ZEN_SEC_TRAIN_SH} --stop-at 20 \
              --checkpoint-dir '${ZEN_SEC_WORK}/ck1' >/dev/null && \
            exec '$<TARGET_FILE:zen>' launch -n 2 --grace 30 -- sh -c \
                 \"exec '$<TARGET_FILE:zen>' train ${ZEN_SEC_TRAIN_SH} --resume '${ZEN_SEC_WORK}'/ck\\$ZEN_RANK\"")
  set_tests_properties(security_resume_mismatch PROPERTIES TIMEOUT 120 LABELS "cli;security"
                       ENVIRONMENT "ZEN_TIMEOUT_S=30")

  # A rank killed during the gradient sync: the survivor's final error names it (the failing
  # call ran on the dp communicator, whose error the report used to drop).
  # Both ranks exit 1 on their own (the injected "kill" makes rank 1 refuse its own traffic).
  add_test(NAME security_train_names_culprit COMMAND ${ZEN_CHECK_RUN} -x 1
           -m "zen train: rank 0: .*rank 1 (closed the connection|aborted)"
           -m "zen launch: rank 0 exited with status 1"
           -- $<TARGET_FILE:zen> launch -n 2 --grace 30 -- $<TARGET_FILE:zen> train ${ZEN_SEC_TRAIN})
  set_tests_properties(security_train_names_culprit PROPERTIES TIMEOUT 120 LABELS "cli;security"
                       ENVIRONMENT "ZEN_TIMEOUT_S=30;ZEN_FAULT=rank=1,after=40,action=kill")
endif()

# `zen launch` draws a job secret when none is set; an empty ZEN_JOB_SECRET counts as none (the
# ranks read an empty value as no secret, so the job would have run open).
add_test(NAME security_launch_empty_secret COMMAND ${ZEN_CHECK_RUN} -m "secret bytes: 64"
         -- $<TARGET_FILE:zen> launch -n 2 -- sh -c "echo secret bytes: \${#ZEN_JOB_SECRET}")
set_tests_properties(security_launch_empty_secret PROPERTIES TIMEOUT 60 LABELS "cli;security"
                     ENVIRONMENT "ZEN_JOB_SECRET=;ZEN_JOB_SECRET_FILE=")
