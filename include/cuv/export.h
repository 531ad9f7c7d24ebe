#ifndef CUV_EXPORT_H
#define CUV_EXPORT_H

/** @file
 * Symbols are hidden by default; the public API is marked with CUV_EXTERN. */
#if defined(CUV_BUILDING) && defined(__GNUC__)
/** Marks a public function: default visibility while cuv itself is built, nothing otherwise. */
#define CUV_EXTERN __attribute__((visibility("default")))
#else
#define CUV_EXTERN
#endif

#endif
