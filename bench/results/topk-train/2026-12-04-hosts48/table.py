import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["rep"], {})[r["sync"]] = r
print("| round | sync | whole run tok/s | vs dense | steady tok/s | vs dense | ms/step | sync ms | wait ms | select ms | bytes/step | val loss | vs dense | load | blas |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for rep in sorted(by):
    d = by[rep].get("dense")
    for s, r in by[rep].items():
        name = {"dense": "dense", "topk:balanced@union": "top-k union", "topk:balanced@global": "top-k global"}.get(s, s)
        vr = f"**{r['tok_s_run']/d['tok_s_run']:.2f}x**" if d and s != "dense" else ""
        vs = f"{r['tok_s']/d['tok_s']:.2f}x" if d and s != "dense" else ""
        vl = f"{100*(r['val_loss']/d['val_loss']-1):+.2f}%" if d and s != "dense" else ""
        print(f"| {rep} | {name} | {r['tok_s_run']:.0f} | {vr} | {r['tok_s']:.0f} | {vs} | {r['ms_step']:.0f} | {r['comm_ms']:.1f} | {r['wait_ms']:.1f} | {r['phase_ms'].get('select',0):.1f} | {r['bytes_synced']/1e6:.2f} MB | {r['val_loss']:.3f} | {vl} | {r['load']} | {r['blas_core']} |")
