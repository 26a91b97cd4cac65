//! The page: one HTML file with its styles, script and data inlined.

use super::data::RunData;

const TEMPLATE: &str = include_str!("page.html");
const DATA_MARK: &str = "__KF_DATA__";

/// The explorer page for `data`: self-contained HTML (no network needed to view it).
pub fn render_page(data: &RunData) -> String {
    // `<` only occurs inside JSON strings, where `\u003c` means the same; so no `</script>`
    // in a kernel's source or an LLM reply can end the data block.
    let json = serde_json::to_string(data)
        .unwrap_or_else(|_| "null".to_owned())
        .replace('<', "\\u003c");
    TEMPLATE.replacen(DATA_MARK, &json, 1)
}
