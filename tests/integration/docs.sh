#!/usr/bin/env bash
# The docs hold together: (a) no dead relative link or image in README.md, CONTRIBUTING.md and
# docs/**/*.md; (b) every docs page is reachable from README.md; (c) every `psbed ...` command
# line in a fenced code block names a subcommand that exists and only flags its --help lists;
# (d) docs/cli-reference.md is what docs/gen-cli-reference.sh writes from this binary.
source "$(dirname "$0")/lib.sh"
cd "$SRC"

# (d) first: the generator walks every subcommand, so a binary that cannot print its help fails
# here with the generator's message.
timeout 120 bash docs/gen-cli-reference.sh "$PSBED" >"$WORK/cli-reference.md" \
  || fail "docs/gen-cli-reference.sh failed on $PSBED"
if ! diff -u docs/cli-reference.md "$WORK/cli-reference.md" >"$WORK/cli.diff"; then
  head -40 "$WORK/cli.diff" >&2
  fail "docs/cli-reference.md differs from the binary's --help: regenerate it with" \
    "'docs/gen-cli-reference.sh build/release/cluster/psbed > docs/cli-reference.md'"
fi

timeout 120 python3 - "$PSBED" "$SRC" <<'PY'
import os, re, shlex, subprocess, sys
from collections import deque

psbed, src = sys.argv[1], sys.argv[2]
failed = []

# ---- the pages ----
pages = ["README.md", "CONTRIBUTING.md"]
for root, dirs, files in os.walk("docs"):
    dirs.sort()
    pages += sorted(os.path.join(root, f) for f in files if f.endswith(".md"))
pages = [p for p in pages if os.path.isfile(p)]
if "README.md" not in pages or not any(p.startswith("docs/") for p in pages):
    sys.exit("FAIL: no README.md or no docs/*.md pages in " + src)

FENCE = re.compile(r"^\s*(```|~~~)")

def prose(text):
    """The page without fenced blocks and inline code (a `[policy]` there is no link)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        out.append("" if fenced else re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMG_TAG = re.compile(r"<img\s[^>]*src=\"([^\"]+)\"")

def targets(page):
    """Relative link targets of a page, as paths from the checkout's root (anchors dropped)."""
    text = prose(open(page, encoding="utf-8").read())
    for m in list(LINK.finditer(text)) + list(IMG_TAG.finditer(text)):
        t = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", t) or t.startswith("#"):
            continue  # http:, mailto:, an anchor in the page itself
        path = t.split("#", 1)[0].split("?", 1)[0]
        yield t, os.path.normpath(os.path.join(os.path.dirname(page), path))

# ---- (a) dead links ----
links = {}
for page in pages:
    links[page] = []
    for t, path in targets(page):
        if not os.path.exists(path):
            failed.append(f"{page}: dead link '{t}' ({path} does not exist)")
        else:
            links[page].append(path)

# ---- (b) every docs page reachable from README.md ----
seen, todo = {"README.md"}, deque(["README.md"])
while todo:
    page = todo.popleft()
    for path in links.get(page, []):
        if os.path.isdir(path) and os.path.isfile(os.path.join(path, "README.md")):
            path = os.path.join(path, "README.md")
        if path.endswith(".md") and path in links and path not in seen:
            seen.add(path)
            todo.append(path)
for page in pages:
    if page.startswith("docs/") and page not in seen:
        failed.append(f"{page}: not reachable from README.md (link it from README or a page "
                      "README leads to)")

# ---- (c) psbed command lines in fenced blocks against the CLI ----
help_cache = {}
def cli(path):
    """(flags, value-taking flags, subcommands) from `psbed PATH... --help`."""
    key = tuple(path)
    if key not in help_cache:
        r = subprocess.run([psbed, *path, "--help"], capture_output=True, text=True, timeout=30)
        text = r.stdout + r.stderr
        flags, takes, subs, section = set(), set(), set(), None
        for line in text.splitlines():
            if re.match(r"^[A-Z][A-Za-z ]*:\s*$", line):
                section = line.strip().rstrip(":")
                continue
            if section == "Options":
                m = re.match(r"^\s{2}(-[^\s]+)(?:\s+([A-Z][A-Z:]*))?", line)
                if m:
                    # CLI11 shows a flag's default after it: "--no-trace{false}".
                    names = [re.sub(r"\{[^}]*\}$", "", x) for x in m.group(1).split(",")]
                    flags.update(names)
                    if m.group(2):
                        takes.update(names)
            elif section == "Subcommands":
                m = re.match(r"^\s{2}([a-z][a-z0-9-]*)\s", line + " ")
                if m:
                    subs.add(m.group(1))
        if r.returncode != 0 or not flags:
            sys.exit(f"FAIL: `psbed {' '.join(path)} --help` printed no options (status {r.returncode})")
        help_cache[key] = (flags, takes, subs)
    return help_cache[key]

