# bench/peers/zen_sparse_peer (zen_sparse_allreduce with a sparse result, one rank per process
# over tcp): every scheme's result must equal, on every rank, the dense sum of all ranks' inputs
# computed locally ("verified":true, exit 0). The side-by-side run itself (bench/peers/
# run_peers.sh) needs root and torch, so it is not a test.
if(TARGET zen_sparse_peer)
  add_test(NAME peers_zen_sparse_peer
           COMMAND ${ZEN_CHECK_RUN}
                   -m "\"scheme\":\"auto\".*\"case\":\"0.05:zipf\".*\"verified\":true"
                   -n "\"verified\":false"
                   -- $<TARGET_FILE:zen> launch -n 3 -- $<TARGET_FILE:zen_sparse_peer> --rows 4096
                   --width 3 --cases 0.02:random,0.05:zipf --iters 1 --warmup 0
                   --schemes balanced,hierarchical,allgather,block,ps,dense,auto)
  set_tests_properties(peers_zen_sparse_peer PROPERTIES TIMEOUT 120 LABELS cli
                       ENVIRONMENT "ZEN_TIMEOUT_S=60")
endif()
