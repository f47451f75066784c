#!/bin/sh
# bound zen at 4 ranks: OpenBLAS pool as zen launch now sets it (1) vs OpenBLAS's own default here (2 threads)
cd /work/wt/mpi4
A="-b 8 -e 512 -f 8 -w 20 -n 200 --json"
cat /proc/loadavg
summ() { python3 -c "
import sys,json
r=[]
for l in sys.stdin:
  if l.startswith('{'):
    j=json.loads(l); r.append('%s%s:%.1f'%(j['bytes'],'i' if j['inplace'] else 'o',j['time_us_p50']))
print('$1', ' '.join(r))"; }
for k in 1 2 3; do
  ./build/zen launch -n 4 --transport shm -- ./build/zen bench allreduce $A 2>/dev/null | summ "r$k blas-share(1)"
  OPENBLAS_NUM_THREADS=2 ./build/zen launch -n 4 --transport shm -- ./build/zen bench allreduce $A 2>/dev/null | summ "r$k blas=2"
done
cat /proc/loadavg
