// A small Markdown -> HTML converter for the runbooks served at /runbooks/<AlertName>: ATX
// headings, paragraphs, bullet and numbered lists, fenced code blocks, pipe tables, and inline
// code, **bold**, *emphasis* and [links](target). Everything else is text. Every byte of the input
// is HTML-escaped; a link to "Name.md" (another runbook) becomes "/runbooks/Name", and only
// http(s), relative and fragment link targets are kept. Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace pglock {

std::string MarkdownToHtml(std::string_view markdown);

}  // namespace pglock
