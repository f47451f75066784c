/*
 * Which OpenBLAS kernel set the trainer's GEMMs run on, for the run's banner and summary: a
 * DYNAMIC_ARCH OpenBLAS (Debian's) picks it once as it loads, from the CPU id or from
 * OPENBLAS_CORETYPE, and the choice moves a step's compute time by a quarter on the same CPU
 * (docs/training.md), so a throughput figure without it is not comparable.
 */
#include <cblas.h>

#include "train.h"

const char *zen_train_blas_core(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}
