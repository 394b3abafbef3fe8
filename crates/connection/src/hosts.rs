//! Served host names (`--allowed-hosts`): the `Host` a request names must be one of
//! them, so a page on a rebinding DNS name (`evil.example` resolving to this
//! server) is refused before anything happens, whatever its origin check says.
//!
//! Names are compared without the port (a proxy may forward `Host: name:8443`) and
//! ASCII case-insensitively; `*.example.com` also lets in every sub-domain of
//! `example.com` (not the bare name). No list (the default): any host. `/healthz`
//! is not checked (load balancers probe by address).

/// The configured host names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Hosts {
    #[default]
    Any,
    /// Lower-case names; a `*.` prefix matches sub-domains.
    List(Vec<String>),
}

impl Hosts {
    /// From `--allowed-hosts` values: none (any host) or a list of names.
    pub fn parse(values: &[String]) -> Result<Hosts, String> {
        let values: Vec<&str> = values
            .iter()
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() || values == ["*"] {
            return Ok(Hosts::Any);
        }
        let mut list = Vec::with_capacity(values.len());
        for v in values {
            let name = v.strip_prefix("*.").unwrap_or(v);
            let ok = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'));
            if !ok {
                return Err(format!(
                    "--allowed-hosts: {v:?} is not a host name (name, *.domain or an address)"
                ));
            }
            list.push(v.to_ascii_lowercase());
        }
        Ok(Hosts::List(list))
    }

    /// Is a request with this `Host` header (or none) let in?
    pub fn allows(&self, host: Option<&str>) -> bool {
        let Hosts::List(list) = self else {
            return true;
        };
        let Some(host) = host else {
            return false;
        };
        let name = strip_port(host);
        list.iter().any(|allowed| match allowed.strip_prefix("*.") {
            Some(domain) => {
                name.len() > domain.len() + 1 && {
                    let (head, tail) = name.split_at(name.len() - domain.len());
                    head.ends_with('.') && tail.eq_ignore_ascii_case(domain)
                }
            }
            None => name.eq_ignore_ascii_case(allowed),
        })
    }

    /// For the start line.
    pub fn describe(&self) -> String {
        match self {
            Hosts::Any => "any".into(),
            Hosts::List(l) => l.join(","),
        }
    }
}

/// `name:port` → `name`; `[v6]:port` → `[v6]`; a bare name or address as is.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |i| &host[..=i]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if !name.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            name
        }
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_without_the_port_and_wildcards_match_sub_domains_only() {
        assert!(Hosts::parse(&[]).unwrap().allows(None));
        let hosts = Hosts::parse(&[
            "push.example.com".into(),
            "*.cdn.example".into(),
            "127.0.0.1".into(),
            "[::1]".into(),
        ])
        .unwrap();
        for ok in [
            "push.example.com",
            "PUSH.example.com:8443",
            "a.cdn.example",
            "x.y.cdn.example:80",
            "127.0.0.1:8000",
            "[::1]:8000",
        ] {
            assert!(hosts.allows(Some(ok)), "{ok}");
        }
        for bad in [
            "evil.example",
            "cdn.example",
            "xcdn.example",
            "push.example.com.evil",
            "127.0.0.2",
        ] {
            assert!(!hosts.allows(Some(bad)), "{bad}");
        }
        assert!(!hosts.allows(None), "a list needs a Host");
        assert!(Hosts::parse(&["a b".into()]).is_err());
        assert!(Hosts::parse(&["http://a".into()]).is_err());
    }
}
