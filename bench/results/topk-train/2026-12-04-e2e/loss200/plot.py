# docs/img/topk_loss200.png from losses.jsonl (run in loss200/; needs matplotlib)
import json, matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
runs = {json.loads(l)["name"]: json.loads(l) for l in open("losses.jsonl")}
steps = list(range(20, 201, 20))
fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.5))
for name, lab in (("dense", "dense"), ("wu50s1", "top-k, warm-up 50 from 100%"),
                  ("wu20s1m9", "top-k, warm-up 20 from 100%, momentum 0.9"), ("plain", "top-k, no warm-up")):
    a.plot(steps, [runs[name]["val"][str(s)] for s in steps], marker="o", label=lab)
a.set_xlabel("step"); a.set_ylabel("validation loss (nats/token)"); a.set_title("seed 1"); a.grid(alpha=.3); a.legend()
for name, ref, lab in (("wu50s1", "dense", "warm-up 50, seed 1"), ("wu50s1-s2", "dense-s2", "warm-up 50, seed 2"),
                       ("wu20s1m9", "dense", "warm-up 20 + momentum, seed 1"), ("wu20s1", "dense", "warm-up 20, seed 1"),
                       ("wu20s1-s2", "dense-s2", "warm-up 20, seed 2"), ("plain", "dense", "no warm-up, seed 1")):
    b.plot(steps, [100 * (runs[name]["val"][str(s)] / runs[ref]["val"][str(s)] - 1) for s in steps], marker="o", label=lab)
b.axhline(2, color="k", ls=":", label="+2%"); b.axhline(0, color="gray", lw=.5)
b.set_ylim(-8, 18); b.set_xlabel("step"); b.set_ylabel("top-k over dense, same step (%)"); b.set_title("validation loss gap"); b.grid(alpha=.3); b.legend(fontsize=8)
fig.suptitle("gcide, dp 4, top-k 5% (--topk-start 1) vs dense, 200 steps, same lr")
fig.tight_layout(); fig.savefig("topk_loss200.png", dpi=90)
