"""Readable text from an HTML page: title, and body text with block structure kept as lines.

White space inside a block collapses to one space (also inside <pre>); every block element
(paragraph, heading, list item, table cell, <br>) starts a new line.

`python3 html2text.py PAGE MAX_CHARS URL` prints the output document of http-fetch/fetch;
scripts/extract.py imports `extract`. Standard library only.
"""

import json
import re
import sys
from html.parser import HTMLParser

SKIP = {"script", "style", "noscript", "template", "svg", "head", "iframe", "object", "canvas"}
BLOCK = {
    "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr",
    "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "td", "th", "tr", "ul",
}
VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.title, self.skip, self.in_title = [], [], 0, False

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self.in_title = True
        elif tag in SKIP and tag not in VOID:
            self.skip += 1
        if tag in BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        elif tag in SKIP and self.skip:
            self.skip -= 1
        if tag in BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.in_title:
            self.title.append(data)
        elif not self.skip:
            self.parts.append(re.sub(r"\s+", " ", data))


def extract(html, max_chars):
    """{"title", "text", "chars", "truncated"} for `html`; text cut at `max_chars` characters."""
    p = _Text()
    p.feed(html)
    p.close()
    lines = (re.sub(r"\s+", " ", line).strip() for line in "".join(p.parts).split("\n"))
    text = "\n".join(line for line in lines if line)
    title = re.sub(r"\s+", " ", "".join(p.title)).strip()
    return {
        "title": title,
        "text": text[:max_chars],
        "chars": len(text),
        "truncated": len(text) > max_chars,
    }


def decode(data):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


if __name__ == "__main__":
    page, max_chars, url = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(page, "rb") as f:
        doc = extract(decode(f.read()), max_chars)
    doc["url"] = url
    json.dump(doc, sys.stdout)
