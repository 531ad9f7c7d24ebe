"""The C name of a kernel parameter's scalar type (docs/launchers.md):
- C's own types (int, unsigned long long, float, bool...), the <stdint.h> and <stddef.h> names
  (int8_t, uint64_t, size_t...; also as std::...) as written;
- CUDA's vector types (float4, double2, uchar3, longlong4_32a...) as cuv_<name>_t, and dim3,
  __half, __half2, __nv_bfloat16 and __nv_bfloat162 as cuv_dim3_t, cuv_half_t, cuv_half2_t,
  cuv_bfloat16_t and cuv_bfloat162_t: include/cuv/typed.h defines them with the device's size
  and alignment;
- any other name (a struct, union or enum declared in the .cu, or a typedef of one) as written:
  the C side declares it, with the same layout, in a header both include (--include).
Typedefs of C types declared in the .cu are resolved before (parse)."""

QUALIFIERS = ('const', 'volatile')
TAGS = ('struct', 'union', 'enum', 'class')
BUILTIN = ('void', 'bool', 'char', 'short', 'int', 'long', 'signed', 'unsigned', 'float',
           'double', '__int128', '_Bool')
VECTOR_ELEMENTS = ('char', 'uchar', 'short', 'ushort', 'int', 'uint', 'long', 'ulong',
                   'longlong', 'ulonglong', 'float', 'double')
WIDE_VECTOR_ELEMENTS = ('long', 'ulong', 'longlong', 'ulonglong', 'double')
VECTORS = {e + str(n) for e in VECTOR_ELEMENTS for n in range(1, 5)}
VECTORS |= {e + '4_' + a for e in WIDE_VECTOR_ELEMENTS for a in ('16a', '32a')}
NAMED = {'dim3': 'cuv_dim3_t', '__half': 'cuv_half_t', 'half': 'cuv_half_t',
         '__half2': 'cuv_half2_t', 'half2': 'cuv_half2_t', '__nv_bfloat16': 'cuv_bfloat16_t',
         'nv_bfloat16': 'cuv_bfloat16_t', '__nv_bfloat162': 'cuv_bfloat162_t',
         'nv_bfloat162': 'cuv_bfloat162_t'}

# A pointer's element type as a cuv_dtype_t (include/cuv/tensor.h), for the tensor launchers;
# plain char, whose signedness C leaves open, and every other type have none.
DTYPES = {('float',): 'F32', ('double',): 'F64', ('__half',): 'F16', ('half',): 'F16',
          ('__nv_bfloat16',): 'BF16', ('nv_bfloat16',): 'BF16', ('int8_t',): 'I8',
          ('signed', 'char'): 'I8', ('uint8_t',): 'U8', ('unsigned', 'char'): 'U8',
          ('int',): 'I32', ('signed', 'int'): 'I32', ('int32_t',): 'I32', ('unsigned',): 'U32',
          ('unsigned', 'int'): 'U32', ('uint32_t',): 'U32', ('long', 'long'): 'I64',
          ('long', 'long', 'int'): 'I64', ('int64_t',): 'I64', ('unsigned', 'long', 'long'): 'U64',
          ('unsigned', 'long', 'long', 'int'): 'U64', ('uint64_t',): 'U64'}


def dtype(words):
    """The cuv_dtype_t name (F32, U32...) of a pointer's element type words, or None."""
    return DTYPES.get(tuple(words))


def is_type_word(word):
    """Whether word is a keyword of a type (so it cannot be a parameter's name)."""
    return word in BUILTIN or word in QUALIFIERS or word in TAGS


def c_type(tokens, line, where, error):
    """The C spelling of a scalar parameter's type tokens (without its name); raises error."""
    words = [t.text for t in tokens if t.text not in QUALIFIERS]
    if any(t.kind != 'id' for t in tokens) or not words:
        raise error(line, '%s: no C type for %r' % (where, ' '.join(t.text for t in tokens)))
    if all(w in BUILTIN for w in words):
        if 'void' in words:
            raise error(line, '%s has type void' % where)
        return ' '.join('bool' if w == '_Bool' else w for w in words)
    if len(words) == 2 and words[0] in TAGS:
        return ('struct' if words[0] == 'class' else words[0]) + ' ' + words[1]
    if len(words) == 1:
        if words[0] in VECTORS:
            return 'cuv_%s_t' % words[0]
        return NAMED.get(words[0], words[0])
    raise error(line, '%s: no C type for %r' % (where, ' '.join(words)))
