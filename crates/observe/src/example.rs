//! The channels example page (`/example/` on the admin listener, SPEC H5): a page
//! that uses the JavaScript client (`clients/js`), embedded with the client's files
//! so the binary needs no files and no network. `myriad demo` names it with the
//! client listener's address (`?server=`) and publishes to its channels.

/// The page.
const PAGE: &str = include_str!("example.html");

/// The client library's modules, by their path under `/example/client/`.
const CLIENT: &[(&str, &str)] = &[
    ("index.js", include_str!("../../../clients/js/index.js")),
    (
        "src/backoff.js",
        include_str!("../../../clients/js/src/backoff.js"),
    ),
    (
        "src/client.js",
        include_str!("../../../clients/js/src/client.js"),
    ),
    (
        "src/emitter.js",
        include_str!("../../../clients/js/src/emitter.js"),
    ),
    (
        "src/names.js",
        include_str!("../../../clients/js/src/names.js"),
    ),
    (
        "src/positions.js",
        include_str!("../../../clients/js/src/positions.js"),
    ),
    (
        "src/requests.js",
        include_str!("../../../clients/js/src/requests.js"),
    ),
    ("src/url.js", include_str!("../../../clients/js/src/url.js")),
    (
        "src/transports/longpoll.js",
        include_str!("../../../clients/js/src/transports/longpoll.js"),
    ),
    (
        "src/transports/sse.js",
        include_str!("../../../clients/js/src/transports/sse.js"),
    ),
    (
        "src/transports/websocket.js",
        include_str!("../../../clients/js/src/transports/websocket.js"),
    ),
];

/// The body and content type of `path` (the URL path on the admin listener), if it
/// is the example's.
pub fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/example" | "/example/" | "/example/index.html" => {
            Some(("text/html; charset=utf-8", PAGE))
        }
        _ => {
            let module = path.strip_prefix("/example/client/")?;
            CLIENT
                .iter()
                .find(|(name, _)| *name == module)
                .map(|(_, body)| ("text/javascript; charset=utf-8", *body))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every module the client imports is served (a missing one would break the
    /// page in a browser only).
    #[test]
    fn every_import_of_the_client_is_served() {
        for (name, body) in CLIENT {
            let dir = name.rsplit_once('/').map_or("", |(d, _)| d);
            for line in body.lines().filter(|l| l.starts_with("import ")) {
                let Some(target) = line.split('"').nth(1) else {
                    continue;
                };
                let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
                for seg in target.split('/') {
                    match seg {
                        "." => {}
                        ".." => {
                            parts.pop();
                        }
                        s => parts.push(s),
                    }
                }
                let path = format!("/example/client/{}", parts.join("/"));
                assert!(
                    asset(&path).is_some(),
                    "{name} imports {target}: {path} not served"
                );
            }
        }
        assert!(asset("/example/").is_some_and(|(t, _)| t.starts_with("text/html")));
        assert!(asset("/example/client/../secret").is_none());
    }
}
