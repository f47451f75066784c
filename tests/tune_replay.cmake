# bench/tune_replay (AUTO's tuner replayed on recorded call times) and its scorer
# bench/tune_replay.py, on a synthetic recorded cell where the model is wrong.
if(TARGET tune_replay)
  add_test(NAME tune_replay_check
           COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/tune_replay_check.py
                   $<TARGET_FILE:tune_replay> ${CMAKE_SOURCE_DIR})
  set_tests_properties(tune_replay_check PROPERTIES TIMEOUT 60 LABELS cli)
endif()
