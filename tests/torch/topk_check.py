"""zen_torch.topk_select against torch.topk (tests/torch_topk.cmake).

EXACT must pick the same set as torch.topk(x.abs(), k) (continuous data, so no ties), with the
values of x at those places; APPROX a count in [0.8k, 1.3k] that is every entry at or above a
threshold and keeps >= 99% of the exact top-k's magnitude mass (the largest min(count, k)
selected magnitudes over the k largest); bfloat16 input like float32;
bad tensors raise RuntimeError. Exit 77 (skip) when torch does not import.
"""
import sys

try:
    import torch
except ImportError:
    print("skipping: torch does not import")
    sys.exit(77)
import zen_torch

torch.manual_seed(0)
torch.set_num_threads(1)


def check(x, k, exact, threads):
    idx, val = zen_torch.topk_select(x, k, exact=exact, threads=threads)
    assert idx.dtype == torch.int64 and val.dtype == torch.float32, (idx.dtype, val.dtype)
    assert bool((idx[1:] > idx[:-1]).all()), "indices not ascending"
    assert torch.equal(val, x[idx].float()), "values are not x at the indices"
    ref = torch.topk(x.float().abs(), k).indices
    if exact:
        assert idx.numel() == k, (idx.numel(), k)
        assert torch.equal(idx, ref.sort().values), "EXACT differs from torch.topk"
        return
    c = idx.numel()
    assert 0.8 * k <= c <= 1.3 * k, (c, k)
    mask = torch.zeros(x.numel(), dtype=torch.bool)
    mask[idx] = True
    a = x.float().abs()
    assert a[mask].min() >= a[~mask].max(), "APPROX is not a threshold set"
    # mass recall: the largest min(count, k) selected magnitudes over the exact top-k's (equal
    # magnitudes make the exact set ambiguous, their mass is not)
    recall = a[idx].sort(descending=True).values[:k].sum() / a[ref].sum()
    assert recall >= 0.99, recall


n = 300_000
for dtype in (torch.float32, torch.bfloat16):
    x = torch.randn(n).to(dtype)
    for k in (30, 3000):
        for threads in (1, 3):
            check(x, k, True, threads) if dtype == torch.float32 else None
            check(x, k, False, threads)
heavy = torch.distributions.StudentT(2.0).sample((n,))
check(heavy, 3000, True, 1)
check(heavy, 3000, False, 1)
idx, val = zen_torch.topk_select(torch.zeros(10), 3)
assert idx.numel() == 0 and val.numel() == 0
for bad in (torch.randn(4, 4), torch.randn(10)[::2], torch.randn(10, dtype=torch.float64)):
    try:
        zen_torch.topk_select(bad, 2)
    except RuntimeError as e:
        assert "zen_torch.topk_select" in str(e), e
    else:
        raise AssertionError("no error for a bad tensor")
print("topk_select: matches torch.topk (exact), window and recall (approx), f32 and bf16")
