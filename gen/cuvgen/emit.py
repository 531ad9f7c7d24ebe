"""The generated files' text: a header of typed launchers (static inline functions over
cuv_launch) with the module's struct and loaders declared, and a source that defines the loaders,
embeds the PTX and asserts each scalar C type against the PTX's size and alignment."""

import os
import re

ACCESS_MACRO = {'read': 'CUV_ARG_READ_AT', 'write': 'CUV_ARG_WRITE_AT', 'rw': 'CUV_ARG_RW_AT'}
ACCESS_WORDS = {'read': 'read', 'write': 'written', 'rw': 'read and written'}
TENSOR_MACRO = {'read': 'CUV_TARG_READ', 'write': 'CUV_TARG_WRITE', 'rw': 'CUV_TARG_RW'}
WIDTH = 100


def _wrap(head, items, tail, indent=None):
    """head + items joined by ', ' + tail, wrapped at WIDTH under the first item."""
    pad = ' ' * (len(head) if indent is None else indent)
    lines, line = [], head
    for k, item in enumerate(items):
        piece = item + (', ' if k + 1 < len(items) else tail)
        if len(line) + len(piece.rstrip()) > WIDTH and line.strip():
            lines.append(line.rstrip())
            line = pad
        line += piece
    if not items:
        line += tail
    lines.append(line.rstrip())
    return '\n'.join(lines)


def _fresh(base, taken):
    name = base
    while name in taken:
        name += '_'
    taken.add(name)
    return name


def _comment(lines, indent=''):
    out = [indent + '/* ' + lines[0]]
    out += [indent + ' * ' + line if line else indent + ' *' for line in lines[1:]]
    out[-1] += ' */'
    return '\n'.join(out)


class Module:
    """Names the generated code uses for one .cu file."""

    def __init__(self, name, cu_name, kernels, includes, embedded):
        self.name = name
        self.cu_name = cu_name
        self.kernels = kernels
        self.includes = includes
        self.embedded = embedded
        self.type = name + '_module_t'

    def loaders(self):
        m, t = self.name + '_module', self.type
        out = []
        if self.embedded:
            out.append(('/* Loads the kernels from the PTX embedded when the program was built: '
                        'no file at run time. */',
                        'int %s_load(%s *module, cuv_device_t *dev)' % (m, t)))
        out.append(('/* Loads the kernels from a PTX, cubin or fatbin file built from %s. */'
                    % self.cu_name,
                    'int %s_load_file(%s *module, cuv_device_t *dev, const char *path)' % (m, t)))
        out.append(('/* Loads the kernels from an image in memory (PTX NUL-terminated). */',
                    'int %s_load_data(%s *module, cuv_device_t *dev, const void *image, '
                    'size_t size)' % (m, t)))
        out.append(('/* Drops the kernels\' references and clears *module; NULL or a cleared '
                    'module is harmless. */', 'void %s_destroy(%s *module)' % (m, t)))
        return out


def _launcher_names(kernel):
    taken = {p.name for p in kernel.params}
    names = {k: _fresh(k, taken) for k in ('module', 'config', 'args', 'rc')}
    names['offsets'] = {p.name: _fresh(p.name + '_offset', taken)
                        for p in kernel.params if p.kind == 'buffer'}
    return names


def _words(text, width):
    """text broken into lines of at most width columns, at spaces."""
    lines, line = [], ''
    for word in text.split(' '):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = word if not line else line + ' ' + word
    return lines + [line]


def _kernel_doc(mod, kernel):
    text = '%s:%d: %s' % (mod.cu_name, kernel.line, kernel.text)
    buffers = ['%s %s' % (p.name, ACCESS_WORDS[p.access]) for p in kernel.params
               if p.kind == 'buffer']
    if buffers:
        text += '. Buffers: ' + ', '.join(buffers) + '.'
    return _comment(_words(text, WIDTH - 3))


