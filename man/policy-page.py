#!/usr/bin/env python3
"""Writes tierd-policy(5) from README.md's "## Policy" section, so the page
and the README cannot drift: make check compares man/tierd-policy.5 with
what this prints. Usage: man/policy-page.py README.md VERSION >man/tierd-policy.5"""
import re
import sys

DATE = "2026-12-05"


def inline(text):
    """Markdown inline (`code`, **bold**, links) to roff, escaped."""
    text = text.replace("\\", "\\e")
    out = []
    for i, part in enumerate(re.split(r"(`[^`]*`)", text)):
        if i % 2:
            out.append("\\fB" + part[1:-1].replace("-", "\\-") + "\\fR")
        else:
            part = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", part)
            part = re.sub(r"\[([^]]+)\]\([^)]+\)", r"\1", part)
            out.append(part)
    return "".join(out)


def paragraph(lines):
    text = inline(" ".join(l.strip() for l in lines))
    # A line that starts with . or ' would be a request.
    return re.sub(r"(^|\n)([.'])", r"\1\\&\2", text)


def main(readme, version):
    with open(readme) as f:
        text = f.read()
    section = text.split("\n## Policy\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.split(r"\n\s*\n", section.strip("\n"))
    intro, example, rows, after = [], None, [], []
    for b in blocks:
        if b.startswith("```"):
            example = b.split("\n")[1:-1]
        elif b.startswith("| key |"):
            rows = [l for l in b.split("\n")[2:] if l.startswith("|")]
        elif not rows:
            intro.append(b)
        elif b.startswith("Sizes are"):
            after.append(b)
            break
    out = ['.TH TIERD\\-POLICY 5 "%s" "tierd %s" "File Formats"' % (DATE, version),
           ".SH NAME", "tierd-policy \\- the policy file of tierd",
           ".SH DESCRIPTION"]
    for i, b in enumerate(intro):
        out += ([".PP"] if i else []) + [paragraph(b.split("\n"))]
    if example:
        out += [".SH EXAMPLE", ".EX"] + [l.replace("\\", "\\e") for l in example] + [".EE"]
    out += [".SH KEYS",
            "Where a key goes: \\fBtop\\fR (the policy's object), \\fBtenant\\fR (one of "
            "\\fBtenants\\fR) or \\fBtenant/defaults\\fR (a tenant, or \\fBdefaults\\fR for every tenant)."]
    for row in rows:
        key, where, meaning, default = [c.strip() for c in row.strip().strip("|").split(" | ")]
        meaning = paragraph([meaning])
        out += [".TP", inline(key), "(%s) %s%s" % (where, meaning, "" if meaning.endswith(".") else ".")]
        if default.startswith("required"):
            out.append("R" + paragraph([default])[1:] + ".")
        elif default:
            out.append("Default: %s." % paragraph([default]).rstrip("."))
    out += [".SH VALUES"]
    for i, b in enumerate(after):
        out += ([".PP"] if i else []) + [paragraph(b.split("\n"))]
    out += [".SH SEE ALSO", "\\fBtierd\\fR(8), \\fBtierctl\\fR(1)"]
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
