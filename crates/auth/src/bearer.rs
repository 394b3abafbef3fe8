//! `Authorization: Bearer <token>` (RFC 6750 2.1). The scheme is case-insensitive;
//! the token is one `token68` word (base64url characters, `.`, `~`, `+`, `/`, `=`).

/// The token of a Bearer `Authorization` value, or `None` for another scheme, an
/// empty token or one with characters outside `token68`.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, rest) = authorization.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_matches(' ');
    let token68 = |b: u8| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b);
    (!token.is_empty() && token.bytes().all(token68)).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(bearer_token("Bearer abc.def-_~+/="), Some("abc.def-_~+/="));
        assert_eq!(bearer_token("bearer  x "), Some("x"));
        assert_eq!(bearer_token("BEARER x"), Some("x"));
        for bad in [
            "Bearer",
            "Bearer ",
            "Basic eDp5",
            "Bearer a b",
            "Bearerx y",
            "Bearer a\tb",
            "Bearer é",
        ] {
            assert_eq!(bearer_token(bad), None, "{bad:?}");
        }
    }
}
