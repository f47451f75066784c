/*
 * The check behind `zen bench sparse`'s "verified" column: one scheme's dense output against the
 * dense reference sum. Kept apart from the command so a unit test can call it
 * (tests/CMakeLists.txt compiles sparse_verify.c into the test helper library).
 */
#ifndef ZEN_TOOLS_SPARSE_VERIFY_H
#define ZEN_TOOLS_SPARSE_VERIFY_H

#include <stddef.h>

/*
 * 1 when out[0..len) matches ref, the sum of n ranks' inputs, else 0.
 * absref NULL: the inputs are small integers, so every summation order gives ref bit for bit
 * and the comparison is exact. absref non-NULL (recorded gradients): absref[i] is the sum of
 * the |values| behind ref[i] and out[i] may differ by the float rounding bound of an n-term
 * sum, n * 2^-23 * absref[i].
 * Non-finite values: where ref is NaN out must be NaN (any payload); where ref is an infinity
 * out must be the same infinity; where ref is finite a NaN in out never matches, nor does a
 * finite value where ref is NaN. Pure; thread-safe.
 */
int bench_sparse_matches_reference(const float *out, const float *ref, const float *absref,
                                   size_t len, int n);

#endif