def _launchers(mod, kernel):
    n = _launcher_names(kernel)
    head = ['const %s *%s' % (mod.type, n['module']), 'cuv_launch_config_t ' + n['config']]
    params_at, params, call, args = [], [], [], []
    for p in kernel.params:
        if p.kind == 'buffer':
            off = n['offsets'][p.name]
            params_at += ['cuv_buffer_t *' + p.name, 'size_t ' + off]
            params.append('cuv_buffer_t *' + p.name)
            call += [p.name, '0']
            args.append('%s(%s, %s)' % (ACCESS_MACRO[p.access], p.name, off))
        else:
            params_at.append('%s %s' % (p.ctype, p.name))
            params.append('%s %s' % (p.ctype, p.name))
            call.append(p.name)
            args.append('CUV_ARG_VALUE(%s)' % p.name)
    at = kernel.name + ('_launch_at' if n['offsets'] else '_launch')
    out = [_kernel_doc(mod, kernel)]
    out.append(_wrap('static inline cuv_op_t *%s(' % at, head + params_at, ') {'))
    if args:
        out.append(_wrap('  const cuv_arg_t %s[] = {' % n['args'], args, '};'))
    out.append('  if (!%s)\n    return cuv_fail(CUV_EINVAL);' % n['module'])
    cfg = n['config']
    out.append(_wrap('  return cuv_launch(', ['%s->%s' % (n['module'], kernel.name),
                     cfg + '.grid', cfg + '.block', cfg + '.shared_bytes',
                     n['args'] if args else 'NULL', str(len(args))], ');'))
    out.append('}')
    if n['offsets']:
        out.append('/* The same with every buffer at offset 0. */')
        out.append(_wrap('static inline cuv_op_t *%s_launch(' % kernel.name, head + params,
                         ') {'))
        out.append(_wrap('  return %s(' % at, [n['module'], cfg] + call, ');'))
        out.append('}')
    return '\n'.join(out)


def _tensor_launcher(mod, kernel):
    """The launcher over tensors (cuv_tensor_launch), for a kernel whose every pointer has an
    element type a tensor can have; '' for the others."""
    buffers = [p for p in kernel.params if p.kind == 'buffer']
    if not buffers or any(p.dtype is None for p in buffers):
        return ''
    n = _launcher_names(kernel)
    params = ['const %s *%s' % (mod.type, n['module']), 'cuv_launch_config_t ' + n['config']]
    args = []
    for p in kernel.params:
        if p.kind == 'buffer':
            params.append('cuv_tensor_in_t ' + p.name)
            args.append('%s.op ? CUV_TARG_OP(cuv_tensor_typed_op(%s.op, CUV_DTYPE_%s), '
                        'CUV_ARG_KIND_%s) : %s(%s.tensor)'
                        % (p.name, p.name, p.dtype, p.access.upper(), TENSOR_MACRO[p.access],
                           p.name))
        else:
            params.append('%s %s' % (p.ctype, p.name))
            args.append('CUV_TARG_VALUE(%s)' % p.name)
    types = ', '.join('%s %s' % (p.name, p.dtype) for p in buffers)
    out = [_comment(_words('The same over tensors (cuv_tensor_launch, include/cuv/tensor.h): '
                           'each tensor parameter a tensor (CUV_IN) of the pointer\'s element '
                           'type (%s; CUV_EARGS otherwise) or an op producing one (CUV_IN_OP, '
                           'consumed, its tensor\'s type checked when it runs: '
                           'cuv_tensor_typed_op; the launch then outputs its tensor).' % types, WIDTH - 3))]
    out.append(_wrap('static inline cuv_op_t *%s_launch_tensors(' % kernel.name, params, ') {'))
    rc = n['rc']
    out.append('  int %s = %s ? 0 : CUV_EINVAL;' % (rc, n['module']))
    # tensors alone: the scalars written here, as for buffers; the tensors' slots, accesses and
    # element types, known here, in a static table from which cuv_tensor_launch_args writes the
    # tensor slots (left unwritten here: bench/RESULTS.md, the layer's cost)
    tensors = ['%s.tensor' % p.name for p in buffers]
    slots = ['{%d, CUV_ARG_KIND_%s, CUV_DTYPE_%s}' % (i, p.access.upper(), p.dtype)
             for i, p in enumerate(kernel.params) if p.kind == 'buffer']
    out.append('  if (%s == 0 && %s) {' % (rc, ' && '.join('!%s.op' % p.name for p in buffers)))
    out.append('    cuv_arg_t %s[%d];' % (n['args'], len(kernel.params)))
    out += ['    %s[%d] = CUV_ARG_VALUE(%s);' % (n['args'], i, p.name)
            for i, p in enumerate(kernel.params) if p.kind != 'buffer']
    out.append(_wrap('    const cuv_tensor_t *const %s_tensors[] = {' % n['args'], tensors, '};'))
    out.append(_wrap('    static const cuv_tensor_slot_t %s_slots[] = {' % n['args'], slots, '};'))
    out.append(_wrap('    return cuv_tensor_launch_args(',
                     ['%s->%s' % (n['module'], kernel.name), n['config'], n['args'],
                      str(len(kernel.params)), n['args'] + '_tensors', n['args'] + '_slots',
                      str(len(buffers))], ');'))
    out.append('  }')
    for p in buffers:
        out.append('  if (%s == 0 && %s.tensor && cuv_tensor_dtype(%s.tensor) != CUV_DTYPE_%s)\n'
                   '    %s = CUV_EARGS;' % (rc, p.name, p.name, p.dtype, rc))
    out.append('  if (%s != 0) {' % n['rc'])
    out += ['    cuv_op_destroy(%s.op);' % p.name for p in buffers]
    out.append('    return cuv_fail(%s);\n  }' % n['rc'])
    # built once the checks passed: the initialiser consumes the ops (cuv_tensor_typed_op)
    out.append(_wrap('  const cuv_targ_t %s[] = {' % n['args'], args, '};'))
    out.append(_wrap('  return cuv_tensor_launch(', ['%s->%s' % (n['module'], kernel.name),
                     n['config'], n['args'], str(len(args))], ');'))
    out.append('}')
    return '\n'.join(out)


