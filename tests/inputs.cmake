# test_inputs (tests/test_inputs.c) runs zen on FIFOs, /dev/full and NaN options: each command
# is ended by `timeout` after 10-60 s and a test stops at its first failure, so a regression to
# an endless wait fails within two minutes instead of holding CI for the default 300 s.
if(TEST test_inputs)
  set_tests_properties(test_inputs PROPERTIES TIMEOUT 120)
endif()
