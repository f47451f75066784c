import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
cases = ["none", "topk", "topk-global", "powersgd"]
names = {"none": "all_reduce", "topk": "top-k union 1%", "topk-global": "top-k global 1%", "powersgd": "PowerSGD rank 4"}
by = {}
for r in rows:
    by.setdefault(r["round"], {})[r["case"]] = r
print("| round | " + " | ".join(names[c] + " ms" for c in cases) + " | top-k union < both | top-k global < both |")
print("|---|" + "---|" * (len(cases) + 2))
for rd in sorted(by):
    b = by[rd]
    def ms(c): return b[c]["step_ms"] if c in b else float("nan")
    u = ms("topk") < ms("none") and ms("topk") < ms("powersgd")
    g = ms("topk-global") < ms("none") and ms("topk-global") < ms("powersgd")
    print(f"| {rd} | " + " | ".join(f"{ms(c):.1f}" for c in cases) + f" | {'yes' if u else 'no'} | {'yes' if g else 'no'} |")
med = {c: statistics.median(by[rd][c]["step_ms"] for rd in by if c in by[rd]) for c in cases}
loss = {c: by[min(by)][c]["val_loss"] for c in cases if c in by[min(by)]}
print("| median | " + " | ".join(f"{med[c]:.1f}" for c in cases) + " | | |")
print("| val loss @40 | " + " | ".join(f"{loss[c]:.4f} ({100*(loss[c]/loss['none']-1):+.2f}%)" for c in cases) + " | | |")
for c in cases:
    if c in by[min(by)] and "sent_per_step" in by[min(by)][c]:
        print(c, "sent_per_step", by[min(by)][c]["sent_per_step"])
