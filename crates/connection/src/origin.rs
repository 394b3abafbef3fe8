//! Browser origins (`--allowed-origins`): which web pages may open subscriptions
//! (EventSource, WebSocket, fetch) and which may call the API.
//!
//! The check is a gate at the request head, not a header echo: a request whose
//! `Origin` is not allowed is answered 403 before anything happens, so the
//! `Access-Control-Allow-Origin: *` that subscriptions keep can only reach pages that
//! were let in (and it carries no ambient credential: tokens are explicit). The
//! WebSocket handshake, which browsers never subject to CORS, is gated the same way.
//!
//! The API is stricter: a request that carries an `Origin` (every browser POST does,
//! and every cross-origin request) must name an origin listed explicitly — `*` does
//! not count. So no page can make a visitor's browser publish or change subscriptions
//! with a "simple" CORS request, even against a loopback-only API. Clients that are
//! not browsers send no `Origin` and are not affected.

/// The configured origins.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Origins {
    /// `*` (the default): any page may subscribe; no page may call the API.
    #[default]
    Any,
    /// Exact `scheme://host[:port]` values (compared ASCII case-insensitively).
    List(Vec<String>),
}

impl Origins {
    /// From `--allowed-origins` values: `*` alone, or a list of origins.
    pub fn parse(values: &[String]) -> Result<Origins, String> {
        if values.is_empty() || values == ["*"] {
            return Ok(Origins::Any);
        }
        let mut list = Vec::with_capacity(values.len());
        for v in values {
            let v = v.trim().trim_end_matches('/');
            let ok = (v.starts_with("http://") || v.starts_with("https://"))
                && !v.contains(['*', ' ', ','])
                && v.split("://")
                    .nth(1)
                    .is_some_and(|h| !h.is_empty() && !h.contains('/'));
            if !ok {
                return Err(format!(
                    "--allowed-origins: {v:?} is not `*` or scheme://host[:port]"
                ));
            }
            list.push(v.to_ascii_lowercase());
        }
        Ok(Origins::List(list))
    }

    fn listed(&self, origin: &str) -> bool {
        match self {
            Origins::Any => false,
            Origins::List(list) => list.iter().any(|o| o.eq_ignore_ascii_case(origin)),
        }
    }

    /// May a page at `origin` open a subscription or long-poll?
    pub fn allows_subscribe(&self, origin: &str) -> bool {
        *self == Origins::Any || self.listed(origin)
    }

    /// May a page at `origin` call the API? Only when listed by name.
    pub fn allows_api(&self, origin: &str) -> bool {
        self.listed(origin)
    }

    /// For the start line.
    pub fn describe(&self) -> String {
        match self {
            Origins::Any => "* (API: no browser origin)".into(),
            Origins::List(l) => l.join(","),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_lets_pages_subscribe_but_never_call_the_api() {
        let any = Origins::parse(&[]).unwrap();
        assert!(any.allows_subscribe("http://evil.example"));
        assert!(!any.allows_api("http://evil.example"));
        let list =
            Origins::parse(&["https://app.example/".into(), "http://a:8080".into()]).unwrap();
        assert!(list.allows_subscribe("https://APP.example"));
        assert!(list.allows_api("http://a:8080"));
        assert!(!list.allows_subscribe("https://app.example.evil"));
        assert!(!list.allows_api("null"));
        for bad in [
            "app.example",
            "https://*.example",
            "ftp://x",
            "https://",
            "https://a/b",
        ] {
            assert!(Origins::parse(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
