#!/usr/bin/env python3
"""Checks that metric names agree between the code, alerts, dashboards and docs/metrics.md.

Fails (exit 1, one line per problem naming the metric, where it is used and why) when
  (a) a pglock_* name used by an alert rule expression, a promtool test (input series and
      promql_expr_test expressions) or a dashboard query is not emitted by the code, or a pglock:*
      name used there is not recorded by any rule;
  (b) a family emitted by the code has no row in a docs/metrics.md metric table;
  (c) a docs/metrics.md metric table row names a pglock_* family the code does not emit.
Otherwise prints one summary line and exits 0.

Emitted by the code (exporter/**/*.h, exporter/**/*.cc):
  - C++ is tokenised, not grepped: // and /* */ comments are skipped, so a name that is only
    mentioned in a comment does not count. String literals (with escapes), raw strings R"x(...)x"
    and char literals are recognised; adjacent literals ("pglock_" "up") are joined the way the
    compiler joins them. A ' after a number is a digit separator (1'000), not a char literal.
  - A literal is a metric family when its WHOLE text matches pglock_[a-z0-9_]+, so help texts
    ("pglock_exporter build (value 1).") and paths ("/tmp/pglock_exporter_tls_XXXXXX") do not
    count. Any such literal counts, wherever it is: the check cannot tell a descriptor from a label
    value that names a metric (the `metric` label of pglock_series_dropped_total); both name
    emitted families today.
  - A literal ending in "_" (or exactly "pglock_") is a name prefix, not a family. Names built
    from a prefix at run time are invisible to this check, so each prefix is listed as a note:
    write full names as literals.
  - NOT_METRICS below lists whole-name literals that are not metrics (the program's own name).
  - Histograms and summaries: a family whose C++ statement (the code between the nearest ; { or }
    on each side of the literal, without comments or string contents) mentions Histogram or
    Summary also accepts references to its series NAME_sum and NAME_count, and, for a histogram,
    NAME_bucket. Every other reference must match an emitted name exactly (counters are emitted
    with their _total, so pglock_x_total is compared as is).

Used by alerts and dashboards:
  - alerts/*.yml: the `expr:` of every rule. A rule's `record:` name is defined by the rules
    themselves, so an expression may use it; a pglock:* name no rule records is a problem.
  - alerts/tests/*.yml: the `series:` of input_series and the `expr:` of promql_expr_test.
    Annotations, exp_alerts and exp_samples are not read (they are text and expected outputs).
  - dashboards/*.json: every string under a key "expr", "query" or "definition" (panel targets,
    annotations, template variables), anywhere in the document.
  - Names are found in PromQL after removing string literals, # comments, label matchers inside
    {...} and the label lists of by/without/on/ignoring/group_left/group_right, so label values
    (metric="pglock_x") and label names are not mistaken for metrics. An exact
    {__name__="pglock_x"} matcher does count as a use of pglock_x.
  - YAML is read without PyYAML (standard library only): block-style `key: value` lines with plain,
    'single'- or "double"-quoted values and | or > block scalars. A flow-style mapping
    ({expr: ...}) holding one of the keys above is reported as a problem rather than skipped.

docs/metrics.md is the one place where metrics are documented: every Markdown table of it whose
header's first cell is "metric" (code fences skipped). A family is documented when it is the first
cell of a row, backticks stripped. A first cell that is not a metric name is reported. Tables in
README.md and the other docs pages are not read: a family that only they list fails (b), so that
the reference has every family and no second list has to be kept in step with it.

Usage: scripts/check_metric_names.py [--root DIR]   (default: the repository holding this script)
Standard library only (Debian python3). Self-test: scripts/check_metric_names_test.py.
"""

import argparse
import glob
import json
import os
import re
import sys

FAMILY = re.compile(r"pglock_[a-z0-9_]+")
NOT_METRICS = {
    "pglock_exporter": "the program's name (application_name, log records, page titles)",
}
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
PROMQL_NAME = re.compile(r"(?<![A-Za-z0-9_:])pglock[_:][A-Za-z0-9_:]*")
NAME_MATCHER = re.compile(r"""__name__\s*=\s*(["'`])(pglock[_:][A-Za-z0-9_:]*)\1""")
LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
TYPE_WORD = re.compile(r"\b(?:Build|k)?(Histogram|Summary)\b")
RAW_DELIMITER = re.compile(r'"([^()\\\s]{0,16})\(')
SUFFIXES = {"_bucket": ("Histogram",), "_sum": ("Histogram", "Summary"),
            "_count": ("Histogram", "Summary")}
