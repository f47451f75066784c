# One rank of pin2.sh: 300 single-threaded 512x512 matmuls; prints wall and CPU seconds.
import time, torch, sys
torch.set_num_threads(1)
a = torch.randn(512, 512); b = torch.randn(512, 512)
t = time.perf_counter(); c = time.process_time()
for _ in range(300): a @ b
print(sys.argv[1], f"wall {time.perf_counter()-t:.2f} cpu {time.process_time()-c:.2f}")
