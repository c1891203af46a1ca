#include "exporter/http/markdown.h"

#include <vector>

#include "exporter/http/server.h"

namespace pglock {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A link target as the page should use it; "" drops the link (javascript:, data:, ...).
std::string LinkTarget(std::string_view target) {
  if (StartsWith(target, "http://") || StartsWith(target, "https://") || StartsWith(target, "#")) {
    return std::string(target);
  }
  if (target.find(':') != std::string_view::npos) return "";
  std::string_view path = target, fragment;
  if (const auto hash = target.find('#'); hash != std::string_view::npos) {
    path = target.substr(0, hash);
    fragment = target.substr(hash);
  }
  if (path.size() > 3 && path.substr(path.size() - 3) == ".md" &&
      path.find('/') == std::string_view::npos) {
    return "/runbooks/" + std::string(path.substr(0, path.size() - 3)) + std::string(fragment);
  }
  return std::string(target);
}

// Inline markup of one line of text.
std::string Inline(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '`') {
      const auto end = s.find('`', i + 1);
      if (end != std::string_view::npos) {
        out += "<code>" + HtmlEscape(std::string(s.substr(i + 1, end - i - 1))) + "</code>";
        i = end + 1;
        continue;
      }
    } else if (c == '*' && i + 1 < s.size() && s[i + 1] == '*') {
      const auto end = s.find("**", i + 2);
      if (end != std::string_view::npos && end > i + 2) {
        out += "<strong>" + Inline(s.substr(i + 2, end - i - 2)) + "</strong>";
        i = end + 2;
        continue;
      }
    } else if (c == '*' && i + 1 < s.size() && s[i + 1] != ' ') {
      const auto end = s.find('*', i + 1);
      if (end != std::string_view::npos && end > i + 1) {
        out += "<em>" + Inline(s.substr(i + 1, end - i - 1)) + "</em>";
        i = end + 1;
        continue;
      }
    } else if (c == '[') {
      const auto close = s.find("](", i + 1);
      const auto end = close == std::string_view::npos ? close : s.find(')', close + 2);
      if (end != std::string_view::npos) {
        const std::string text = Inline(s.substr(i + 1, close - i - 1));
        const std::string target = LinkTarget(s.substr(close + 2, end - close - 2));
        out += target.empty() ? text : "<a href=\"" + HtmlEscape(target) + "\">" + text + "</a>";
        i = end + 1;
        continue;
      }
    }
    out += HtmlEscape(std::string(1, c));
    ++i;
  }
  return out;
}

std::vector<std::string_view> TableCells(std::string_view line) {
  line = Trim(line);
  if (StartsWith(line, "|")) line.remove_prefix(1);
  if (!line.empty() && line.back() == '|') line.remove_suffix(1);
  std::vector<std::string_view> cells;
  size_t start = 0;
  bool in_code = false;
  for (size_t i = 0; i <= line.size(); ++i) {
    if (i < line.size() && line[i] == '`') in_code = !in_code;
    if (i == line.size() || (line[i] == '|' && !in_code && (i == 0 || line[i - 1] != '\\'))) {
      cells.push_back(Trim(line.substr(start, i - start)));
      start = i + 1;
    }
  }
  return cells;
}

bool IsTableSeparator(std::string_view line) {
  line = Trim(line);
  if (!StartsWith(line, "|") && !StartsWith(line, "-")) return false;
  for (char c : line) {
    if (c != '|' && c != '-' && c != ':' && c != ' ') return false;
  }
  return line.find('-') != std::string_view::npos;
}

// "1. x" -> 3; "- x" / "* x" -> 2; else 0.
size_t ListMarker(std::string_view line, bool* ordered) {
  if (StartsWith(line, "- ") || StartsWith(line, "* ")) {
    *ordered = false;
    return 2;
  }
  size_t i = 0;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  if (i > 0 && i + 1 < line.size() && line[i] == '.' && line[i + 1] == ' ') {
    *ordered = true;
    return i + 2;
  }
  return 0;
}

}  // namespace

std::string MarkdownToHtml(std::string_view md) {
  std::vector<std::string_view> lines;
  while (!md.empty()) {
    const auto nl = md.find('\n');
    lines.push_back(md.substr(0, nl));
    md = nl == std::string_view::npos ? std::string_view() : md.substr(nl + 1);
  }
  std::string out;
  std::string paragraph;
  std::string list_close;  // "</ul>" / "</ol>" while a list is open
  const auto flush = [&] {
    if (!paragraph.empty()) out += "<p>" + paragraph + "</p>\n";
    paragraph.clear();
  };
  const auto close_list = [&] {
    out += list_close;
    list_close.clear();
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string_view raw = lines[i];
    const std::string_view line = Trim(raw);
    bool ordered = false;
    const size_t marker = ListMarker(line, &ordered);
    if (StartsWith(line, "```")) {
      flush();
      close_list();
      out += "<pre><code>";
      for (++i; i < lines.size() && !StartsWith(Trim(lines[i]), "```"); ++i) {
        out += HtmlEscape(std::string(lines[i])) + "\n";
      }
      out += "</code></pre>\n";
    } else if (StartsWith(line, "#")) {
      flush();
      close_list();
      size_t level = 0;
      while (level < line.size() && line[level] == '#') ++level;
      level = std::min<size_t>(level, 6);
      const std::string tag = "h" + std::to_string(level);
      out += "<" + tag + ">" + Inline(Trim(line.substr(level))) + "</" + tag + ">\n";
    } else if (StartsWith(line, "|") && i + 1 < lines.size() && IsTableSeparator(lines[i + 1])) {
      flush();
      close_list();
      out += "<table><thead><tr>";
      for (std::string_view cell : TableCells(line)) out += "<th>" + Inline(cell) + "</th>";
      out += "</tr></thead><tbody>\n";
      for (i += 2; i < lines.size() && StartsWith(Trim(lines[i]), "|"); ++i) {
        out += "<tr>";
        for (std::string_view cell : TableCells(lines[i])) out += "<td>" + Inline(cell) + "</td>";
        out += "</tr>\n";
      }
      --i;
      out += "</tbody></table>\n";
    } else if (marker > 0) {
      flush();
      const char* open = ordered ? "<ol>" : "<ul>";
      if (list_close.empty()) {
        out += std::string(open) + "\n";
        list_close = ordered ? "</ol>\n" : "</ul>\n";
      }
      std::string item(line.substr(marker));
      // Continuation lines: indented text up to a blank line or the next item.
      while (i + 1 < lines.size() && !Trim(lines[i + 1]).empty() &&
             (lines[i + 1].front() == ' ' || lines[i + 1].front() == '\t') &&
             ListMarker(Trim(lines[i + 1]), &ordered) == 0) {
        item += " " + std::string(Trim(lines[++i]));
      }
      out += "<li>" + Inline(item) + "</li>\n";
    } else if (line.empty()) {
      flush();
      close_list();
    } else {
      close_list();
      if (!paragraph.empty()) paragraph += "\n";
      paragraph += Inline(line);
    }
  }
  flush();
  close_list();
  return out;
}

}  // namespace pglock