def header(mod, header_name):
    guard = re.sub(r'[^A-Za-z0-9]', '_', header_name).upper()
    guard = 'H_' + guard if guard[0].isdigit() else guard
    out = [_comment(['Generated by cuv-launchers from %s: do not edit.' % mod.cu_name,
                     'Typed launchers of its kernels, each returning a lazy launch op '
                     '(include/cuv.h), and the',
                     'loaders of the module that holds them (docs/launchers.md).']),
           '#ifndef %s\n#define %s\n' % (guard, guard), '#include <cuv.h>',
           '#include <cuv/tensor.h>']
    out += ['#include "%s"' % inc if not inc.startswith('<') else '#include %s' % inc
            for inc in mod.includes]
    out.append('\n#ifdef __cplusplus\nextern "C" {\n#endif\n')
    out.append(_comment(['The kernels of %s, loaded together by the functions below; each '
                         'holds a reference on' % mod.cu_name,
                         'the module, and launches hold the kernel until their work is done.']))
    out.append('typedef struct %s_module {' % mod.name)
    out += ['  cuv_kernel_t *%s;' % k.name for k in mod.kernels]
    out.append('} %s;\n' % mod.type)
    for doc, decl in mod.loaders():
        head, rest = decl.split('(', 1)
        out.append(doc + '\n' + _wrap(head + '(', rest[:-1].split(', '), ');'))
    out.append('')
    for k in mod.kernels:
        tensors = _tensor_launcher(mod, k)
        out.append(_launchers(mod, k) + '\n' + (tensors + '\n' if tensors else ''))
    out.append('#ifdef __cplusplus\n}\n#endif\n\n#endif')
    return '\n'.join(out) + '\n'


def _assertions(mod, sizes):
    out = []
    for k in mod.kernels:
        for p, (size, align) in zip(k.params, sizes.get(k.name) or []):
            if p.kind != 'scalar':
                continue
            what = '%s:%d: parameter %s of %s: %s' % (mod.cu_name, k.line, p.name, k.name,
                                                        p.ctype)
            out.append('_Static_assert(sizeof(%s) == %d, "%s is not %d bytes as in the PTX");'
                       % (p.ctype, size, what, size))
            out.append('_Static_assert(_Alignof(%s) == %d, "%s is not aligned to %d as in the '
                       'PTX");' % (p.ctype, align, what, align))
    return out


