#!/usr/bin/env python3
"""Writes heapsnap's manual pages from the program's own --help (run by the meson build).

  man_page.py --heapsnap build/analyzer/heapsnap --outdir DIR --version 0.1.0 COMMAND...

heapsnap.1 holds everything: the overview, global options, one section per command (its options
and examples), exit status and environment. heapsnap-COMMAND.1 is one command's page. The text is
CLI11's help, so the manual cannot drift from `--help`; the layout rules below are the few that
CLI11's format (and the footers in analyzer/cli/*.cc) follow:

  - description lines, then "Usage: ...", then groups ("Positionals:", "Options:",
    "Subcommands:") of "  NAME   description" items whose description starts at column 30
    (on the next line when NAME is longer), then the footer;
  - in a footer, a short line ending in ":" heads what follows ("Examples:", "Exit status:");
    "Example: CMD" is an example on one line; indented lines under an "Example" heading are
    commands, other indented "TERM  text" lines are a list (deeper-indented lines continue an item),
    anything else is running text.

The COMMAND arguments are the pages meson expects (it must name its outputs before the build);
a command missing from that list, or listed but gone, stops the build with the fix to make.
"""
import argparse
import os
import re
import subprocess
import sys

COLUMN = 30  # CLI11's default column width for option names
GROUPS = ("Positionals", "Options", "Subcommands")


