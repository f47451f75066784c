import json, sys, statistics
for h in sys.argv[1:]:
    for kind in ("union", "global"):
        for b in ("old", "new"):
            try: rows = [json.loads(l) for l in open(f"/tmp/mx/ab-{b}-h{h}/train.jsonl")]
            except FileNotFoundError: continue
            rs = [r for r in rows if r["sync"].endswith(kind)]
            def ph(r, k): return r["phase_ms"].get(k, 0)
            print(f"h{h} {kind:6s} {b}: ms/step " + ", ".join(f"{r['ms_step']:.0f}" for r in rs) +
                  " | sync " + ", ".join(f"{r['comm_ms']:.1f}" for r in rs) +
                  " | reduce " + ", ".join(f"{ph(r,'reduce'):.1f}" for r in rs) +
                  " | unpack " + ", ".join(f"{ph(r,'unpack'):.1f}" for r in rs) +
                  " | emb " + ", ".join(f"{ph(r,'emb'):.1f}" for r in rs) +
                  " | loss " + ", ".join(f"{r['val_loss']:.4f}" for r in rs))
