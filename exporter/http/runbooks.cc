#include "exporter/http/runbooks.h"

#include "exporter/http/markdown.h"
#include "exporter/http/server.h"

namespace pglock {

const Runbook* FindRunbook(std::string_view name) {
  for (const Runbook& r : Runbooks()) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

std::string RunbookPage(const Runbook& runbook) {
  return std::string("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">") +
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">" + "<title>" +
         HtmlEscape(runbook.name) + " - pglock_exporter runbook</title><style>" +
         "body{font-family:sans-serif;margin:1em auto;max-width:60em;padding:0 1em;"
         "line-height:1.4}pre{background:#f4f4f4;padding:.5em;overflow-x:auto}"
         "code{background:#f4f4f4}table{border-collapse:collapse;display:block;overflow-x:auto}"
         "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}"
         "</style></head><body>\n<p><a href=\"/\">pglock_exporter</a> &middot; "
         "<a href=\"/locks\">locks</a> &middot; <a href=\"/runbooks/README\">all runbooks</a>"
         "</p>\n" +
         MarkdownToHtml(runbook.markdown) + "</body></html>\n";
}

}  // namespace pglock