def run_help(exe, args):
    env = dict(os.environ, NO_COLOR="1")
    p = subprocess.run([exe] + args + ["--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    if p.returncode != 0:
        sys.exit("man_page.py: %s %s --help exited %d: %s" % (exe, " ".join(args), p.returncode, p.stderr.decode()))
    return p.stdout.decode()


def parse_help(text):
    """{description: [lines], usage: str, groups: {name: [(name, desc)]}, footer: [lines]}"""
    lines = text.rstrip("\n").split("\n")
    u = next((i for i, l in enumerate(lines) if l.startswith("Usage:")), None)
    if u is None:
        sys.exit("man_page.py: no 'Usage:' line in the help text:\n" + text)
    out = {"description": lines[:u], "usage": lines[u][len("Usage:"):].strip(), "groups": {}, "footer": []}
    i = u + 1
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.endswith(":") and line[:-1] in GROUPS:
            items = []
            i += 1
            while i < len(lines) and lines[i].startswith("  "):
                l = lines[i]
                if l.startswith(" " * COLUMN):  # continuation of the previous description
                    name, desc = items[-1]
                    items[-1] = (name, (desc + "\n" if desc else "") + l[COLUMN:])
                elif len(l) > COLUMN and l[COLUMN - 1] == " " and (
                        l[COLUMN - 2] == " " or not (i + 1 < len(lines) and lines[i + 1].startswith(" " * COLUMN))):
                    # Padded to the column, description on the same line. (A name of COLUMN
                    # characters or more, such as "--stack-depth INT:INT in [1 - 256]", may have
                    # a space there by chance: its description is on the next line.)
                    items.append((l[:COLUMN].strip(), l[COLUMN:]))
                else:
                    items.append((l.strip(), ""))
                i += 1
            out["groups"][line[:-1]] = items
            continue
        out["footer"] = lines[i:]
        break
    return out


# --- troff -------------------------------------------------------------------------------------

def esc(text):
    """Plain text as troff: backslashes, hyphens (so options copy and search as typed), non-ASCII."""
    s = text.replace("\\", "\\e").replace("-", "\\-")
    s = "".join(c if ord(c) < 128 else "\\[u%04X]" % ord(c) for c in s)
    return s


def line(text):
    """A text line that cannot be taken for a request."""
    s = esc(text)
    return "\\&" + s if s[:1] in (".", "'") else s


def option_tag(name, positional):
    """'-n,--limit UINT' -> bold names, italic value; 'file TEXT REQUIRED' -> italic name."""
    names, _, rest = name.partition(" ")
    if positional:
        tag = "\\fI%s\\fR" % esc(names)
    else:
        tag = ", ".join("\\fB%s\\fR" % esc(n) for n in names.split(","))
    if rest:
        tag += " \\fI%s\\fR" % esc(rest)
    return tag


def items(pairs, positional=False):
    out = []
    for name, desc in pairs:
        out.append(".TP")
        out.append(option_tag(name, positional))
        for d in desc.split("\n"):
            out.append(line(d))
    return out


def is_heading(l):
    return l.endswith(":") and not l.startswith(" ") and len(l) < 30 and l.count(":") == 1


def footer_blocks(lines):
    """[(heading or None, [troff lines])]: running text, lists and examples under their headings."""
    blocks = []
    heading, body, kind = None, [], None

    def close():
        nonlocal kind
        if kind == "verbatim":
            body.extend([".fi", ".RE"])
        kind = None

    def start(new):
        nonlocal kind
        if kind == new:
            return
        close()
        if new in ("verbatim", "text") and body:
            body.append(".PP")
        if new == "verbatim":
            body.extend([".RS 4", ".nf"])
        kind = new

    def flush(new_heading):
        nonlocal heading, body
        close()
        if heading or body:
            blocks.append((heading, body))
        heading, body = new_heading, []

    for l in lines:
        in_examples = (heading or "").startswith("Example")
        if not l.strip():
            close()
        elif is_heading(l):
            flush(l[:-1])
        elif l.startswith("Example: "):
            flush("Example")
            start("verbatim")
            body.append(line(l[len("Example: "):]))
        elif kind == "list" and l.startswith("    "):  # a list item's description goes on
            body.append(line(l.strip()))
        elif l.startswith("  "):
            parts = re.split(r"\s{2,}", l.strip())
            if len(parts) == 2 and not in_examples:
                start("list")
                body.extend([".TP", "\\fB%s\\fR" % esc(parts[0]), line(parts[1])])
            else:
                start("verbatim")
                body.append(line(l.strip()))
        else:
            if in_examples and body:  # text after the examples is not one of them
                flush(None)
            start("text")
            body.append(line(l))
    flush(None)
    return blocks


def usage_line(usage):
    """'heapsnap top-allocators [OPTIONS] file' -> bold program and command, italic arguments."""
    words = usage.split()
    n = 2 if len(words) > 1 and words[1][:1].isalpha() and words[1] not in ("SUBCOMMAND",) else 1
    return " ".join(["\\fB%s\\fR" % esc(w) for w in words[:n]] + ["\\fI%s\\fR" % esc(w) for w in words[n:]])


def header(title, version):
    return ['.\\" Generated by analyzer/cli/man_page.py from `heapsnap --help`: edit the help, not this file.',
            '.TH %s 1 "" "heapsnap %s" "User Commands"' % (esc(title.upper()), esc(version)),
            # Commands, options and file names read badly hyphenated or stretched: no
            # hyphenation, ragged right.
            ".nh", ".ad l"]


def description_of(help_):
    text = " ".join(l.strip() for l in help_["description"] if l.strip())
    return text


def command_section(cmd, help_):
    """The part of heapsnap.1 about one command."""
    out = [".SS %s" % esc(cmd), usage_line(help_["usage"]), ".PP", line(description_of(help_))]
    out += items(help_["groups"].get("Positionals", []), positional=True)
    # -h and --color are said once for all commands (OPTIONS); each command's own page lists them.
    out += items([o for o in help_["groups"].get("Options", []) if not o[0].startswith(("-h,", "--color "))])
    for heading, body in footer_blocks(help_["footer"]):
        out.append(".PP")
        if heading:
            out.append("\\fI%s:\\fR" % esc(heading))
        out += body
    return out


def command_page(cmd, help_, main_sections, version):
    out = header("heapsnap-" + cmd, version)
    desc = description_of(help_)
    out += [".SH NAME", "heapsnap\\-%s \\- %s" % (esc(cmd), esc(desc.rstrip("."))),
            ".SH SYNOPSIS", usage_line(help_["usage"]), ".SH DESCRIPTION", line(desc)]
    blocks = footer_blocks(help_["footer"])
    for heading, body in blocks:
        if heading is None:
            out += [".PP"] + body
    if help_["groups"].get("Positionals"):
        out += [".SH ARGUMENTS"] + items(help_["groups"]["Positionals"], positional=True)
    out += [".SH OPTIONS"] + items(help_["groups"].get("Options", []))
    for heading, body in blocks:
        if heading is not None:
            title = "EXAMPLES" if heading.startswith("Example") else heading.upper()
            out += [".SH %s" % esc(title)] + body
    for title in ("EXIT STATUS", "ENVIRONMENT"):
        if title in main_sections:
            out += [".SH %s" % title] + main_sections[title]
    out += [".SH SEE ALSO", "\\fBheapsnap\\fR(1)"]
    return out


def main_page(main, commands, helps, main_sections, intro, version):
    out = header("heapsnap", version)
    first, rest = main["description"][0], main["description"][1:]
    name, _, what = first.partition(" - ")
    out += [".SH NAME", "%s \\- %s" % (esc(name), esc(what.rstrip(".")))]
    out += [".SH SYNOPSIS", usage_line(main["usage"].replace("SUBCOMMAND", "COMMAND [ARGS]"))]
    for c in commands:
        out += [".br", usage_line(helps[c]["usage"])]
    out += [".SH DESCRIPTION"]
    for heading, body in footer_blocks(rest):
        out += body
    for body in intro:
        out += [".PP"] + body
    out += [".SH OPTIONS"] + items(main["groups"].get("Options", []))
    out += [".PP", line("Every command also takes -h, --help and --color.")]
    out += [".SH COMMANDS"]
    for c in commands:
        out += command_section(c, helps[c])
    for title, body in main_sections.items():
        out += [".SH %s" % esc(title)] + body
    out += [".SH SEE ALSO", ", ".join("\\fBheapsnap\\-%s\\fR(1)" % esc(c) for c in commands)]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--heapsnap", required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("commands", nargs="+")
    a = ap.parse_args()
    main_help = parse_help(run_help(a.heapsnap, []))
    listed = [n for n, _ in main_help["groups"].get("Subcommands", [])]
    missing, gone = set(listed) - set(a.commands), set(a.commands) - set(listed)
    if missing or gone:
        sys.exit("man_page.py: the manual pages named in analyzer/meson.build (heapsnap_commands) differ from "
                 "`heapsnap --help`: add %s, remove %s" % (sorted(missing) or "nothing", sorted(gone) or "nothing"))
    helps = {c: parse_help(run_help(a.heapsnap, [c])) for c in listed}
    # The main footer's headed blocks ("Exit status:", "Environment:") are sections of their own;
    # its running text joins the description.
    main_sections, intro = {}, []
    for heading, body in footer_blocks(main_help["footer"]):
        if heading:
            main_sections[heading.upper()] = body
        else:
            intro.append(body)
    pages = {"heapsnap.1": main_page(main_help, listed, helps, main_sections, intro, a.version)}
    for c in listed:
        pages["heapsnap-%s.1" % c] = command_page(c, helps[c], main_sections, a.version)
    for name, lines in pages.items():
        with open(os.path.join(a.outdir, name), "w", encoding="ascii") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
