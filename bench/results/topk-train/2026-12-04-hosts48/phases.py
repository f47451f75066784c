import json, statistics, glob, sys
for h in (4, 8):
    for kind in ("union", "global"):
        for b in ("old", "new"):
            out = []
            for f in sorted(glob.glob(f"/tmp/mx/ab-{b}-h{h}/runs/topk-balanced-{kind}-r*.metrics.jsonl")):
                rows = [json.loads(l) for l in open(f) if l.strip()]
                rows = [r for r in rows if r["step"] > 10]
                ph = [statistics.median(r["topk_sparse_ms"][i] for r in rows) for i in range(6)]
                out.append("/".join(f"{x:.1f}" for x in ph))
            print(f"h{h} {kind:6s} {b}: partition/push/aggregate/encode/pull/decode ms  " + "  |  ".join(out))