def _image(name, data):
    data = bytes(data) + b'\0'
    rows = [', '.join(str(b) for b in data[i:i + 24]) for i in range(0, len(data), 24)]
    return ('static const unsigned char %s[] = {\n    ' % name + ',\n    '.join(rows) + '};')


def source(mod, header_name, sizes, image):
    m, t, table = mod.name + '_module', mod.type, mod.name + '_kernels'
    out = [_comment(['Generated by cuv-launchers from %s: do not edit.' % mod.cu_name,
                     'The loaders declared in %s%s.' % (os.path.basename(header_name),
                                                         ', and the PTX embedded' if image
                                                         else '')]),
           '#include <stddef.h>\n#include <string.h>\n', '#include "%s"\n' % header_name]
    asserts = _assertions(mod, sizes)
    if asserts:
        out.append(_comment(['Each scalar C type against what the PTX says of the parameter: a '
                             'type declared', 'differently on the two sides fails here.']))
        out += asserts + ['']
    out.append('static const struct {\n  const char *name;\n  size_t offset;\n} %s[] = {' % table)
    out += ['    {"%s", offsetof(%s, %s)},' % (k.name, t, k.name) for k in mod.kernels]
    out.append('};\n#define %s_COUNT (sizeof %s / sizeof %s[0])\n' % (table.upper(), table,
                                                                      table))
    out.append('static cuv_kernel_t **slot(%s *module, size_t i) {\n'
               '  return (cuv_kernel_t **)((char *)module + %s[i].offset);\n}\n' % (t, table))
    out.append('void %s_destroy(%s *module) {\n  if (!module)\n    return;\n'
               '  for (size_t i = 0; i < %s_COUNT; i++) {\n    cuv_kernel_unref(*slot(module, i));'
               '\n    *slot(module, i) = NULL;\n  }\n}\n' % (m, t, table.upper()))
    out.append('/* Every kernel or none: a failure drops those already got. Consumes mod. */\n'
               'static int get_kernels(%s *module, cuv_module_t *mod) {\n  int rc = 0;\n'
               '  for (size_t i = 0; rc == 0 && i < %s_COUNT; i++)\n'
               '    rc = cuv_kernel_get(slot(module, i), mod, %s[i].name);\n'
               '  cuv_module_unref(mod);\n  if (rc != 0)\n    %s_destroy(module);\n'
               '  return rc;\n}\n' % (t, table.upper(), table, m))
    for kind, params, call in (
            ('file', 'const char *path', 'cuv_module_load_file(&mod, dev, path)'),
            ('data', 'const void *image, size_t size',
             'cuv_module_load_data(&mod, dev, image, size)')):
        out.append('int %s_load_%s(%s *module, cuv_device_t *dev, %s) {\n'
                   '  if (!module)\n    return CUV_EINVAL;\n  memset(module, 0, sizeof *module);\n'
                   '  cuv_module_t *mod;\n  int rc = %s;\n'
                   '  return rc == 0 ? get_kernels(module, mod) : rc;\n}\n'
                   % (m, kind, t, params, call))
    if image is not None:
        out.append(_image('image', image) + '\n')
        out.append('int %s_load(%s *module, cuv_device_t *dev) {\n'
                   '  return %s_load_data(module, dev, image, sizeof image);\n}' % (m, t, m))
    return '\n'.join(out) + '\n'


