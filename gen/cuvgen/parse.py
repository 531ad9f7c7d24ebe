"""The extern "C" __global__ kernels of a .cu file and their parameters, from its tokens (lex).

A kernel has C linkage when it is declared inside `extern "C" { ... }` or after `extern "C"`;
other __global__ functions have mangled names that no C program can look up, and are skipped.
What a C launcher cannot express is refused with a GenError naming the line: templates, default
arguments, references, unnamed, variadic and function-pointer parameters, pointers to pointers,
qualified and template types. Each parameter becomes a buffer (a pointer: read when it points to
const or is marked in, write when marked out, else read-write) or a scalar passed by value, whose
C type cnames names."""

import re
from collections import namedtuple

from . import cnames

# kind: buffer | scalar; dtype: a buffer's element type as a cuv_dtype_t name (F32...), or None
Param = namedtuple('Param', 'name kind ctype access text dtype', defaults=(None,))
Kernel = namedtuple('Kernel', 'name line params text')

ATTRIBUTE_CALLS = ('__attribute__', '__launch_bounds__', '__maxnreg__', '__cluster_dims__',
                   '__declspec', 'alignas', '__align__', '__builtin_align__', '__noinline__',
                   '__forceinline__')
IGNORED_WORDS = ('__restrict__', '__restrict', 'restrict', '__grid_constant__', 'register',
                 'volatile')
MARKER_WORDS = {'CUV_OUT': 'out', 'CUV_IN': 'in'}
OPENERS = {'(': ')', '[': ']', '{': '}'}


class GenError(Exception):
    def __init__(self, line, message):
        super().__init__(message)
        self.line = line


def _is(tok, text):
    return tok.kind in ('id', 'punct') and tok.text == text


def _matching(tokens, i):
    """Index of the bracket that closes tokens[i] (one of ( [ {)."""
    close, depth = OPENERS[tokens[i].text], 0
    for j in range(i, len(tokens)):
        if tokens[j].kind == 'punct':
            if tokens[j].text == tokens[i].text:
                depth += 1
            elif tokens[j].text == close:
                depth -= 1
                if depth == 0:
                    return j
    raise GenError(tokens[i].line, "no closing '%s'" % close)


def _drop_attributes(tokens):
    """tokens without __attribute__((...)), __launch_bounds__(...), [[...]], alignas(...) and
    the like: they say nothing about how a kernel is called."""
    out, i = [], 0
    while i < len(tokens):
        t = tokens[i]
        if t.kind == 'id' and t.text in ATTRIBUTE_CALLS:
            i += 1
            if i < len(tokens) and _is(tokens[i], '('):
                i = _matching(tokens, i) + 1
            continue
        if _is(t, '[') and i + 1 < len(tokens) and _is(tokens[i + 1], '['):
            i = _matching(tokens, i) + 1
            continue
        out.append(t)
        i += 1
    return out


def _split_params(tokens):
    """The parameter list's tokens split at top-level commas (brackets and angles nest). A
    marker comment right after a comma, on its line, belongs to the parameter before it:
    `float *y, // cuv:out`."""
    params, current, depth, comma_line = [], [], 0, None
    for t in tokens:
        if t.kind == 'mark' and not current and params and t.line == comma_line:
            params[-1].append(t)
            continue
        if t.kind == 'punct':
            if t.text in '([{<':
                depth += 1
            elif t.text in ')]}>':
                depth -= 1
            elif t.text == '>>':
                depth -= 2
            elif t.text == ',' and depth == 0:
                params.append(current)
                current, comma_line = [], t.line
                continue
        current.append(t)
    if current or params:
        params.append(current)
    return params


def _text(tokens):
    """The tokens as a declaration reads: 'const float *x', 'unsigned long long n'."""
    out = ' '.join(t.text for t in tokens if t.kind != 'mark')
    out = re.sub(r' ?\* ?', ' *', out).replace('* *', '**').replace(' :: ', '::')
    return re.sub(r' ([,\])\]])', r'\1', out).replace('[ ', '[').replace('( ', '(').strip()


def _markers(tokens, line, where):
    marks = {t.text for t in tokens if t.kind == 'mark'}
    marks |= {MARKER_WORDS[t.text] for t in tokens if t.kind == 'id' and t.text in MARKER_WORDS}
    if len(marks) > 1:
        raise GenError(line, '%s is marked both in and out' % where)
    rest = [t for t in tokens if t.kind != 'mark' and not (t.kind == 'id' and
                                                          t.text in MARKER_WORDS)]
    return (marks.pop() if marks else None), rest


def _refuse_shapes(tokens, line, where):
    for t in tokens:
        if t.kind != 'punct':
            continue
        if t.text in ('&', '&&'):
            raise GenError(line, '%s is a reference: a C launcher passes values and buffers; '
                           'take a pointer (a buffer) or a value' % where)
        if t.text == '=':
            raise GenError(line, '%s has a default argument: C has none; drop it' % where)
        if t.text == '(':
            raise GenError(line, '%s is a function pointer or has parentheses: C launchers '
                           'take values and buffers only' % where)
        if t.text in ('<', '>', '>>'):
            raise GenError(line, '%s has a template type: give the kernel a C type' % where)


