"""What the PTX built from the .cu says of each kernel: its parameters' sizes and alignments,
read from `.entry NAME(.param ...)`. The generator checks its own reading of the signatures
against them (count), and the C types the launchers take against them (sizes and alignments, as
static assertions in the generated source). An entry listed without its parameters (the
simulator's listing where nvcc is absent) is known by name only."""

import re

ENTRY = re.compile(r'\.entry\s+([A-Za-z_$][\w$]*)\s*\(')
PARAM = re.compile(r'\.param\s+(?P<type>\.[a-z]+\d*)(?:\s+\.ptr)?(?:\s+\.(?:global|const|'
                   r'shared|local))?(?:\s+\.align\s+(?P<palign>\d+))?\s+[A-Za-z_$][\w$]*$')
ARRAY = re.compile(r'\.param\s+\.align\s+(?P<align>\d+)\s+\.b8\s+[A-Za-z_$][\w$]*'
                   r'\[(?P<size>\d+)\]$')
SCALAR_BYTES = {'8': 1, '16': 2, '32': 4, '64': 8}


def _strip_comments(text):
    text = re.sub(r'/\*.*?\*/', ' ', text, flags=re.S)
    return re.sub(r'//[^\n]*', ' ', text)


def _param(text):
    """(size, align) of one `.param` declaration, or None when it is not one."""
    text = ' '.join(text.split())
    m = ARRAY.match(text)
    if m:
        return int(m.group('size')), int(m.group('align'))
    m = PARAM.match(text)
    if m:
        bits = re.sub(r'^\.[a-z]+', '', m.group('type'))
        size = SCALAR_BYTES.get(bits)
        if size:
            return size, size
    return None


def entries(text):
    """{kernel name: [(size, align), ...] or None when the parameters are not listed}."""
    text = _strip_comments(text)
    found = {}
    for m in ENTRY.finditer(text):
        close = text.find(')', m.end())
        nxt = ENTRY.search(text, m.end())
        if close < 0 or (nxt and nxt.start() < close):
            found[m.group(1)] = None
            continue
        body = text[m.end():close].strip()
        params = [_param(p) for p in body.split(',')] if body else []
        found[m.group(1)] = None if None in params else params
    return found