PSBED_WORD = re.compile(r"^(psbed|\$\{?PSBED\}?|\$\(PSBED\)|(\S*/)?cluster/psbed)$")
WRAPPERS = {"sudo", "time", "nice", "exec", "env", "nohup", "command"}
def placeholder(word):
    return word in ("...", "…") or word.startswith("<") or re.fullmatch(r"[A-Z][A-Z0-9_]*", word)

SHELL_LANGS = {"", "sh", "bash", "shell", "console"}
def commands(page):
    """(line number, words) of each psbed command line in the page's fenced blocks."""
    fenced, shell, buf, start = False, False, "", 0
    for n, line in enumerate(open(page, encoding="utf-8").read().splitlines(), 1):
        if FENCE.match(line):
            fenced, buf = not fenced, ""
            # Shell blocks only: ```text (help output, logs), ```toml or ```json hold no commands.
            shell = fenced and line.strip().strip("`~").strip() in SHELL_LANGS
            continue
        if not shell:
            continue
        if not buf:
            start = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        full, buf = buf + line, ""
        full = re.sub(r"(^|\s)#.*$", "", full)  # a comment (a `#` inside a word is kept)
        full = re.sub(r"^\s*\$\s+", "", full)   # a prompt
        try:
            words = shlex.split(full, posix=True)
        except ValueError:
            words = full.split()
        segment = []
        for w in words + [";"]:
            if w in ("|", "||", "&&", ";", "&") or w.startswith(">") or w.startswith("2>"):
                if segment:
                    yield start, segment
                segment = [] if not (w.startswith(">") or w.startswith("2>")) else None
                continue
            if segment is not None:
                segment.append(w)

def check(page, n, words):
    i = 0
    while i < len(words) and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]) or words[i] in WRAPPERS):
        i += 1
    if i < len(words) and words[i] == "timeout":
        i += 2
    if i >= len(words) or not PSBED_WORD.match(words[i]):
        return
    where = f"{page}:{n}: `{' '.join(words[i:])}`"
    rest = words[i + 1:]
    path, j = [], 0
    flags, takes, subs = cli(path)
    allowed, value_taking = set(flags), set(takes)
    while j < len(rest):
        w = rest[j]
        if w.startswith("-"):
            name = w.split("=", 1)[0]
            if name not in allowed:
                failed.append(f"{where}: unknown flag {name} for 'psbed {' '.join(path)}' "
                              "(see its --help)")
            elif name in value_taking and "=" not in w:
                j += 1
            j += 1
            continue
        if subs:  # a positional where subcommands are expected: the next subcommand
            if placeholder(w):
                j += 1
                continue
            if w not in subs:
                failed.append(f"{where}: 'psbed {' '.join(path + [w])}' is no subcommand "
                              f"(there are: {', '.join(sorted(subs))})")
                return
            path.append(w)
            flags, takes, subs = cli(path)
            allowed |= flags  # a parent's flags may come before its subcommand (ctl --run X policy)
            value_taking |= takes
        j += 1
    return True

checked = 0
for page in pages:
    for n, words in commands(page):
        if check(page, n, words):
            checked += 1
if checked < 10:
    failed.append(f"only {checked} psbed command lines found in fenced blocks: the parser is broken")

if failed:
    print("\n".join("FAIL: " + f for f in failed), file=sys.stderr)
    sys.exit(1)
print(f"{len(pages)} pages, {sum(len(v) for v in links.values())} relative links, "
      f"{len(seen)} pages reachable, {checked} psbed command lines checked")
PY
echo "PASS: links, reachability, command lines and docs/cli-reference.md agree with $PSBED"
