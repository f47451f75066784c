#include "sparse_verify.h"

#include <math.h>
#include <string.h>

int bench_sparse_matches_reference(const float *out, const float *ref, const float *absref,
                                   size_t len, int n)
{
    if (memcmp(out, ref, len * sizeof *out) == 0)
        return 1;
    double bound = (double)n * 0x1p-23;
    for (size_t i = 0; i < len; i++) {
        float o = out[i], r = ref[i];
        /* NaN in means NaN out (any payload), an infinity must come out as the same one; and
         * a NaN where the sum is finite fails (every comparison with NaN is false, so test
         * "within the bound", never "beyond it"). */
        if (isnan(r) || isinf(r)) {
            if (isnan(r) ? !isnan(o) : o != r)
                return 0;
        } else if (!absref) {
            if (o != r)
                return 0;
        } else if (isinf(absref[i])) {
            if (isnan(o)) /* |values| overflowed: the order decides between finite and inf */
                return 0;
        } else if (!(fabs((double)o - r) <= bound * absref[i] + 1e-30)) {
            return 0;
        }
    }
    return 1;
}
