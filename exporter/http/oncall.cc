#include "exporter/http/oncall.h"

#include <vector>

#include "exporter/events/event_log.h"
#include "exporter/http/oncall_html.h"
#include "exporter/http/oncall_json.h"
#include "exporter/http/oncall_select.h"
#include "exporter/http/page_text.h"
#include "exporter/http/timeline_page.h"

namespace pglock {
namespace {

const char* kStyle =
    "body{font-family:sans-serif;margin:0;padding:.5em;font-size:15px}"
    "h1{font-size:1.3em;margin:.2em 0}h2{font-size:1.15em;border-bottom:2px solid #888}"
    "h3{font-size:1em;margin:.8em 0 .3em}section{margin-bottom:1.5em}"
    "table{border-collapse:collapse;display:block;overflow-x:auto;max-width:100%}"
    "td,th{border:1px solid #ccc;padding:.2em .4em;text-align:left;vertical-align:top}"
    "ul.forest,ul.forest ul{padding-left:1.2em}ul.forest li{margin:.2em 0}"
    ".up{color:#070}.down{color:#b00}.lock{font-family:monospace;background:#eef}"
    ".app{color:#036}.st{color:#555;font-style:italic}.note{color:#555}"
    ".root{color:#fff;background:#b00;padding:0 .3em}.mode{font-family:monospace}.bt{color:#606}"
    "pre.q{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;margin:.2em 0;"
    "padding:.2em;font-size:.9em}form input{max-width:10em}"
    ".verdict{border-left:4px solid #b00;background:#fff6e6;padding:.3em .5em;margin:.3em 0;"
    "overflow-wrap:anywhere}code.cmd{font-family:monospace;background:#222;color:#fff;"
    "padding:.15em .3em;line-height:1.7;white-space:pre-wrap;overflow-wrap:anywhere}"
    "td.detail{min-width:16em;overflow-wrap:anywhere}";

}  // namespace

std::string RenderLocksPage(const SnapshotList& snapshots, const LocksFilter& filter) {
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<meta http-equiv=\"refresh\" content=\"" +
      std::to_string(kPageRefreshSeconds) + "\"><title>Locks - pglock_exporter</title><style>" +
      kStyle + kTimelineStyle +
      "</style></head><body>\n<h1>Locks</h1>\n<p><a href=\"/\">pglock_exporter</a> &middot; "
      "<a href=\"/runbooks/README\">runbooks</a> &middot; JSON: <a href=\"/api/v1/locks\">locks"
      "</a>, <a href=\"/api/v1/events\">events</a> &middot; refreshes every " +
      std::to_string(kPageRefreshSeconds) +
      " s</p>\n<form method=get action=\"/locks\">target <input name=target value=\"" +
      H(filter.target) + "\"> lock or lease <input name=lock value=\"" + H(filter.lock) +
      "\"> <button>narrow</button></form>\n";
  const std::vector<TargetPart> parts = SelectTargetParts(snapshots, filter);
  if (parts.empty()) o += "<p>No target matches.</p>\n";
  for (const TargetPart& t : parts) TargetHtml(t, &o);
  return o + "</body></html>\n";
}

std::string RenderLocksJson(const SnapshotList& snapshots, const LocksFilter& filter) {
  std::string o = "{\"targets\":";
  JsonArray(
      SelectTargetParts(snapshots, filter), [&](const TargetPart& t) { TargetJson(t, &o); }, &o);
  return o + "}\n";
}

std::string RenderEventsJson(const SnapshotList& snapshots, const LocksFilter& filter) {
  std::string o = "{\"events\":[";
  bool first = true;
  for (const TargetPart& t : SelectTargetParts(snapshots, filter)) {
    for (const Event* e : t.events) {
      if (!first) o += ",";
      first = false;
      o += EventJson(*e);
    }
  }
  return o + "]}\n";
}

}  // namespace pglock
