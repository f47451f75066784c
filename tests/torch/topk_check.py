"""zen_torch.topk_select against torch.topk (tests/torch_topk.cmake).

EXACT must pick the same set as torch.topk(x.abs(), k) (continuous data, so no ties), with the
values of x at those places; APPROX a count in [0.8k, 1.3k] that is every entry at or above a
threshold and keeps >= 99% of the exact top-k's magnitude mass (the largest min(count, k)
selected magnitudes over the k largest); bfloat16 input like float32;
bad tensors raise RuntimeError. zen_torch._C.topk_compress_bucket (the DDP hook's local step)
equals the same step in plain torch bit for bit (check_bucket). Exit 77 (skip) when torch does
not import.
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


def check_bucket(n, k, momentum, exact, pairs, threads):
    """zen_torch._C.topk_compress_bucket (the hook's local step) over 3 steps against the step in
    plain torch: mul_/add_ for the update, topk_select on the updated residual for the selection
    (the threshold defines the approximate set), boolean masks for the whole ranges. Bit for bit:
    indices, values, residual and velocity."""
    g = torch.Generator().manual_seed(n + k)
    v = torch.randn(n, generator=g) * 0.1
    u = torch.randn(n, generator=g) * 0.1 if momentum else None
    rv, ru = v.clone(), u.clone() if u is not None else None
    small = torch.tensor(pairs, dtype=torch.int64)
    whole = torch.zeros(n, dtype=torch.bool)
    for a, b in zip(pairs[0::2], pairs[1::2]):
        whole[a:b] = True
    for step in range(3):
        grad = torch.randn(n, generator=g)
        grad[::17] = 0
        if ru is not None:
            ru.mul_(momentum).add_(grad)
            rv.add_(ru)
        else:
            rv.add_(grad)
        top = torch.zeros(n, dtype=torch.bool)
        top[zen_torch.topk_select(rv, k, exact=exact, threads=threads)[0]] = True
        want = (top | whole).nonzero().view(-1)
        want_v = rv[want].clone()
        rv[want] = 0
        if ru is not None:
            ru[top & ~whole] = 0
        idx, val = zen_torch._C.topk_compress_bucket(grad, v, u, momentum, k, small, exact, threads)
        assert idx.dtype == torch.int64 and val.dtype == torch.float32, (idx.dtype, val.dtype)
        assert torch.equal(idx, want), f"bucket step {step}: indices differ"
        assert torch.equal(val, want_v), f"bucket step {step}: values differ"
        assert torch.equal(v, rv), f"bucket step {step}: residual differs"
        if u is not None:
            assert torch.equal(u, ru), f"bucket step {step}: velocity differs"


n = 200_003
for exact in (False, True):
    for momentum in (0.0, 0.9):
        check_bucket(n, 2000, momentum, exact, [0, 300, 300, 5000, 100_000, 100_050, n - 7, n], 1)
    check_bucket(n, 2000, 0.9, exact, [], 3)
    check_bucket(1000, 0, 0.5, exact, [10, 20], 1)  # k = 0: the ranges only
z = torch.zeros(100)
bad_ranges = (([5, 3], "ascending"), ([0, 10, 5, 20], "disjoint"), ([0, 101], "[0, 100]"))
for bad_small, words in bad_ranges:
    try:
        zen_torch._C.topk_compress_bucket(z, z.clone(), None, 0.0, 5,
                                          torch.tensor(bad_small, dtype=torch.int64))
    except RuntimeError as e:
        assert "zen_torch.topk_compress_bucket" in str(e) and words in str(e), e
    else:
        raise AssertionError(f"no error for small ranges {bad_small}")
print("topk_select: matches torch.topk (exact), window and recall (approx), f32 and bf16; "
      "topk_compress_bucket: the plain torch step bit for bit")
