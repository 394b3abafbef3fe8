//! Channel names (docs/protocol.md "Channels"): 1 to [`MAX_NAME`] bytes of
//! `A–Z a–z 0–9 _ - = @ , . ; :`, not all digits (an all-digit name is a subject
//! id: a user of the follower graph), and not one of the SSE event names myriad
//! itself sends or a browser's `EventSource` fires ([`RESERVED`]), since on SSE a
//! channel's messages are events named after it.

/// Longest channel name, in bytes (names from other systems carry over).
pub const MAX_NAME: usize = 200;

/// Most channels one request may name, whatever `--max-channels-per-connection`
/// says: the parse of a query stays bounded.
pub const MAX_PER_REQUEST: usize = 255;

/// SSE event names of myriad's own events (`gap`, `expired`, `refused`,
/// `reconnect`) and of `EventSource`'s (`message`, `open`, `error`), which no
/// channel may take.
pub const RESERVED: [&str; 7] = [
    "message",
    "open",
    "error",
    "gap",
    "expired",
    "refused",
    "reconnect",
];

/// Why `name` is not a channel name; `Ok` when it is one.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("a channel name is empty");
    }
    if name.len() > MAX_NAME {
        return Err("a channel name is longer than 200 bytes");
    }
    if !name.bytes().all(allowed) {
        return Err("a channel name has a character outside A-Z a-z 0-9 _ - = @ , . ; :");
    }
    if name.bytes().all(|b| b.is_ascii_digit()) {
        return Err("an all-digit channel name is a subject id");
    }
    if RESERVED.contains(&name) {
        return Err("this channel name is one of the SSE event names myriad sends");
    }
    Ok(())
}

/// What ends the name of a channel's presence companion: the internal channel its
/// join/leave events are published on (docs/protocol.md "Presence events"). `~` is
/// outside the characters a client may use, so no client name can take it.
pub const PRESENCE_SUFFIX: &str = "~presence";

/// The presence companion of channel `name`.
pub fn presence_channel(name: &str) -> String {
    format!("{name}{PRESENCE_SUFFIX}")
}

/// The channel whose presence companion `name` is (`None`: not a companion).
pub fn presence_of(name: &str) -> Option<&str> {
    name.strip_suffix(PRESENCE_SUFFIX)
}

/// What ends the name of a user's friends companion: the internal channel the
/// `online`/`offline` changes of the users they follow are published on
/// (docs/protocol.md "Friends online"), `<user>~friends`.
pub const FRIENDS_SUFFIX: &str = "~friends";

/// The friends companion of `user`.
pub fn friends_channel(user: u64) -> String {
    format!("{user}{FRIENDS_SUFFIX}")
}

/// The user whose friends companion `name` is (`None`: not one).
pub fn friends_of(name: &str) -> Option<u64> {
    let id = name.strip_suffix(FRIENDS_SUFFIX)?;
    // Digits only: `u64::from_str` would take a leading `+`.
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    id.parse().ok()
}

/// Whether `name` is an internal companion (presence or friends): a channel no
/// client names, joined beside what the client asked for.
pub fn is_companion(name: &str) -> bool {
    presence_of(name).is_some() || friends_of(name).is_some()
}

fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"_-=@,.;:".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_other_systems_carry_over_and_the_rest_is_refused() {
        for good in [
            "room:1",
            "news",
            "ns:a.b,c;d=e@f_g-h",
            "a1",
            &"x".repeat(200),
        ] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "42",
            "a b",
            "a/b",
            "é",
            "gap",
            "error",
            "reconnect",
            &"x".repeat(201),
            "a\n",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_presence_companion_is_no_client_name_and_names_its_channel() {
        let companion = presence_channel("room:1");
        assert!(check_name(&companion).is_err());
        assert_eq!(presence_of(&companion), Some("room:1"));
        assert_eq!(presence_of("room:1"), None);
    }

    #[test]
    fn a_friends_companion_is_no_client_name_and_names_its_user() {
        let companion = friends_channel(42);
        assert!(check_name(&companion).is_err());
        assert_eq!(friends_of(&companion), Some(42));
        for not in [
            "42",
            "~friends",
            "+4~friends",
            "a~friends",
            "99999999999999999999~friends",
        ] {
            assert_eq!(friends_of(not), None, "{not}");
        }
    }
}
