//! `GET /presence/…` on a supervisor's admin listener: handed to the admin
//! listener of the router shard that owns the channel (or user), which answers it
//! from its hub (`presence_query`), off every event loop. A supervised server then
//! answers a back-end's list where a single process does, and with the router's
//! exact list: the gateways hold no members of their own.
//!
//! The supervisor checks the caller's credentials itself (the router sees the
//! supervisor, a loopback peer) and passes `Authorization` on. One loopback
//! connection per ask: the admin listener answers one request at a time anyway.

use super::child::{Member, Role};
use super::lock;
use auth::ApiKeys;
use cluster::Shards;
use observe::{Query, QueryAnswer, QueryFn};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest a router's admin listener may take to answer before the ask fails
/// with 504 (a router building its index at start, or gone).
const ROUTER_TIMEOUT: Duration = Duration::from_secs(5);

/// The supervisor's presence hook over its `members`, routed by `shards`
/// (`--router-shards`), checking `keys`.
pub fn hook(members: Arc<Mutex<Vec<Member>>>, shards: u16, keys: ApiKeys) -> QueryFn {
    Arc::new(move |q: &Query<'_>| Some(answer(&members, shards, &keys, q)))
}

fn text(status: u16, body: &str) -> QueryAnswer {
    QueryAnswer {
        status,
        json: false,
        body: format!("{body}\n").into_bytes(),
    }
}

fn answer(members: &Mutex<Vec<Member>>, shards: u16, keys: &ApiKeys, q: &Query<'_>) -> QueryAnswer {
    if let Some(refused) = crate::presence_query::refusal(keys, q) {
        return refused;
    }
    let (of, _) = match crate::presence_query::parse(q.path) {
        Ok(asked) => asked,
        Err(refused) => return refused,
    };
    let shards = Shards {
        index: 0,
        count: shards.max(1),
    };
    let owner = match &of {
        bus::PresenceOf::Channel(name) => shards.owner_of_channel(name),
        bus::PresenceOf::Subject(user) => shards.owner(*user),
    };
    let admin = lock(members)
        .iter()
        .find(|m| m.role == Role::Router(owner))
        .and_then(Member::admin_addr);
    let Some(admin) = admin else {
        return text(503, "unavailable: the router is starting");
    };
    ask(admin, q).unwrap_or_else(|e| text(504, &format!("the router did not answer: {e}")))
}

/// `q` asked of the router's admin listener at `admin`: its status, type and body.
fn ask(admin: SocketAddr, q: &Query<'_>) -> std::io::Result<QueryAnswer> {
    let mut s = TcpStream::connect_timeout(&admin, ROUTER_TIMEOUT)?;
    s.set_read_timeout(Some(ROUTER_TIMEOUT))?;
    s.set_nodelay(true)?;
    let authorization = q
        .authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {} HTTP/1.1\r\nHost: supervisor\r\nConnection: close\r\n{authorization}\r\n",
        q.path
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    QueryAnswer::read(&raw)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP answer"))
}
