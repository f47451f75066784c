/*
 * export.h - ZEN_API, the mark of a function that belongs to libzen's public face.
 *
 * libzen is compiled with -fvisibility=hidden and linked with a version script (ZEN_0.1, made
 * from these headers by scripts/public-symbols.sh), so the shared library exports exactly the
 * functions declared with ZEN_API in include/zen/ headers and nothing else; tests/exports.cmake
 * checks it. Internal functions are linkable only from the static archive (zen__ prefix, see
 * docs/architecture.md "Names").
 */
#ifndef ZEN_EXPORT_H
#define ZEN_EXPORT_H

#if defined(_WIN32)
#define ZEN_API
#elif defined(__GNUC__) || defined(__clang__)
#define ZEN_API __attribute__((visibility("default")))
#else
#define ZEN_API
#endif

/* Marks a public name kept only so old callers still compile; it warns where it is used. */
#if defined(__GNUC__) || defined(__clang__)
#define ZEN_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define ZEN_DEPRECATED(msg)
#endif

#endif /* ZEN_EXPORT_H */
