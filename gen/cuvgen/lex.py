"""Tokens of a .cu file, each with its line: identifiers, numbers, string and character
literals, punctuation, and the markers `/* cuv:out */` and `/* cuv:in */` that a comment may hold.
Other comments and preprocessor directives are dropped: the generator reads the text as written,
without preprocessing (docs/launchers.md)."""

import re
from collections import namedtuple

Token = namedtuple('Token', 'kind text line')  # kind: id num str chr punct mark

MARKERS = {'cuv:out': 'out', 'cuv:in': 'in'}
PUNCT3 = ('...', '<<=', '>>=')
PUNCT2 = ('::', '->', '&&', '||', '<<', '>>', '<=', '>=', '==', '!=', '+=', '-=', '*=', '/=',
          '++', '--')
IDENT = re.compile(r'[A-Za-z_$][A-Za-z0-9_$]*')
NUMBER = re.compile(r"\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.']|)*")
RAW_PREFIX = re.compile(r'(?:u8|u|U|L)?R"')


class LexError(Exception):
    def __init__(self, line, message):
        super().__init__(message)
        self.line = line


def _comment_marker(text):
    return MARKERS.get(text.strip())


def _skip_directive(src, i):
    """From a '#' that starts a line to the end of the directive (continuations included)."""
    while i < len(src) and src[i] != '\n':
        if src[i] == '\\' and src.startswith('\\\n', i):
            i += 2
        elif src.startswith('/*', i):
            end = src.find('*/', i + 2)
            i = len(src) if end < 0 else end + 2
        else:
            i += 1
    return i


def _quoted(src, i, quote, line):
    """End of a string or character literal starting at src[i] == quote."""
    j = i + 1
    while j < len(src) and src[j] != quote:
        if src[j] == '\n':
            raise LexError(line, 'unterminated literal')
        j += 2 if src[j] == '\\' else 1
    if j >= len(src):
        raise LexError(line, 'unterminated literal')
    return j + 1


def _raw_string(src, i, line):
    """End of a raw string literal R"delim( ... )delim" whose prefix starts at src[i]."""
    open_quote = src.index('"', i)
    paren = src.find('(', open_quote)
    if paren < 0:
        raise LexError(line, 'malformed raw string literal')
    delim = src[open_quote + 1:paren]
    end = src.find(')' + delim + '"', paren)
    if end < 0:
        raise LexError(line, 'unterminated raw string literal')
    return end + len(delim) + 2


def tokenize(src):
    """The tokens of src, a list of Token; raises LexError on an unterminated literal."""
    tokens = []
    i, line, line_start = 0, 1, True
    while i < len(src):
        c = src[i]
        if c == '\n':
            line, line_start, i = line + 1, True, i + 1
            continue
        if c in ' \t\r\f\v':
            i += 1
            continue
        if c == '\\' and src.startswith('\\\n', i):
            line, i = line + 1, i + 2
            continue
        if c == '#' and line_start:
            end = _skip_directive(src, i)
            line += src.count('\n', i, end)
            i = end
            continue
        line_start = False
        if src.startswith('//', i):
            end = src.find('\n', i)
            end = len(src) if end < 0 else end
            mark = _comment_marker(src[i + 2:end])
            if mark:
                tokens.append(Token('mark', mark, line))
            i = end
            continue
        if src.startswith('/*', i):
            end = src.find('*/', i + 2)
            if end < 0:
                raise LexError(line, 'unterminated comment')
            mark = _comment_marker(src[i + 2:end])
            if mark:
                tokens.append(Token('mark', mark, line))
            line += src.count('\n', i, end)
            i = end + 2
            continue
        raw = RAW_PREFIX.match(src, i)
        if raw:
            end = _raw_string(src, i, line)
            tokens.append(Token('str', src[i:end], line))
            line += src.count('\n', i, end)
            i = end
            continue
        m = IDENT.match(src, i)
        if m:
            end = m.end()
            if end < len(src) and src[end] in '"\'' and m.group() in ('u8', 'u', 'U', 'L'):
                end = _quoted(src, end, src[end], line)
                tokens.append(Token('str' if src[m.end()] == '"' else 'chr', src[i:end], line))
            else:
                tokens.append(Token('id', m.group(), line))
            i = end
            continue
        m = NUMBER.match(src, i)
        if m:
            tokens.append(Token('num', m.group(), line))
            i = m.end()
            continue
        if c in '"\'':
            end = _quoted(src, i, c, line)
            tokens.append(Token('str' if c == '"' else 'chr', src[i:end], line))
            i = end
            continue
        for p in PUNCT3 + PUNCT2:
            if src.startswith(p, i):
                tokens.append(Token('punct', p, line))
                i += len(p)
                break
        else:
            tokens.append(Token('punct', c, line))
            i += 1
    return tokens
