"""The XML reader of the MJCF loader: MuJoCo's XML syntax, nothing more.

MuJoCo reads MJCF with TinyXML2, which is not a validating XML 1.0 parser: it accepts documents a strict parser
(libxml2/lxml) rejects and rejects a few a strict parser accepts. To make the same accept/reject decision as
MuJoCo, this module reads the document with TinyXML2's grammar (as MuJoCo configures it: entities processed,
whitespace preserved), written from its documented behaviour:

- the document: optional leading whitespace and a UTF-8 byte-order mark; any number of nodes; the first element
  is the model (elements after it are ignored; a stray closing tag at the top level ends the document);
  text anywhere (also between top-level nodes) as long as a '<' follows it; a NUL character ends the input.
- nodes: `<?...?>` declarations (only at the start of the document, before anything but other declarations),
  `<!--...-->` comments (any content, '--' included), `<![CDATA[...]]>`, `<!...>` (DOCTYPE and other
  "unknown" nodes: skipped up to the first '>', never interpreted), elements, text.
- elements: `<name attr="v" attr2='v'>` ... `</name>` or `<name .../>`; names start with an ASCII letter, '_',
  ':' or any non-ASCII character and continue with those, digits, '.' and '-'; whitespace is allowed after '<'
  and around '='; attributes need no whitespace between them; a repeated attribute is an error; the closing
  tag must match. Nesting deeper than 500 elements is an error.
- attribute values: any characters up to the closing quote ('<' and '&' included); line ends normalised to
  '\\n'; `&amp; &lt; &gt; &quot; &apos;` and numeric character references (`&#65;`, `&#x41;`) are replaced;
  anything else starting with '&' is kept as written. In particular there is no DTD processing at all: a
  DOCTYPE is skipped, entities it declares are never defined, `&name;` stays the literal text `&name;`, and no
  file or network resource is ever read while parsing. (This is the loader's XML security rule; see
  docs/mjcf.md.)

Bytes are decoded as UTF-8 with undecodable bytes kept as lone surrogates (MuJoCo keeps raw bytes): they are
name characters, never whitespace or digits.
"""

from __future__ import annotations

import bisect
import re

from mjx_lite.mjcf.spec import MJCFError

MAX_DEPTH = 500  # TinyXML2's element nesting limit

_WS = " \t\n\v\f\r"
_NAME = re.compile(r"[A-Za-z_:\u0080-\U0010ffff][A-Za-z0-9_:.\-\u0080-\U0010ffff]*")
_WS_RUN = re.compile(r"[ \t\n\v\f\r]*")
_ATTR = re.compile(r"([A-Za-z_:\u0080-\U0010ffff][A-Za-z0-9_:.\-\u0080-\U0010ffff]*)[ \t\n\v\f\r]*=[ \t\n\v\f\r]*"
                   r"(\"[^\"]*\"|'[^']*')")
_ENTITIES = (("quot", '"'), ("amp", "&"), ("apos", "'"), ("lt", "<"), ("gt", ">"))


class Node:
    """One XML element: tag, attributes in document order, child elements, source line; `has_content` is True
    when the element had any child node at all (element, text, comment, ...)."""

    __slots__ = ("tag", "attrib", "children", "line", "has_content")

    def __init__(self, tag: str, attrib: dict[str, str], line: int):
        self.tag, self.attrib, self.line = tag, attrib, line
        self.children: list[Node] = []
        self.has_content = False


def decode(data: bytes | str) -> str:
    """The document as text: UTF-8 (undecodable bytes kept as lone surrogates), cut at the first NUL."""
    text = data if isinstance(data, str) else data.decode("utf-8", "surrogateescape")
    nul = text.find("\0")
    return text if nul < 0 else text[:nul]


