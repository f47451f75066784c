/* Initialiser of zen_tp_options (see include/zen/tp.h). */
#include <zen/tp.h>

void zen_tp_options_init(zen_tp_options *opts)
{
    if (opts)
        *opts = (zen_tp_options)ZEN_TP_OPTIONS_INIT;
}