YAML_KEY = re.compile(r"^(\s*)(-\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*:(?:\s+|$)(.*)$")
FLOW_KEY = re.compile(r"[{,]\s*(expr|series|record)\s*:")
DASHBOARD_KEYS = ("expr", "query", "definition")


def rel(root, path):
    return os.path.relpath(path, root)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


# ---- C++ ---------------------------------------------------------------------------------------

def cpp_literals(text):
    """Returns (code, literals). code is text with comments and literal contents replaced by
    spaces (same length, newlines kept); literals lists (start, end, value) with adjacent literals
    joined."""
    code = list(text)
    literals = []
    i, n = 0, len(text)

    def blank(a, b):
        for k in range(a, b):
            if code[k] != "\n":
                code[k] = " "

    def add(start, end, value):
        if literals:
            p_start, p_end, p_value = literals[-1]
            if re.fullmatch(r"\s*(?:u8|u|U|L)?", "".join(code[p_end:start])):
                literals[-1] = (p_start, end, p_value + value)
                return
        literals.append((start, end, value))

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == "R" and (m := RAW_DELIMITER.match(text, i + 1)) and re.search(
                r"(?<![A-Za-z0-9_])(?:u8|u|U|L)?$", text[max(0, i - 3):i]):
            close = ")" + m.group(1) + '"'
            j = text.find(close, m.end())
            j = n if j < 0 else j
            blank(m.end(), j)
            add(i, j + len(close), text[m.end():j])
            i = j + len(close)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n))
            add(i, j + 1, text[i + 1:j])
            i = j + 1
        elif c == "'":
            before = re.search(r"[A-Za-z0-9_.']+$", text[max(0, i - 64):i])
            if before and before.group()[0].isdigit():
                i += 1  # digit separator
                continue
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(code), literals


def statement_around(code, start, end):
    """The code between the nearest ; { or } before start and after end."""
    a = max(code.rfind(ch, 0, start) for ch in ";{}") + 1
    ends = [k for k in (code.find(ch, end) for ch in ";{}") if k >= 0]
    return code[a:min(ends) if ends else len(code)]


def emitted_families(root):
    """Returns (families, types, prefixes): families maps name -> first "file:line"; types maps
    name -> {"Histogram", "Summary"} when its statement says so; prefixes lists (where, literal)."""
    families, types, prefixes = {}, {}, []
    paths = sorted(glob.glob(os.path.join(root, "exporter", "**", "*.h"), recursive=True)
                   + glob.glob(os.path.join(root, "exporter", "**", "*.cc"), recursive=True))
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        code, literals = cpp_literals(text)
        for start, end, value in literals:
            where = f"{rel(root, path)}:{line_of(text, start)}"
            if value == "pglock_" or (value.endswith("_") and FAMILY.fullmatch(value)):
                prefixes.append((where, value))
                continue
            if not FAMILY.fullmatch(value) or value in NOT_METRICS:
                continue
            families.setdefault(value, where)
            found = {m.group(1) for m in TYPE_WORD.finditer(statement_around(code, start, end))}
            types.setdefault(value, set()).update(found)
    return families, types, prefixes


# ---- PromQL --------------------------------------------------------------------------------------

def promql_names(expr):
    """The pglock_* and pglock:* metric names an expression selects."""
    names = {m.group(2) for m in NAME_MATCHER.finditer(expr)}
    out, i, n = [], 0, len(expr)
    while i < n:
        c = expr[i]
        if c in "\"'`":
            j = i + 1
            while j < n and expr[j] != c:
                j += 2 if expr[j] == "\\" and c != "`" else 1
            out.append('""')
            i = j + 1
        elif c == "#":
            j = expr.find("\n", i)
            i = n if j < 0 else j
        else:
            out.append(c)
            i += 1
    stripped = re.sub(r"\{[^{}]*\}", " ", "".join(out))
    stripped = LABEL_LIST.sub(" ", stripped)
    names.update(PROMQL_NAME.findall(stripped))
    return names


# ---- YAML (the subset the rule and test files use) -----------------------------------------------

