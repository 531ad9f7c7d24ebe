"""cuv-launchers' package: a .cu file's extern "C" kernels read (lex, parse, cnames), checked
against the PTX built from it (ptx), and written out as a C header of typed launchers and a C
source of the module's loaders (emit)."""