def _strip_std(tokens, line, where):
    """std::size_t and ::size_t become size_t; any other qualified name is refused."""
    out = []
    for t in tokens:
        if _is(t, '::'):
            prev = out[-1].text if out else ''
            if prev == 'std':
                out.pop()
            elif prev and prev not in cnames.QUALIFIERS:
                raise GenError(line, "%s names a qualified type (%s::...): C has no namespaces; "
                               "use a C type" % (where, prev))
            continue
        out.append(t)
    return out


def _resolve(tokens, typedefs):
    """The type's tokens with typedefs declared in the .cu replaced by what they name. A const
    before a typedef of a pointer makes the pointer const, not what it points to: it goes."""
    for _ in range(16):
        hit = next((i for i, t in enumerate(tokens) if t.kind == 'id' and t.text in typedefs),
                   None)
        if hit is None:
            return tokens
        target, before = typedefs[tokens[hit].text], tokens[:hit]
        if any(_is(t, '*') for t in target):
            before = [t for t in before if not _is(t, 'const')]
        tokens = before + target + tokens[hit + 1:]
    return tokens


def _name_of(tokens, line, where):
    """(name, type tokens) of a parameter; an array parameter (a[], a[N], a[][N]) is a
    pointer."""
    array = False
    while tokens and _is(tokens[-1], ']'):
        start = max(i for i, t in enumerate(tokens) if _is(t, '['))
        tokens, array = tokens[:start], True
    unnamed = GenError(line, "%s has no name: the launcher names its C parameters after the "
                       "kernel's" % where)
    if not tokens or tokens[-1].kind != 'id' or cnames.is_type_word(tokens[-1].text):
        raise unnamed
    type_tokens = tokens[:-1]
    named = [t for t in type_tokens if t.kind == 'id' and t.text not in cnames.QUALIFIERS
             and t.text not in cnames.TAGS]
    if not named:
        raise unnamed
    if array:
        type_tokens = type_tokens + [tokens[-1]._replace(kind='punct', text='*')]
    return tokens[-1].text, type_tokens


def _param(tokens, index, kernel, line, typedefs):
    """A Param from one parameter's tokens, or a GenError saying why C cannot take it."""
    where = 'parameter %d of kernel %s' % (index + 1, kernel)
    tokens = _drop_attributes(tokens)
    if len(tokens) == 1 and _is(tokens[0], '...'):
        raise GenError(line, 'kernel %s is variadic: a C launcher needs every parameter '
                       'named and typed' % kernel)
    marker, tokens = _markers(tokens, line, where)
    eq = next((i for i, t in enumerate(tokens) if _is(t, '=')), None)
    if eq and tokens[eq - 1].kind == 'id':
        where = "parameter '%s' of kernel %s" % (tokens[eq - 1].text, kernel)
    tokens = [t for t in tokens if not (t.kind == 'id' and t.text in IGNORED_WORDS)]
    _refuse_shapes(tokens, line, where)
    name, type_tokens = _name_of(tokens, line, where)
    where = "parameter '%s' of kernel %s" % (name, kernel)
    type_tokens = [t for t in _resolve(type_tokens, typedefs)
                   if not (t.kind == 'id' and t.text in IGNORED_WORDS)]
    type_tokens = _strip_std(type_tokens, line, where)
    _refuse_shapes(type_tokens, line, where)
    return _typed(name, type_tokens, marker, _text(tokens), line, where)


def _typed(name, type_tokens, marker, text, line, where):
    """A buffer (a pointer, with its access) or a scalar (with its C type)."""
    stars = [i for i, t in enumerate(type_tokens) if _is(t, '*')]
    if len(stars) > 1:
        raise GenError(line, "%s is a pointer to a pointer: cuv cannot track the buffers it "
                       "points to; pass them as separate buffers, or their addresses as "
                       "unsigned long long" % where)
    if not stars:
        if marker:
            raise GenError(line, '%s is marked %s but is not a pointer' % (where, marker))
        return Param(name, 'scalar', cnames.c_type(type_tokens, line, where, GenError), None,
                     text)
    const = any(_is(t, 'const') for t in type_tokens[:stars[0]])
    if marker == 'out' and const:
        raise GenError(line, '%s points to const but is marked out' % where)
    access = {'out': 'write', 'in': 'read'}.get(marker, 'read' if const else 'rw')
    element = [t.text for t in type_tokens[:stars[0]] if t.text not in cnames.QUALIFIERS]
    return Param(name, 'buffer', 'cuv_buffer_t *', access, text, cnames.dtype(element))