def _quoted(lines, k, col, quote):
    """Reads a quoted scalar starting at lines[k][col]; returns (value, next line index)."""
    parts, line, j = [], lines[k], col + 1
    while True:
        while j < len(line):
            ch = line[j]
            if quote == "'" and ch == "'":
                if line.startswith("''", j):
                    parts.append("'")
                    j += 2
                    continue
                return "".join(parts), k + 1
            if quote == '"' and ch == "\\" and j + 1 < len(line):
                parts.append({"n": "\n", "t": "\t"}.get(line[j + 1], line[j + 1]))
                j += 2
                continue
            if quote == '"' and ch == '"':
                return "".join(parts), k + 1
            parts.append(ch)
            j += 1
        k += 1
        if k >= len(lines):
            raise ValueError(f"unterminated {quote}-quoted value")
        line, j = lines[k], 0
        parts.append(" ")
        while j < len(line) and line[j] in " \t":
            j += 1


def yaml_scalars(path, keys, context_keys):
    """Yields (key, value, line number, context) for every block-style `key: scalar` of keys in the
    YAML file. context is the latest (key, value) of a list item `- key: value` with key in
    context_keys, e.g. ("alert", "PglockTargetDown")."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    context, k = ("", ""), 0
    while k < len(lines):
        line = lines[k]
        m = YAML_KEY.match(line)
        comment = line.lstrip().startswith("#")
        flow = not comment and FLOW_KEY.search(line if not m else m.group(4))
        if flow:
            raise ValueError(f"{path}:{k + 1}: flow-style `{flow.group(1)}:` is not read by "
                             "this check; write it in block style")
        if comment or not m:
            k += 1
            continue
        key, rest = m.group(3), m.group(4)
        key_col = line.index(key, len(m.group(1)))
        lineno = k + 1
        value = None
        if rest.startswith(("|", ">")):
            body, k = [], k + 1
            while k < len(lines) and (not lines[k].strip()
                                      or len(lines[k]) - len(lines[k].lstrip()) > key_col):
                body.append(lines[k])
                k += 1
            value = "\n".join(body)
        elif rest.startswith(("'", '"')):
            col = line.index(rest[0], key_col + len(key))
            try:
                value, k = _quoted(lines, k, col, rest[0])
            except ValueError as e:
                raise ValueError(f"{path}:{lineno}: {e}") from None
        else:
            parts, k = [re.sub(r"(^|\s)#.*$", "", rest).strip()], k + 1
            while k < len(lines) and lines[k].strip() and \
                    len(lines[k]) - len(lines[k].lstrip()) > key_col:
                nxt = lines[k].strip()
                if nxt.startswith(("- ", "#")) or YAML_KEY.match(lines[k]):
                    break  # a nested node, not the continuation of a plain scalar
                parts.append(re.sub(r"(^|\s)#.*$", "", nxt).strip())
                k += 1
            value = " ".join(p for p in parts if p)
        if key in context_keys and m.group(2) and value:
            context = (key, value)
        if key in keys:
            yield key, value, lineno, context


# ---- what alerts and dashboards use --------------------------------------------------------------

def alert_uses(root):
    """Returns (records, uses): the names rules record, and (name, where) for every name used."""
    records, uses = set(), []
    for path in sorted(glob.glob(os.path.join(root, "alerts", "*.yml"))):
        for key, value, lineno, (ckey, cvalue) in yaml_scalars(path, ("record", "expr"),
                                                               ("alert", "record")):
            if key == "record":
                records.add(value)
                continue
            for name in promql_names(value):
                uses.append((name, f"{rel(root, path)}:{lineno} ({ckey} {cvalue}, expr)"))
    for path in sorted(glob.glob(os.path.join(root, "alerts", "tests", "*.yml"))):
        for key, value, lineno, (_, test) in yaml_scalars(path, ("series", "expr"), ("name",)):
            what = "input series" if key == "series" else "promql_expr_test expr"
            for name in promql_names(value):
                uses.append((name, f"{rel(root, path)}:{lineno} (test {test!r}, {what})"))
    return records, uses


def _json_strings(node, path, context):
    if isinstance(node, dict):
        if path.startswith("templating"):
            context = f"variable {node.get('name', context)!r}" if "name" in node else context
        elif path.startswith("annotations"):
            context = f"annotation {node.get('name', context)!r}" if "name" in node else context
        elif "title" in node and ("targets" in node or "type" in node):
            context = f"panel {node['title']!r}"
        for key, value in node.items():
            sub = f"{path}.{key}" if path else key
            if key in DASHBOARD_KEYS and isinstance(value, str):
                yield value, context, sub
            else:
                yield from _json_strings(value, sub, context)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _json_strings(value, f"{path}[{i}]", context)


def dashboard_uses(root):
    uses = []
    for path in sorted(glob.glob(os.path.join(root, "dashboards", "*.json"))):
        with open(path, encoding="utf-8") as f:
            dashboard = json.load(f)
        for text, context, where in _json_strings(dashboard, "", "dashboard"):
            for name in promql_names(text):
                uses.append((name, f"{rel(root, path)}: {context}, {where}"))
    return uses


# ---- docs/metrics.md -----------------------------------------------------------------------------

def _cells(line):
    row = line.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [c.strip() for c in re.split(r"(?<!\\)\|", row)]


METRICS_DOC = "docs/metrics.md"


def documented_families(root):
    """Returns (documented, problems): documented maps a row's name in a metric table of
    docs/metrics.md to its line."""
    path = os.path.join(root, METRICS_DOC)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        return {}, [f"{METRICS_DOC}: cannot be read ({e.strerror}): it documents every metric"]
    documented, problems, fence, k = {}, [], None, 0
    while k < len(lines):
        stripped = lines[k].strip()
        if fence:
            fence = None if stripped.startswith(fence) else fence
            k += 1
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            k += 1
            continue
        is_table = (stripped.startswith("|") and k + 1 < len(lines)
                    and re.fullmatch(r"\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?", lines[k + 1].strip()))
        if not is_table:
            k += 1
            continue
        metric_table = _cells(stripped)[0].lower() == "metric"
        k += 2
        while k < len(lines) and lines[k].strip().startswith("|"):
            if metric_table:
                name = _cells(lines[k])[0].replace("`", "").strip()
                if METRIC_NAME.fullmatch(name):
                    documented.setdefault(name, k + 1)
                else:
                    problems.append(f"{METRICS_DOC}:{k + 1}: first cell {name!r} of a metric table "
                                    "row is not a metric name")
            k += 1
    return documented, problems


# ---- the check -----------------------------------------------------------------------------------

def family_of(name, families, types):
    """The emitted family a used series name belongs to, or None."""
    if name in families:
        return name
    for suffix, kinds in SUFFIXES.items():
        base = name[:-len(suffix)]
        if name.endswith(suffix) and base in families and types.get(base, set()) & set(kinds):
            return base
    return None


def check(root):
    """Returns (problems, notes, summary)."""
    problems, notes = [], []
    families, types, prefixes = emitted_families(root)
    for where, value in prefixes:
        notes.append(f"note: {where}: literal {value!r} is a name prefix; names built from it at "
                     "run time are not seen by this check")
    if not families:
        return [f"no pglock_* metric name literal found under {os.path.join(root, 'exporter')}"
                ], notes, ""
    try:
        records, uses = alert_uses(root)
    except ValueError as e:
        return [str(e)], notes, ""
    uses += dashboard_uses(root)

    missing, used = {}, set()
    for name, where in uses:
        if name in records:
            continue
        family = None if ":" in name else family_of(name, families, types)
        if family:
            used.add(family)
        else:
            missing.setdefault(name, []).append(where)
    for name in sorted(missing):
        if ":" in name:
            why = "no rule in alerts/*.yml records it"
        elif name in NOT_METRICS:
            why = f"not a metric: {NOT_METRICS[name]}"
        else:
            why = "the code does not emit it (no such literal in exporter/**/*.{h,cc})"
        problems.append(f"{name}: used, but {why}; used in:")
        problems.extend(f"    {where}" for where in dict.fromkeys(missing[name]))

    documented, doc_problems = documented_families(root)
    problems += doc_problems
    for name in sorted(set(families) - set(documented)):
        problems.append(f"{name}: emitted ({families[name]}) but has no row in a {METRICS_DOC} "
                        "metric table")
    for name in sorted(n for n in documented if n.startswith("pglock_") and n not in families):
        problems.append(f"{name}: documented ({METRICS_DOC}:{documented[name]}) but the code does "
                        "not emit it")
    summary = (f"{len(families)} families emitted, {len(used)} referenced by alerts/dashboards, "
               "all documented")
    return problems, notes, summary


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(here),
                    help="repository root holding exporter/, alerts/, dashboards/, docs/metrics.md")
    args = ap.parse_args()
    problems, notes, summary = check(args.root)
    for note in notes:
        print(note, file=sys.stderr)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        count = sum(1 for p in problems if not p.startswith("    "))
        print(f"check_metric_names: {count} problem(s)", file=sys.stderr)
        return 1
    print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
