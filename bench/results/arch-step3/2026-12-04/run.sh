#!/bin/bash
export CCACHE_BASEDIR=/tmp/af-src-new CCACHE_DIR=/work/.ccache CCACHE_NOHASHDIR=1 CMAKE_C_COMPILER_LAUNCHER=ccache
cmake -S /tmp/af-src-new -B /tmp/af-src-new/build -G Ninja -DZEN_BUILD_PYTHON=OFF >/dev/null 2>&1
cmake --build /tmp/af-src-new/build -j2 --target zen > /tmp/af-bench/newbuild.log 2>&1 || { echo buildfail; exit 1; }
OLD=/tmp/af-build-a256527/zen; NEW=/tmp/af-src-new/build/zen; PRE=/tmp/af-build-7bec6ac/zen
O=/tmp/af-bench/sparse_hier; mkdir -p $O
for r in 1 2 3 4 5 6; do
  for v in old new; do
    B=$OLD; [ $v = new ] && B=$NEW
    uptime > $O/$v.$r.load
    ZEN_SPARSE_RANKS_PER_HOST=2 timeout 300 $B bench sparse --ranks 4 --schemes auto,balanced,hierarchical --iters 20 --seed $r --call-times --json > $O/$v.$r.out 2> $O/$v.$r.err
  done
done
O=/tmp/af-bench/step3; mkdir -p $O
for r in 1 2 3 4 5; do
  for v in pre new; do
    B=$PRE; [ $v = new ] && B=$NEW
    uptime > $O/$v.$r.load
    timeout 300 $B bench allreduce --ranks 4 -b 8 -e 16M -f 8 -w 5 -n 30 --json > $O/$v.$r.dense-inproc.json 2>&1
    timeout 300 $B launch -n 4 -- $B bench allreduce -b 8 -e 16M -f 8 -w 5 -n 30 --json > $O/$v.$r.dense-shm.json 2>&1
    timeout 300 $B bench sparse --ranks 4 --schemes balanced,ps,auto --iters 15 --seed $r --json > $O/$v.$r.sparse.json 2>&1
  done
done
echo finished > /tmp/af-bench/done
