// The report page: the embedded template (analyzer/report/web/report.html) with the embedded
// style sheet, script and the data inlined, so that the file opens anywhere with nothing fetched.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace heapsnap::report {

// JSON text that is safe inside <script type="application/json">: '<', '>' and '&' become
// \u003c, \u003e, \u0026 (so neither "</script" nor "<!--" can occur), and invalid UTF-8 from
// symbol names becomes U+FFFD instead of an exception.
std::string json_for_script(const nlohmann::ordered_json &data);

// Text safe inside HTML elements and attribute values.
std::string html_escape(const std::string &s);

// The whole page. data["title"] becomes the document title.
std::string render_html(const nlohmann::ordered_json &data);

}  // namespace heapsnap::report
