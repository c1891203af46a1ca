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

// One rendering: the document's lines and the HTML so far, with the open paragraph and list.
class MarkdownRenderer {
 public:
  explicit MarkdownRenderer(std::string_view md) {
    while (!md.empty()) {
      const auto nl = md.find('\n');
      lines_.push_back(md.substr(0, nl));
      md = nl == std::string_view::npos ? std::string_view() : md.substr(nl + 1);
    }
  }

  std::string Render() {
    for (i_ = 0; i_ < lines_.size(); ++i_) {
      const std::string_view line = Trim(lines_[i_]);
      bool ordered = false;
      const size_t marker = ListMarker(line, &ordered);
      if (StartsWith(line, "```")) {
        CodeBlock();
      } else if (StartsWith(line, "#")) {
        Heading(line);
      } else if (StartsWith(line, "|") && i_ + 1 < lines_.size() &&
                 IsTableSeparator(lines_[i_ + 1])) {
        Table(line);
      } else if (marker > 0) {
        ListItem(line.substr(marker), ordered);
      } else if (line.empty()) {
        EndBlock();
      } else {
        CloseList();
        if (!paragraph_.empty()) paragraph_ += "\n";
        paragraph_ += Inline(line);
      }
    }
    EndBlock();
    return std::move(out_);
  }

 private:
  void FlushParagraph() {
    if (!paragraph_.empty()) out_ += "<p>" + paragraph_ + "</p>\n";
    paragraph_.clear();
  }
  void CloseList() {
    out_ += list_close_;
    list_close_.clear();
  }
  void EndBlock() {
    FlushParagraph();
    CloseList();
  }

  void CodeBlock() {
    EndBlock();
    out_ += "<pre><code>";
    for (++i_; i_ < lines_.size() && !StartsWith(Trim(lines_[i_]), "```"); ++i_) {
      out_ += HtmlEscape(std::string(lines_[i_])) + "\n";
    }
    out_ += "</code></pre>\n";
  }

  void Heading(std::string_view line) {
    EndBlock();
    size_t level = 0;
    while (level < line.size() && line[level] == '#') ++level;
    level = std::min<size_t>(level, 6);
    const std::string tag = "h" + std::to_string(level);
    out_ += "<" + tag + ">" + Inline(Trim(line.substr(level))) + "</" + tag + ">\n";
  }

  void Table(std::string_view header) {
    EndBlock();
    out_ += "<table><thead><tr>";
    for (std::string_view cell : TableCells(header)) out_ += "<th>" + Inline(cell) + "</th>";
    out_ += "</tr></thead><tbody>\n";
    for (i_ += 2; i_ < lines_.size() && StartsWith(Trim(lines_[i_]), "|"); ++i_) {
      out_ += "<tr>";
      for (std::string_view cell : TableCells(lines_[i_])) out_ += "<td>" + Inline(cell) + "</td>";
      out_ += "</tr>\n";
    }
    --i_;
    out_ += "</tbody></table>\n";
  }

  void ListItem(std::string_view text, bool ordered) {
    FlushParagraph();
    if (list_close_.empty()) {
      out_ += ordered ? "<ol>\n" : "<ul>\n";
      list_close_ = ordered ? "</ol>\n" : "</ul>\n";
    }
    std::string item(text);
    // Continuation lines: indented text up to a blank line or the next item.
    bool next_ordered = false;
    while (i_ + 1 < lines_.size() && !Trim(lines_[i_ + 1]).empty() &&
           (lines_[i_ + 1].front() == ' ' || lines_[i_ + 1].front() == '\t') &&
           ListMarker(Trim(lines_[i_ + 1]), &next_ordered) == 0) {
      item += " " + std::string(Trim(lines_[++i_]));
    }
    out_ += "<li>" + Inline(item) + "</li>\n";
  }

  std::vector<std::string_view> lines_;
  size_t i_ = 0;
  std::string out_;
  std::string paragraph_;
  std::string list_close_;  // "</ul>\n" / "</ol>\n" while a list is open
};

}  // namespace

std::string MarkdownToHtml(std::string_view md) { return MarkdownRenderer(md).Render(); }

}  // namespace pglock
