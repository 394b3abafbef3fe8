//! The JSON a back-end gets for its publish on `myriad.pub.<subject>` (SPEC C4):
//! `{"connections":n,"users":u}`, or `{"error":…}` with the counts and `"not_stored"`
//! when the history write failed, `"timed_out":true` when some shard did not count
//! in time. The router writes it (`router_role`); the publish port's NATS path reads
//! it back into its HTTP answer (`publish_port::over_nats`). Not the gateways' wire:
//! that is [`crate::codec`].

use bus::Reply;

/// The JSON a back-end gets for a publish's answer.
pub fn answer_json(answer: &Reply) -> String {
    match answer {
        Reply::Published {
            connections, users, ..
        } => serde_json::json!({"connections": connections, "users": users}).to_string(),
        Reply::NotStored {
            connections,
            users,
            error,
            ..
        } => serde_json::json!({
            "error": format!(
                "history not stored: {error}; delivered to {connections} connections of {users} users"
            ),
            "not_stored": error,
            "connections": connections,
            "users": users,
        })
        .to_string(),
        Reply::Unavailable(why) => serde_json::json!({ "error": why }).to_string(),
        // Part may have gone out: retrying would repeat it.
        Reply::TimedOut(why) => {
            serde_json::json!({ "error": why, "timed_out": true }).to_string()
        }
        other => serde_json::json!({ "error": format!("{other:?}") }).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_back_end_gets_counts_or_the_error() {
        let published = Reply::Published {
            messages: 1,
            connections: 7,
            users: 3,
        };
        assert_eq!(answer_json(&published), r#"{"connections":7,"users":3}"#);
        let late = Reply::Unavailable("router shard 1 did not count".into());
        assert_eq!(
            answer_json(&late),
            r#"{"error":"router shard 1 did not count"}"#
        );
        let not_stored = Reply::NotStored {
            messages: 1,
            connections: 2,
            users: 1,
            error: "disk full".into(),
        };
        assert!(answer_json(&not_stored).contains("history not stored: disk full"));
    }
}
