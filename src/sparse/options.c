/* Initialiser of zen_sparse_options (see include/zen/sparse.h). */
#include <zen/sparse.h>

void zen_sparse_options_init(zen_sparse_options *opts)
{
    if (opts)
        *opts = (zen_sparse_options)ZEN_SPARSE_OPTIONS_INIT;
}