def _twin(mod, kernel):
    """One kernel's host twin: each parameter unpacked into a local, the body left to the user."""
    fn = kernel.name + '_twin'
    taken = {p.name for p in kernel.params} | {'launch', 'params', fn}
    out = [_kernel_doc(mod, kernel)]
    out.append('static int %s(const cuv_sim_launch_t *launch, void **params) {' % fn)
    for i, p in enumerate(kernel.params):
        if p.kind == 'buffer':
            addr = _fresh(p.name + '_addr', taken)
            const = 'const ' if p.access == 'read' else ''
            out.append('  cuv_deviceptr_t %s; /* %s */' % (addr, p.text))
            out.append('  memcpy(&%s, params[%d], sizeof %s);' % (addr, i, addr))
            out.append('  %svoid *%s = (%svoid *)(uintptr_t)%s; /* a host address */'
                       % (const, p.name, const, addr))
        else:
            out.append('  %s %s;' % (p.ctype, p.name))
            out.append('  memcpy(&%s, params[%d], sizeof %s);' % (p.name, i, p.name))
    out.append('  (void)launch;')
    out += ['  (void)%s;' % p.name for p in kernel.params]
    macro = 'CUV_TWIN_BODY_' + kernel.name
    out.append('#ifdef %s' % macro)
    out.append('  %s' % macro)
    out.append('#else')
    out.append('  /* TODO: the kernel\'s body, over the whole grid (launch->grid, launch->block); '
               'return 0,')
    out.append('   * or a CUresult to fail as the GPU would. Until it is written, every launch '
               'fails. */')
    out.append('  return CUV_TWIN_NOT_WRITTEN;')
    out.append('#endif')
    out.append('}')
    return '\n'.join(out)


def _param_sizes(kernel):
    return ['sizeof(cuv_deviceptr_t)' if p.kind == 'buffer' else 'sizeof(%s)' % p.ctype
            for p in kernel.params]


def _param_aligns(kernel):
    return ['_Alignof(cuv_deviceptr_t)' if p.kind == 'buffer' else '_Alignof(%s)' % p.ctype
            for p in kernel.params]


def twins(mod):
    """A skeleton of each kernel's simulator twin (docs/simulator.md) and NAME_register_twins."""
    out = [_comment(['Host twins of %s\'s kernels for libcuv-sim, generated by cuv-launchers '
                     '--twins: each' % mod.cu_name,
                     'unpacks its parameters; write each body where it says TODO (or define',
                     'CUV_TWIN_BODY_<kernel> before this file is compiled). A body not written '
                     'fails every',
                     'launch with CUV_TWIN_NOT_WRITTEN (CUDA_ERROR_NOT_SUPPORTED). Register the '
                     'twins with',
                     '%s_register_twins() before the kernels are looked up.' % mod.name]),
           '#include <stdint.h>\n#include <string.h>\n\n#include <cuv.h>\n#include <cuv/sim.h>']
    out += ['#include "%s"' % inc if not inc.startswith('<') else '#include %s' % inc
            for inc in mod.includes]
    out.append('\n#ifndef CUV_TWIN_NOT_WRITTEN\n#define CUV_TWIN_NOT_WRITTEN 801 '
               '/* CUDA_ERROR_NOT_SUPPORTED */\n#endif\n')
    for k in mod.kernels:
        out.append(_twin(mod, k) + '\n')
    reg = 'int %s_register_twins(void)' % mod.name
    out.append('/* Registers every twin above, with its parameters\' sizes and alignments. Returns '
               '0, or the')
    out[-1] += '\n * first error of cuv_sim_register_kernel_aligned. */'
    out.append(reg + ';')
    out.append(reg + ' {')
    out.append('  int rc = 0;')
    for k in mod.kernels:
        n = len(k.params)
        if n:
            out.append(_wrap('  static const size_t %s_sizes[] = {' % k.name, _param_sizes(k),
                             '};'))
            out.append(_wrap('  static const size_t %s_aligns[] = {' % k.name, _param_aligns(k),
                             '};'))
            args = ['"%s"' % k.name, k.name + '_twin', str(n), k.name + '_sizes',
                    k.name + '_aligns']
        else:
            args = ['"%s"' % k.name, k.name + '_twin', '0', 'NULL', 'NULL']
        out.append(_wrap('  if (rc == 0)\n    rc = cuv_sim_register_kernel_aligned(', args, ');',
                         indent=4 + len('rc = cuv_sim_register_kernel_aligned(')))
    out.append('  return rc;\n}')
    return '\n'.join(out) + '\n'