class _Reader:
    def __init__(self, text: str, file: str):
        self.s = text
        self.file = file
        self._nl = [m.start() for m in re.finditer("\n", text)]

    def line(self, pos: int) -> int:
        return bisect.bisect_left(self._nl, pos) + 1

    def fail(self, msg: str, pos: int):
        raise MJCFError(f"malformed XML: {msg}", self.file, self.line(pos))

    def skip_ws(self, p: int) -> int:
        return _WS_RUN.match(self.s, p).end()

    # ---------------------------------------------------------------------------------------------------------
    def document(self) -> Node:
        s = self.s
        p = self.skip_ws(0)
        if s.startswith("\ufeff", p):
            p += 1
        if p >= len(s):
            raise MJCFError("malformed XML: empty document", self.file, 1)
        root: Node | None = None
        only_decls = True
        while True:
            node, p, kind, _ = self.node(p, depth=0)
            if kind is None:
                break
            if kind == "decl":
                if not only_decls:
                    self.fail("a <?...?> declaration is only allowed at the start of the document", node)
                continue
            only_decls = False
            if kind == "close":  # a stray closing tag at the top level ends the document (TinyXML2)
                break
            if kind == "element" and root is None:
                root = node
        if root is None:
            raise MJCFError("malformed XML: no root element", self.file, 1)
        return root

    def node(self, p: int, depth: int):
        """Parse the node at p. Returns (payload, new position, kind, end tag): kind None at the end of the input;
        payload: the Node for 'element', the closing tag's name for 'close', the start position otherwise."""
        s = self.s
        start = p
        p = self.skip_ws(p)
        if p >= len(s):
            return None, p, None, None
        if s.startswith("<?", p):
            end = s.find("?>", p + 2)
            if end < 0:
                self.fail("unterminated <?...?> declaration", p)
            return p, end + 2, "decl", None
        if s.startswith("<!--", p):
            end = s.find("-->", p + 4)
            if end < 0:
                self.fail("unterminated comment", p)
            return p, end + 3, "other", None
        if s.startswith("<![CDATA[", p):
            end = s.find("]]>", p + 9)
            if end < 0:
                self.fail("unterminated CDATA section", p)
            return p, end + 3, "other", None
        if s.startswith("<!", p):
            end = s.find(">", p + 2)
            if end < 0:
                self.fail("unterminated <!...> node", p)
            return p, end + 1, "other", None
        if s.startswith("<", p):
            return self.element(p, depth)
        end = s.find("<", start)
        if end < 0:
            self.fail("text is not followed by an element", p)
        return start, end, "other", None

    def element(self, lt: int, depth: int):
        s = self.s
        p = self.skip_ws(lt + 1)
        closing = p < len(s) and s[p] == "/"
        if closing:
            p += 1
        m = _NAME.match(s, p)
        if m is None:
            self.fail("invalid element name", lt)
        tag = m.group()
        node = Node(tag, {}, self.line(lt))
        p = m.end()
        # attributes
        while True:
            p = self.skip_ws(p)
            if p >= len(s):
                self.fail(f"unterminated tag <{tag}>", lt)
            c = s[p]
            m = _ATTR.match(s, p)  # the common case in one step: name = "value" (checked in detail below if not)
            if m is not None:
                name = m.group(1)
                if name in node.attrib:
                    self.fail(f"attribute '{name}' of <{tag}> is repeated or unterminated", p)
                node.attrib[name] = _attribute_value(m.group(2)[1:-1])
                p = m.end()
                continue
            m = _NAME.match(s, p)
            if m is not None:
                name = m.group()
                q = self.skip_ws(m.end())
                if q >= len(s) or s[q] != "=":
                    self.fail(f"attribute '{name}' of <{tag}> has no value", p)
                q = self.skip_ws(q + 1)
                if q >= len(s) or s[q] not in "\"'":
                    self.fail(f"attribute '{name}' of <{tag}>: the value must be quoted", p)
                end = s.find(s[q], q + 1)
                if end < 0 or name in node.attrib:
                    self.fail(f"attribute '{name}' of <{tag}> is repeated or unterminated", p)
                node.attrib[name] = _attribute_value(s[q + 1 : end])
                p = end + 1
            elif c == ">":
                p += 1
                break
            elif s.startswith("/>", p):
                return (node, p + 2, "element", None) if not closing else (tag, p + 2, "element_closed_close", None)
            else:
                self.fail(f"unexpected character {c!r} in tag <{tag}>", p)
        if closing:
            return tag, p, "close", None
        if p >= len(s):
            self.fail(f"element <{tag}> is not closed", lt)
        if depth + 1 >= MAX_DEPTH:
            self.fail(f"elements nested deeper than {MAX_DEPTH}", lt)
        # children, up to the matching closing tag
        while True:
            child, p, kind, _ = self.node(p, depth + 1)
            if kind is None:
                self.fail(f"element <{tag}> is not closed", lt)
            if kind == "decl":
                self.fail("a <?...?> declaration is only allowed at the start of the document", child)
            if kind == "close":
                if child != tag:
                    self.fail(f"closing tag </{child}> does not match <{tag}>", lt)
                return node, p, "element", None
            node.has_content = True
            if kind == "element":
                node.children.append(child)
            elif kind == "element_closed_close":  # </name/>: TinyXML2 keeps it as an empty element
                node.children.append(Node(child, {}, self.line(p)))


def _attribute_value(raw: str) -> str:
    """TinyXML2's attribute value: line ends normalised, the five entities and character references replaced,
    any other '&' kept (as TinyXML2 does: it writes nothing, so the character already in its buffer at the output
    position stays); a NUL produced by a reference ends the value."""
    if "&" not in raw and "\r" not in raw:
        return raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\r":
            out.append("\n")
            i += 2 if raw.startswith("\n", i + 1) else 1
        elif c == "\n":
            out.append("\n")
            i += 2 if raw.startswith("\r", i + 1) else 1
        elif c == "&":
            if i + 1 < n and raw[i + 1] == "#":
                ref = _char_ref(raw, i)
                if ref is None:
                    out.append("&")
                    i += 1
                else:
                    text, i = ref
                    out.append(text)
            else:
                for name, value in _ENTITIES:
                    if raw.startswith(name + ";", i + 1):
                        out.append(value)
                        i += len(name) + 2
                        break
                else:
                    out.append(raw[len(out)] if len(out) < n else "&")
                    i += 1
        else:
            out.append(c)
            i += 1
    value = "".join(out)
    nul = value.find("\0")
    return value if nul < 0 else value[:nul]


def _char_ref(raw: str, i: int) -> tuple[str, int] | None:
    """`&#...;` at raw[i]: (replacement, next index), or None when TinyXML2 keeps the '&' as written."""
    if i + 2 >= len(raw):
        return "", i + 1  # '&#' at the very end: TinyXML2 drops the '&'
    hexa = raw[i + 2] == "x"
    start = i + 3 if hexa else i + 2
    if start >= len(raw):
        return None
    semi = raw.find(";", start)
    if semi < 0:
        return None
    digits = raw[start:semi]
    if digits and not all(c in ("0123456789abcdefABCDEF" if hexa else "0123456789") for c in digits):
        return None
    code = int(digits, 16 if hexa else 10) if digits else 0
    if code > 0x10FFFF:
        return None
    return chr(code), semi + 1


def parse(data: bytes | str, file: str) -> Node:
    """The root element of an XML document read with MuJoCo's (TinyXML2's) rules; MJCFError with file and line
    for malformed input."""
    return _Reader(decode(data), file).document()