class _Scanner:
    """Walks the tokens' top level: extern "C" blocks and namespaces open scopes; everything
    else is a declaration up to ';' or a body, whose braces are skipped."""

    def __init__(self, tokens):
        self.tokens = tokens
        self.kernels = []
        self.typedefs = {}
        self.scopes = []  # 'C', 'C++' or 'namespace' for each open brace of a scope

    def c_linkage(self):
        for scope in reversed(self.scopes):
            if scope in ('C', 'C++'):
                return scope == 'C'
        return False

    def run(self):
        i, toks = 0, self.tokens
        while i < len(toks):
            t = toks[i]
            if _is(t, '}'):
                if self.scopes:
                    self.scopes.pop()
                i += 1
            elif _is(t, ';'):
                i += 1
            elif (_is(t, 'extern') and i + 2 < len(toks) and toks[i + 1].kind == 'str'
                  and _is(toks[i + 2], '{')):
                self.scopes.append('C' if toks[i + 1].text == '"C"' else 'C++')
                i += 3
            elif _is(t, 'namespace') or (_is(t, 'inline') and i + 1 < len(toks)
                                         and _is(toks[i + 1], 'namespace')):
                i = self.namespace(i)
            else:
                i = self.declaration(i)
        return self.kernels, self.typedefs

    def namespace(self, i):
        j = i
        while j < len(self.tokens) and not _is(self.tokens[j], '{') \
                and not _is(self.tokens[j], ';'):
            j += 1
        if j < len(self.tokens) and _is(self.tokens[j], '{'):
            self.scopes.append('namespace')
        return j + 1

    def declaration(self, i):
        """Reads one declaration from tokens[i]; returns the index after it."""
        toks, decl, depth, j = self.tokens, [], 0, i
        while j < len(toks):
            t = toks[j]
            if t.kind == 'punct' and t.text in '([':
                depth += 1
            elif t.kind == 'punct' and t.text in ')]':
                depth -= 1
            elif depth == 0 and _is(t, ';'):
                break
            elif depth == 0 and _is(t, '{'):
                end = _matching(toks, j)
                if self.is_function(decl):
                    self.take(decl)
                    return end + 1
                decl.append(t._replace(text='{}'))  # a class body or an initializer
                j = end + 1
                continue
            decl.append(t)
            j += 1
        self.take(decl)
        return j + 1

    @staticmethod
    def is_function(decl):
        """Whether a '{' after decl opens a function body (decl ends with a parameter list)."""
        core = _drop_attributes(decl)
        while core and core[-1].kind == 'id' and core[-1].text in ('const', 'noexcept',
                                                                   'override', 'final'):
            core = core[:-1]
        return bool(core) and _is(core[-1], ')') and not _is(core[0], 'typedef')

    def take(self, decl):
        if not decl:
            return
        if _is(decl[0], 'typedef') or _is(decl[0], 'using'):
            self.typedef(decl)
            return
        if not any(_is(t, '__global__') for t in decl):
            return
        c_linkage = self.c_linkage()
        if len(decl) > 1 and _is(decl[0], 'extern') and decl[1].kind == 'str':
            c_linkage, decl = decl[1].text == '"C"', decl[2:]
        if c_linkage:
            self.kernel(decl)

    def typedef(self, decl):
        """typedef T NAME; and using NAME = T; for scalar and pointer types. A typedef of a
        struct, an array or a function is named as written in C (cnames)."""
        if _is(decl[0], 'using'):
            if len(decl) < 4 or decl[1].kind != 'id' or not _is(decl[2], '='):
                return
            name, target = decl[1].text, decl[3:]
        else:
            if len(decl) < 3 or decl[-1].kind != 'id':
                return
            name, target = decl[-1].text, decl[1:-1]
        if any(t.kind == 'punct' and t.text not in ('*', '::') for t in target):
            return
        self.typedefs[name] = target

    def kernel(self, decl):
        line = decl[0].line
        core = _drop_attributes(decl)
        paren = next((i for i, t in enumerate(core) if _is(t, '(')), None)
        if paren is None or paren == 0 or core[paren - 1].kind != 'id':
            return  # not a function: a __global__ variable would be a compile error anyway
        name, line = core[paren - 1].text, core[paren - 1].line
        if any(_is(t, 'template') for t in core[:paren]):
            raise GenError(line, 'kernel %s is a template: a template has no C name; launch '
                           'an extern "C" kernel that calls the instance you need' % name)
        close = _matching(core, paren)
        inner = core[paren + 1:close]
        if len(inner) == 1 and _is(inner[0], 'void'):
            inner = []
        params = [_param(p, k, name, p[0].line if p else line, self.typedefs)
                  for k, p in enumerate(_split_params(inner))]
        seen = set()
        for p in params:
            if p.name in seen:
                raise GenError(line, "kernel %s names two parameters '%s'" % (name, p.name))
            seen.add(p.name)
        text = '%s(%s)' % (name, ', '.join(p.text for p in params))
        old = next((k for k in self.kernels if k.name == name), None)
        if old is None:
            self.kernels.append(Kernel(name, line, params, text))
        elif [(p.kind, p.ctype) for p in old.params] != [(p.kind, p.ctype) for p in params]:
            raise GenError(line, 'kernel %s is declared again with other parameters (line %d)'
                           % (name, old.line))


def kernels(tokens):
    """(kernels, typedefs) of a .cu file's tokens; raises GenError."""
    return _Scanner(tokens).run()
