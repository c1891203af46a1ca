#!/usr/bin/env python3
"""Self-test of scripts/check_metric_names.py on small fixture trees in a temporary directory.

Each test starts from a consistent tree (one C++ file, a rules file, a promtool test, a dashboard
and docs/metrics.md) and changes one thing. Usage: scripts/check_metric_names_test.py [-v]
Standard library only.
"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_metric_names as cmn  # noqa: E402

CODE = """\
// "pglock_in_a_comment" is not emitted: this line's a comment.
/* Neither is "pglock_in_a_block_comment". */
void Add(Families* f) {
  f->Gauge("pglock_up", "pglock_exporter: 1 if the poll worked.", tl, 1);
  f->Counter("pglock_poll_errors_total", "Failed polls.", tl, n);
  f->Gauge("pglock_" "joined", "Adjacent literals are one.", tl, 1'000);
  log.Set("application_name", "pglock_exporter");
  const std::string path = "/tmp/pglock_exporter_tls_XXXXXX";
  const char sep = ';';
}
"""

RULES = """\
groups:
  - name: pglock_recording
    rules:
      - record: pglock:up:sum
        expr: sum by (target) (pglock_up)
  - name: pglock_health
    rules:
      - alert: PglockTargetDown
        expr: |
          pglock:up:sum == 0
          or increase(pglock_poll_errors_total{metric="pglock_label_value"}[5m]) > 0  # pglock_note
        annotations:
          description: >-
            expr: pglock_only_in_prose is text, not an expression.
"""

TESTS = """\
rule_files: [../pglock.rules.yml]
tests:
  - name: down
    input_series:
      - series: 'pglock_up{target="main"}'
        values: '0x10'
"""

METRICS_DOC = """\
# Metrics

| metric | labels | meaning |
|---|---|---|
| `pglock_up` | target | 1 if the last poll succeeded |
| `pglock_poll_errors_total` | target | failed polls |
| `pglock_joined` | target | a name from two literals |

```
| metric |
|---|
| `pglock_in_a_code_block` |
```
"""


def dashboard(expr):
    return {"uid": "d", "title": "d",
            "templating": {"list": [{"name": "target",
                                     "query": {"query": "label_values(pglock_up, target)"}}]},
            "panels": [{"title": "Up", "type": "stat", "targets": [{"expr": expr}]}]}


class CheckMetricNamesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.write("exporter/metrics/exposition.cc", CODE)
        self.write("alerts/pglock.rules.yml", RULES)
        self.write("alerts/tests/pglock.rules.test.yml", TESTS)
        self.write("dashboards/d.json", json.dumps(dashboard('sum(pglock_up{target=~"$target"})')))
        self.write("docs/metrics.md", METRICS_DOC)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    def append(self, path, text):
        with open(os.path.join(self.root, path), "a", encoding="utf-8") as f:
            f.write(text)

    def problems(self):
        return cmn.check(self.root)[0]

    def test_consistent_tree_passes(self):
        problems, notes, summary = cmn.check(self.root)
        self.assertEqual(problems, [])
        self.assertEqual(notes, [])
        self.assertEqual(summary, "3 families emitted, 2 referenced by alerts/dashboards, "
                                  "all documented")

    def test_emitted_names_skip_comments_help_texts_and_program_name(self):
        families, _, _ = cmn.emitted_families(self.root)
        self.assertEqual(sorted(families), ["pglock_joined", "pglock_poll_errors_total",
                                            "pglock_up"])

    def test_dashboard_name_not_emitted_fails(self):
        self.write("dashboards/d.json", json.dumps(dashboard("pglock_up + pglock_does_not_exist")))
        problems = self.problems()
        self.assertIn("pglock_does_not_exist: used, but the code does not emit it", problems[0])
        self.assertIn("dashboards/d.json: panel 'Up', panels[0].targets[0].expr", problems[1])

    def test_name_only_in_a_comment_is_not_emitted(self):
        self.write("dashboards/d.json", json.dumps(dashboard("pglock_in_a_comment")))
        self.assertIn("pglock_in_a_comment: used", self.problems()[0])

    def test_test_series_not_emitted_fails(self):
        self.append("alerts/tests/pglock.rules.test.yml",
                    "      - series: 'pglock_upp{target=\"main\"}'\n        values: '1'\n")
        problems = self.problems()
        self.assertIn("pglock_upp: used", problems[0])
        self.assertIn("alerts/tests/pglock.rules.test.yml:7 (test 'down', input series)",
                      problems[1])

    def test_undefined_recording_rule_fails(self):
        self.write("dashboards/d.json", json.dumps(dashboard("pglock:up:sum + pglock:nope:sum")))
        self.assertEqual(self.problems()[0],
                         "pglock:nope:sum: used, but no rule in alerts/*.yml records it; used in:")

    def test_program_name_used_as_metric_fails(self):
        self.write("dashboards/d.json", json.dumps(dashboard("pglock_exporter")))
        self.assertIn("not a metric", self.problems()[0])

    def test_emitted_family_missing_from_the_metrics_page_fails(self):
        self.append("exporter/metrics/exposition.cc", 'void G() { Gauge("pglock_new_family"); }\n')
        problems = self.problems()
        self.assertEqual(len(problems), 1)
        self.assertRegex(problems[0], r"^pglock_new_family: emitted \(exporter/metrics/"
                                      r"exposition.cc:11\) but has no row in a docs/metrics.md")

    def test_row_not_emitted_fails(self):
        self.append("docs/metrics.md",
                    "\n| metric | labels |\n|---|---|\n| `pglock_gone` | target |\n")
        self.assertEqual(self.problems(), [
            "pglock_gone: documented (docs/metrics.md:17) but the code does not emit it"])

    def test_a_readme_table_does_not_document_a_family(self):
        self.append("exporter/metrics/exposition.cc", 'void G() { Gauge("pglock_new_family"); }\n')
        self.write("README.md",
                   "| metric | labels |\n|---|---|\n| `pglock_new_family` | target |\n")
        self.assertRegex(self.problems()[0], r"^pglock_new_family: emitted .* but has no row in a "
                                             r"docs/metrics.md metric table$")

    def test_missing_metrics_page_is_reported(self):
        os.remove(os.path.join(self.root, "docs", "metrics.md"))
        problems = self.problems()
        self.assertIn("docs/metrics.md: cannot be read", problems[0])
        self.assertEqual(len(problems), 4)
        self.assertTrue(all("but has no row in a docs/metrics.md" in p for p in problems[1:]))

    def test_row_that_is_not_a_name_fails(self):
        self.append("docs/metrics.md", "\n| metric | labels |\n|---|---|\n| two words | target |\n")
        self.assertIn("first cell 'two words'", self.problems()[0])

    def test_histogram_series_suffixes(self):
        self.append("exporter/metrics/exposition.cc",
                    'void H() { f->Histogram("pglock_wait_seconds", "Waits.", tl, {0.1, 1}); }\n')
        self.append("docs/metrics.md", "\n| metric |\n|---|\n| `pglock_wait_seconds` |\n")
        self.write("dashboards/d.json", json.dumps(dashboard(
            "rate(pglock_wait_seconds_bucket[5m]) / rate(pglock_wait_seconds_count[5m])")))
        self.assertEqual(self.problems(), [])
        self.write("dashboards/d.json", json.dumps(dashboard("pglock_up_count")))
        self.assertIn("pglock_up_count: used", self.problems()[0])

    def test_name_prefix_is_a_note_not_a_family(self):
        self.append("exporter/metrics/exposition.cc",
                    'std::string Name() { return "pglock_lease_"; }\n')
        problems, notes, _ = cmn.check(self.root)
        self.assertEqual(problems, [])
        self.assertIn("'pglock_lease_' is a name prefix", notes[0])

    def test_name_matcher_counts_and_label_values_do_not(self):
        self.assertEqual(cmn.promql_names('{__name__="pglock_a"} + pglock_b{x="pglock_c"}'),
                         {"pglock_a", "pglock_b"})
        self.assertEqual(cmn.promql_names("sum by (pglock_label) (pglock_d) # pglock_e"),
                         {"pglock_d"})

    def test_raw_string_and_char_literals(self):
        code, literals = cmn.cpp_literals('a = R"x(pglock_raw)x"; b = \'"\'; c = "pglock_s";')
        self.assertEqual([v for _, _, v in literals], ["pglock_raw", "pglock_s"])

    def test_flow_style_key_is_reported(self):
        self.append("alerts/tests/pglock.rules.test.yml",
                    "    promql_expr_test:\n      - {expr: pglock_up, eval_time: 1m}\n")
        self.assertIn("flow-style `expr:`", self.problems()[0])


if __name__ == "__main__":
    unittest.main()
