/* Order statistics of small arrays of measurements (timings gathered from ranks or repetitions). */
#ifndef ZEN_COMMON_STATS_H
#define ZEN_COMMON_STATS_H

#include <stddef.h>

/* Sort v[0..n) ascending in place and return its median: the middle element, or the mean of the
 * middle two for even n; 0 for n == 0. */
double zen__median_inplace(double *v, size_t n);

/* Sort v[0..n) ascending in place and return the lower median v[(n - 1) / 2] (for two values the
 * smaller); 0 for n == 0. */
double zen__lower_median_inplace(double *v, size_t n);

#endif
