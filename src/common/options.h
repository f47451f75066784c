/*
 * The size field of the public options structs (zen_comm_options, zen_sparse_options,
 * zen_tp_options): the initialisers set it to sizeof the struct the caller compiled. This version
 * knows one size per struct; 0 (a zeroed struct) is taken as it. A struct from a newer header
 * has a larger size and is refused rather than misread; when fields are added, the library will
 * accept the older sizes here and fill the fields they lack with defaults.
 */
#ifndef ZEN_COMMON_OPTIONS_H
#define ZEN_COMMON_OPTIONS_H

#define ZEN_OPTIONS_SIZE_OK(p) ((p)->size == 0 || (p)->size == sizeof *(p))

#endif
