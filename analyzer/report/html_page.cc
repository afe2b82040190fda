#include "report/html_page.h"

#include <cstring>
#include <stdexcept>
#include <utility>

#include "report_assets.h"

namespace heapsnap::report {

std::string json_for_script(const nlohmann::ordered_json &data) {
  std::string text = data.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + text.size() / 64);
  // Outside strings JSON has no '<', '>' or '&', so escaping them everywhere only touches strings.
  for (char c : text) {
    switch (c) {
      case '<': out += "\\u003c"; break;
      case '>': out += "\\u003e"; break;
      case '&': out += "\\u0026"; break;
      default: out += c;
    }
  }
  return out;
}

std::string html_escape(const std::string &s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string render_html(const nlohmann::ordered_json &data) {
  std::string title = "heapsnap report";
  if (data.contains("title") && data["title"].is_string()) title += ": " + data["title"].get<std::string>();
  // The template's slots, in the order they appear, each filled exactly once; what a slot
  // inserts (the data may contain anything) is never searched for the next slot.
  const std::pair<const char *, std::string> slots[] = {
      {"@@TITLE@@", html_escape(title)},
      {"/*@@CSS@@*/", std::string(assets::kCss)},
      {"@@DATA@@", json_for_script(data)},
      {"/*@@JS@@*/", std::string(assets::kJs)},
  };
  std::string_view tpl = assets::kHtml;
  std::string out;
  out.reserve(tpl.size() + slots[1].second.size() + slots[2].second.size() + slots[3].second.size());
  for (const auto &[slot, text] : slots) {
    auto at = tpl.find(slot);
    if (at == std::string_view::npos) throw std::logic_error(std::string("report template has no ") + slot);
    out.append(tpl.substr(0, at));
    out += text;
    tpl.remove_prefix(at + strlen(slot));
  }
  out.append(tpl);
  return out;
}

}  // namespace heapsnap::report
