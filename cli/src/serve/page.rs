//! The query page: YASGUI (an editor with SPARQL highlighting and a results table),
//! compiled into the binary, and a small page that points it at the endpoint.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};

/// The version of `@zazuko/yasgui` in `cli/assets/yasgui/`: part of the assets' paths,
/// so that a browser's cached copy is never stale.
pub const YASGUI_VERSION: &str = "4.6.2";

const YASGUI_JS: &[u8] = include_bytes!("../../assets/yasgui/yasgui.min.js");
const YASGUI_CSS: &[u8] = include_bytes!("../../assets/yasgui/yasgui.min.css");
const PAGE: &str = include_str!("../../assets/query.html");

/// The assets' paths carry their version: a year in caches.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The page.
pub fn query_page() -> Response {
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
        ],
        PAGE.replace("YASGUI_VERSION", YASGUI_VERSION),
    )
        .into_response()
}

/// `/yasgui/VERSION/yasgui.min.js`.
pub async fn yasgui_js() -> Response {
    (
        [
            (CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (CACHE_CONTROL, IMMUTABLE),
        ],
        YASGUI_JS,
    )
        .into_response()
}

/// `/yasgui/VERSION/yasgui.min.css`.
pub async fn yasgui_css() -> Response {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, IMMUTABLE),
        ],
        YASGUI_CSS,
    )
        .into_response()
}
